'use strict'
// The package's CommonJS entry: loads the native addon built for this platform and adds the
// `ABSENT` marker. The API itself is native (see index.d.ts, generated from src/), `testing`
// included (the in-memory shared tier with faults, for tests).
const { join } = require('node:path')
const { existsSync } = require('node:fs')
const { addonFile } = require('./scripts/platform.js')

const file = join(__dirname, addonFile())
if (!existsSync(file)) {
  throw new Error(
    `herdless: the native addon ${file} is missing. Build it with \`npm run build\` ` +
      '(or reinstall the package) on a machine with cargo.'
  )
}
const native = require(file)

module.exports = {
  Cache: native.Cache,
  buildKey: native.buildKey,
  testing: native.testing,
  ABSENT: Symbol.for('herdless.absent'),
}
