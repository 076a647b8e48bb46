'use strict'
// The package's CommonJS entry: loads the native addon built for this platform and adds the
// `ABSENT` marker. The API itself is native (see index.d.ts, generated from src/), `testing`
// included (the in-memory shared tier with faults, for tests).
//
// The addon comes from, in order: this folder (a source checkout, built by `npm install` of
// the folder or `npm run build`), then the platform package the published `herdless` lists
// in its optionalDependencies (`herdless-linux-x64-gnu`, ... scripts/platform.js), which npm
// installs on the platform it was built for only.
const { join } = require('node:path')
const { existsSync } = require('node:fs')
const { addonFile, platformName, platformNames, platformPackage } = require('./scripts/platform.js')

function load() {
  const names = platformNames()
  for (const name of names) {
    const local = join(__dirname, addonFile(name))
    if (existsSync(local)) return require(local)
  }
  for (const name of names) {
    const pkg = platformPackage(name)
    try {
      return require(pkg)
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND' || !String(e.message).includes(pkg)) {
        e.message = `herdless: the prebuilt addon ${pkg} did not load: ${e.message}`
        throw e
      }
    }
  }
  const pkg = platformPackage(names[names.length - 1])
  const prebuilt = Object.keys(require('./package.json').optionalDependencies || {})
  const has = prebuilt.includes(pkg)
  throw new Error(
    `herdless: no native addon for this platform (${platformName()}). ` +
      (has
        ? `Its package ${pkg} is not installed: npm skips optional dependencies with ` +
          '--omit=optional or --no-optional, and a lock file made on another platform ' +
          `may leave it out; install it (npm install ${pkg}) or reinstall herdless.`
        : `Prebuilt addons exist for ${prebuilt.map((p) => p.replace(/^herdless-/, '')).join(', ') || 'no platform in this copy'}; ` +
          'elsewhere, build from source: npm install <herdless repository>/bindings-node ' +
          '(needs cargo and a Rust toolchain).')
  )
}

const native = load()
const { installFront } = require('./lib/front.js')

// The native class, with the JS front of recent answers (lib/front.js) installed on each
// instance unless the `front` option is false.
class Cache extends native.Cache {
  constructor(options) {
    super(options)
    installFront(this)
  }

  // `fn(lock)` under the lock on `key`, released in `finally` (index.d.ts, `withLock`). A
  // failed release must not hide the error `fn` threw, so it is only surfaced after a success.
  async withLock(key, fn, options) {
    const lock = await this.lock(key, options)
    let result
    try {
      result = await fn(lock)
    } catch (e) {
      await lock.release().catch(() => {})
      throw e
    }
    await lock.release()
    return result
  }
}

// `using cache = new Cache(...)` and `await using` close the cache at the end of the block
// (README, "Lifecycle"). Defined where the runtime has the symbols (Node 20 does).
for (const [symbol, dispose] of [
  [Symbol.dispose, function dispose() { this.close() }],
  [Symbol.asyncDispose, async function asyncDispose() { this.close() }],
]) {
  if (typeof symbol === 'symbol') {
    Object.defineProperty(Cache.prototype, symbol, { value: dispose, writable: true, configurable: true })
  }
}

// `await using lock = await cache.lock(key)` releases it at the end of the block: only if
// this object still holds it, so an explicit `release()` before the end is not an error.
if (typeof Symbol.asyncDispose === 'symbol') {
  Object.defineProperty(native.FleetLock.prototype, Symbol.asyncDispose, {
    value: async function asyncDispose() {
      if (this.owned || this.lost) await this.release()
    },
    writable: true,
    configurable: true,
  })
}

module.exports = {
  Cache,
  FleetLock: native.FleetLock,
  buildKey: native.buildKey,
  httpCanonicalQuery: native.httpCanonicalQuery,
  httpKeeps: native.httpKeeps,
  defaults: native.defaults,
  testing: native.testing,
  ABSENT: Symbol.for('herdless.absent'),
}
