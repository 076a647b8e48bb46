'use strict'
// cache-manager 7's surface over a herdless Cache: code written for cache-manager (and
// @nestjs/cache-manager's CACHE_MANAGER) runs on herdless unchanged.
//
//   const { createCache } = require('herdless/cache-manager')
//   const cache = createCache({ ttl: 60_000, refreshThreshold: 10_000, redis: 'redis://127.0.0.1:6379' })
//   const user = await cache.wrap(`user:${id}`, () => db.user(id))
//
// `wrap` is the Cache's `getOrLoad`: one call of `fn` per key however many callers miss at
// once, in the whole fleet with a Redis tier (cache-manager's own `wrap` coalesces within one
// process only). `refreshThreshold` is herdless's refresh-ahead (`refreshAhead`, the share of
// the ttl after which a read refreshes in the background while the value is served);
// herdless's `grace` adds stale-while-revalidate past the ttl. Events are cache-manager's:
// names, payloads and order (`get`, `mget`, `ttl`, `set`, `mset`, `del`, `mdel`, `clear`,
// `refresh`). Keys are stored as `<namespace>:<key>` (namespace `cache-manager` unless
// given), so a key's own `:` never makes it a namespace of its own and `clear()` is one O(1)
// `bump` of the namespace.

const { EventEmitter } = require('node:events')
const { Cache } = require('..')
const { KeyvHerdless, namespaceOf } = require('./keyv.js')

const DEFAULT_NAMESPACE = 'cache-manager'
/** The lifetime of an entry stored with no ttl, in the Cache `createCache` makes. */
const DEFAULT_TTL = 86_400_000
const PRIMARY = 'primary'
const BACKGROUND = new Set(['refresh', 'earlyRefresh', 'refreshAhead'])

function isCache(value) {
  return value instanceof Cache || (value && typeof value.getOrLoad === 'function' && typeof value.bump === 'function')
}

// A ttl (ms) as herdless takes it: a positive number, else undefined (the Cache's own).
function positive(ttl) {
  return typeof ttl === 'number' && Number.isFinite(ttl) && ttl > 0 ? ttl : undefined
}

function resolve(valueOrFn, arg) {
  return typeof valueOrFn === 'function' ? valueOrFn(arg) : valueOrFn
}

// The engine's clock (Peek's `freshUntilMs` is on it) now, read from a private in-memory
// Cache: an entry just stored with ttl T is fresh until now + T. Used by `ttl(key)` to
// answer an absolute expiry time, which Peek does not carry.
let clockCache
function engineNow() {
  const T = 3_600_000
  clockCache = clockCache || new Cache({ ttl: T, jitter: 0, front: false, detector: false, capacity: 16 })
  clockCache.set('clock:now', 0).catch(() => {})
  const p = clockCache.peek('clock:now')
  return p.freshUntilMs - T + p.ageMs
}

/**
 * A cache-manager 7 compatible cache over a herdless `Cache`. `options.cache` uses yours (it
 * stays yours: `disconnect()` leaves it open); without it one is made from the other
 * options, which are the Cache's (`redis`, `grace`, `capacity`...), with `ttl` (default one
 * day: cache-manager's "no ttl"), `jitter` 0 unless given, and `refreshThreshold` (ms) as
 * `refreshAhead: 1 - refreshThreshold / ttl`. `namespace` (default `'cache-manager'`) is
 * where the keys live; `cacheId` names the cache (default: random).
 */
function createCache(options = {}) {
  if (!options || typeof options !== 'object') throw new TypeError('herdless/cache-manager: options must be an object')
  const { cache: given, namespace = DEFAULT_NAMESPACE, cacheId, refreshThreshold, stores, nonBlocking, ...cacheOptions } = options
  if (stores !== undefined) {
    throw new TypeError('herdless/cache-manager: `stores` is cache-manager\'s own; the store here is the herdless Cache (options.cache, or the Cache options)')
  }
  if (typeof namespace !== 'string' || namespace === '') throw new TypeError('herdless/cache-manager: options.namespace must be a non-empty string')
  const ttl = positive(options.ttl)
  let cache
  if (given !== undefined) {
    if (!isCache(given)) throw new TypeError('herdless/cache-manager: options.cache must be a herdless Cache')
    if (refreshThreshold !== undefined) {
      throw new TypeError('herdless/cache-manager: with options.cache, set refresh-ahead on that Cache (its refreshAhead option), not refreshThreshold')
    }
    cache = given
  } else {
    const base = { jitter: 0, ...cacheOptions, ttl: ttl ?? DEFAULT_TTL }
    if (refreshThreshold !== undefined) {
      if (!(typeof refreshThreshold === 'number' && refreshThreshold > 0)) {
        throw new TypeError('herdless/cache-manager: refreshThreshold must be a number of milliseconds > 0')
      }
      // refreshAhead is a share in (0, 1): a threshold at or past the ttl refreshes at once.
      base.refreshAhead = Math.min(Math.max(1 - refreshThreshold / base.ttl, 1e-6), 1 - 1e-6)
    }
    cache = new Cache(base)
  }
  const events = new EventEmitter()
  const id = cacheId ?? Math.random().toString(36).slice(2)
  const space = namespaceOf(namespace)
  const full = (key) => `${space}:${key}`
  let warned = false

  const get = async (key) => {
    try {
      const value = await cache.read(full(key))
      if (value !== undefined) events.emit('get', { key, value, store: PRIMARY })
      return value
    } catch (error) {
      events.emit('get', { key, error, store: PRIMARY })
      return undefined
    }
  }

  const mget = async (keys) => {
    let values = keys.map(() => undefined)
    try {
      values = await Promise.all(keys.map((key) => cache.read(full(key))))
    } catch (error) {
      events.emit('mget', { keys, error })
    }
    events.emit('mget', { keys, values })
    return values
  }

  // The absolute expiry (ms since the epoch) of `key`'s fresh value, or undefined.
  const expiresOf = (key) => {
    const p = cache.peek(full(key))
    if (p === undefined || p.state !== 'fresh') return undefined
    return Math.round(Date.now() + (p.freshUntilMs - engineNow()))
  }

  const ttlOf = async (key) => {
    let expires
    try {
      const value = await cache.read(full(key))
      expires = value === undefined && cache.peek(full(key)) === undefined ? undefined : expiresOf(key)
      if (expires !== undefined) events.emit('ttl', { key, value: { value, expires } })
    } catch (error) {
      events.emit('ttl', { key, error })
    }
    return expires
  }

  const setOne = async (key, value, t) => {
    const own = positive(t ?? ttl)
    try {
      await cache.set(full(key), value, own === undefined ? undefined : { ttl: own })
      events.emit('set', { key, value, store: PRIMARY })
      events.emit('set', { key, value })
      return value
    } catch (error) {
      events.emit('set', { key, value, error })
      throw error
    }
  }

  const mset = async (rawList) => {
    const list = rawList.map(({ key, value, ttl: t }) => ({ key, value, ttl: t ?? ttl }))
    try {
      await Promise.all(list.map(({ key, value, ttl: t }) => {
        const own = positive(t)
        return cache.set(full(key), value, own === undefined ? undefined : { ttl: own })
      }))
      events.emit('mset', { list })
      return list
    } catch (error) {
      events.emit('mset', { list, error })
      throw error
    }
  }

  const del = async (key) => {
    try {
      await cache.invalidate(full(key))
      events.emit('del', { key })
      return true
    } catch (error) {
      events.emit('del', { key, error })
      throw error
    }
  }

  const mdel = async (keys) => {
    try {
      await Promise.all(keys.map((key) => cache.invalidate(full(key))))
      events.emit('mdel', { keys })
      return true
    } catch (error) {
      events.emit('mdel', { keys, error })
      throw error
    }
  }

  const clear = async () => {
    try {
      await cache.bump(space)
      events.emit('clear')
      return true
    } catch (error) {
      events.emit('clear', error)
      throw error
    }
  }

  const wrap = async (key, fn, ttlOrOptions, refreshThresholdParameter) => {
    const isOptions = ttlOrOptions !== null && typeof ttlOrOptions === 'object'
    const { ttl: t, refreshThreshold: threshold, raw } = isOptions
      ? ttlOrOptions
      : { ttl: ttlOrOptions, refreshThreshold: refreshThresholdParameter }
    if (threshold !== undefined && threshold !== refreshThreshold && !warned) {
      warned = true
      process.emitWarning(
        'herdless/cache-manager: a per-call refreshThreshold is not applied (refresh-ahead is the Cache\'s refreshAhead option); the cache\'s own is used',
        { code: 'HERDLESS_REFRESH_THRESHOLD' }
      )
    }
    const value = await cache.getOrLoad(full(key), async (ctx) => {
      const background = BACKGROUND.has(ctx.reason)
      let result
      try {
        result = await fn()
      } catch (error) {
        if (background) events.emit('refresh', { key, value: ctx.previous && ctx.previous.value, error })
        throw error
      }
      // cache-manager never caches undefined: the next call runs fn again.
      if (result === undefined) {
        ctx.noCache()
        return result
      }
      const own = positive(resolve(t, result) ?? ttl)
      if (own !== undefined) ctx.setTtl(own)
      events.emit('set', { key, value: result, store: PRIMARY })
      events.emit('set', { key, value: result })
      if (background) events.emit('refresh', { key, value: result })
      return result
    })
    return raw ? { value, expires: expiresOf(key) } : value
  }

  return {
    get,
    mget,
    ttl: ttlOf,
    set: (key, value, t) => setOne(key, value, t),
    mset,
    del,
    mdel,
    clear,
    wrap,
    on: (event, listener) => events.addListener(event, listener),
    off: (event, listener) => events.removeListener(event, listener),
    disconnect: async () => {
      if (given === undefined) cache.close()
    },
    cacheId: () => id,
    // cache-manager's stores are Keyv stores: here one Keyv storage adapter over the same
    // entries (its keys are this cache's keys).
    stores: [new KeyvHerdless(cache, { namespace })],
    cache,
  }
}

module.exports = { createCache }
