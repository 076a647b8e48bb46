'use strict'
// The prebuilt platforms, as the repository's scripts/targets lists them: [{ triple, platform,
// policy }] (Rust target triple, napi-rs platform name, wheel policy or '-').
const fs = require('node:fs')
const path = require('node:path')

const file = path.join(__dirname, '..', '..', 'scripts', 'targets')

function targets() {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .map((l) => l.replace(/#.*/, '').trim())
    .filter(Boolean)
    .map((l) => {
      const [triple, platform, policy] = l.split(/\s+/)
      return { triple, platform, policy }
    })
}

module.exports = { targets }
