'use strict'
// Keyv: a storage adapter putting a herdless Cache under Keyv (and so under everything built
// on Keyv: cache-manager 7's `stores`, @nestjs/cache-manager's `CacheModule`).
//
//   const { Keyv } = require('keyv')
//   const { KeyvHerdless } = require('herdless/keyv')
//   const keyv = new Keyv({ store: new KeyvHerdless({ redis: 'redis://127.0.0.1:6379' }) })
//   const sessions = new Keyv(new KeyvHerdless(cache), { namespace: 'sessions' })
//
// It speaks Keyv 6's storage contract (`capabilities.expires`: `set` gets an absolute
// `expires`; `deleteMany` and `hasMany` answer one boolean per key); `{ keyv: 5 }` speaks
// Keyv 5's (`set` gets a relative ttl; `deleteMany` answers one boolean). Keyv serializes the
// values itself; the adapter stores what Keyv hands it under `<namespace>:<key>`, so the
// Keyv namespace is the herdless namespace and `clear()` is its O(1) `bump` (in the whole
// fleet with a Redis tier). Every call is the Cache's own: `read`, `set`, `invalidate`,
// `bump`. There is no `iterator()`: the engine keeps no list of its keys.

const { EventEmitter } = require('node:events')
const { Cache } = require('..')

/** The namespace when neither Keyv nor the adapter's options give one. */
const DEFAULT_NAMESPACE = 'keyv'
/** The lifetime of an entry Keyv stores without expiry, in the adapter's own Cache. */
const DEFAULT_TTL = 86_400_000

const METHODS = ['get', 'getMany', 'has', 'hasMany', 'set', 'setMany', 'delete', 'deleteMany', 'clear', 'disconnect']

/**
 * A namespace name as a herdless namespace: the characters a namespace may not hold (and `~`,
 * the escape) become `~XX`, so any name has its own epoch and `bump` accepts it.
 */
function namespaceOf(namespace) {
  return namespace.replace(/[%:?&=,#[\] ~\u0000-\u001f\u007f]/g, (c) => '~' + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0'))
}

function isCache(value) {
  return value instanceof Cache || (value && typeof value.getOrLoad === 'function' && typeof value.bump === 'function')
}

/**
 * A Keyv storage adapter over a herdless `Cache`: `new KeyvHerdless(cache, options?)` uses
 * your cache (it stays yours: `disconnect()` leaves it open), `new KeyvHerdless(options?)`
 * makes one from the Cache options in `options` (`jitter` 0 and `ttl` one day unless given;
 * `disconnect()` closes it).
 */
class KeyvHerdless extends EventEmitter {
  constructor(cacheOrOptions, options) {
    super()
    let own
    if (isCache(cacheOrOptions)) {
      this.cache = cacheOrOptions
      own = false
      options = options || {}
    } else {
      if (options !== undefined) throw new TypeError('herdless/keyv: new KeyvHerdless(cache, options) or new KeyvHerdless(options)')
      options = cacheOrOptions || {}
      own = true
    }
    if (typeof options !== 'object') throw new TypeError('herdless/keyv: options must be an object')
    const { namespace, keyv, ...cacheOptions } = options
    if (keyv !== undefined && keyv !== 5 && keyv !== 6) throw new TypeError('herdless/keyv: options.keyv must be 5 or 6')
    if (namespace !== undefined && typeof namespace !== 'string') throw new TypeError('herdless/keyv: options.namespace must be a string')
    if (own) this.cache = new Cache({ jitter: 0, ttl: DEFAULT_TTL, ...cacheOptions })
    this._own = own
    this._legacy = keyv === 5
    this._namespace = namespace
    this._defaultNamespace = namespace || DEFAULT_NAMESPACE
    /** The options given (Keyv reads `opts` of its store). */
    this.opts = { dialect: 'herdless', ...options }
  }

  /** The Keyv namespace of the keys (Keyv sets it); `'keyv'` when none is set. */
  get namespace() {
    return this._namespace
  }

  set namespace(namespace) {
    this._namespace = namespace
  }

  /** What the adapter can do, for Keyv 6 (`expires: true`: it takes absolute expiry times). */
  get capabilities() {
    const methods = {}
    for (const name of METHODS) methods[name] = { exists: true, methodType: 'async' }
    methods.iterator = { exists: false, methodType: 'none' }
    const capabilities = { compatible: true, store: 'keyvStorage', methods }
    if (!this._legacy) capabilities.expires = true
    return capabilities
  }

  _key(key) {
    return `${namespaceOf(this._namespace || this._defaultNamespace)}:${key}`
  }

  // The ttl (ms) of a `set`'s third argument: Keyv 6's absolute `expires`, Keyv 5's ttl.
  // `undefined`: the Cache's own ttl; 0: already expired.
  _ttl(when) {
    if (typeof when !== 'number' || !Number.isFinite(when)) return undefined
    if (this._legacy) return when > 0 ? Math.ceil(when) : undefined
    return Math.max(0, Math.ceil(when - Date.now()))
  }

  /** The value stored under `key` (in this process, else the shared tier), or `undefined`. */
  async get(key) {
    return this.cache.read(this._key(key))
  }

  /** The values of `keys`, in their order (`undefined` for a missing one). */
  async getMany(keys) {
    return Promise.all(keys.map((key) => this.get(key)))
  }

  /** Whether `key` has a value that `get` would answer. */
  async has(key) {
    // `read` answers `undefined` exactly when `get` would (a miss, a cached absence, a
    // value past its grace); asked of the engine, not of this process's copy, which a tier
    // that keeps none (memcached) never has.
    return (await this.cache.read(this._key(key))) !== undefined
  }

  /** `has` of each of `keys`. */
  async hasMany(keys) {
    return Promise.all(keys.map((key) => this.has(key)))
  }

  /**
   * Stores `value` under `key`. Keyv 6: `when` is the absolute expiry (ms since the epoch);
   * Keyv 5: the ttl in ms. None: the Cache's `ttl`. Resolves to `true`.
   */
  async set(key, value, when) {
    const ttl = this._ttl(when)
    if (ttl === 0) {
      await this.cache.invalidate(this._key(key))
      return true
    }
    await this.cache.set(this._key(key), value, ttl === undefined ? undefined : { ttl })
    return true
  }

  /** `set` of each `{ key, value, expires }` (Keyv 5: `ttl`); one `true` per entry. */
  async setMany(entries) {
    return Promise.all(entries.map((e) => this.set(e.key, e.value, this._legacy ? e.ttl : e.expires)))
  }

  /** Removes `key` (in the whole fleet with a shared tier): whether there was an entry. */
  async delete(key) {
    return this.cache.invalidate(this._key(key))
  }

  /** `delete` of each of `keys`: Keyv 6, one boolean per key; Keyv 5, whether all were there. */
  async deleteMany(keys) {
    const removed = await Promise.all(keys.map((key) => this.delete(key)))
    return this._legacy ? removed.length > 0 && removed.every(Boolean) : removed
  }

  /** Drops every key of the namespace at once (`cache.bump(namespace)`). */
  async clear() {
    await this.cache.bump(namespaceOf(this._namespace || this._defaultNamespace))
  }

  /** Closes the Cache the adapter made (one you passed stays open). */
  async disconnect() {
    if (this._own) this.cache.close()
  }
}

module.exports = { KeyvHerdless, namespaceOf }
module.exports.default = KeyvHerdless
