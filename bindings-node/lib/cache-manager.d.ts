import { EventEmitter } from 'node:events'
import type { Cache, CacheOptions } from '../index'
import type { KeyvHerdless } from './keyv'

/** Options of `createCache`: the Cache's own (when it makes one), and these. */
export interface CreateCacheOptions extends CacheOptions {
  /**
   * The Cache to use (it stays yours: `disconnect()` leaves it open). Without it, one is made
   * from these options, with `jitter` 0 unless given.
   */
  cache?: Cache
  /**
   * Milliseconds an entry lives when `set`/`wrap` give no ttl (default one day, standing for
   * cache-manager's "no ttl").
   */
  ttl?: number
  /**
   * cache-manager's refresh threshold (ms): a `wrap` hit with less than this left of its ttl
   * is answered at once and refreshed in the background. It becomes the Cache's
   * `refreshAhead: 1 - refreshThreshold / ttl` (refused with `cache`: set `refreshAhead` on
   * it); a per-call `refreshThreshold` of `wrap` is not applied (a warning, once).
   */
  refreshThreshold?: number
  /** Where the keys live: each key is stored as `<namespace>:<key>` (default `'cache-manager'`). */
  namespace?: string
  /** The cache's id (`cacheId()`); default random. */
  cacheId?: string
}

/** One entry of `mset`. */
export interface CacheManagerEntry<T = unknown> {
  /** The key. */
  key: string
  /** The value. */
  value: T
  /** Its ttl in ms (default: the cache's). */
  ttl?: number
}

/** `wrap`'s options object (cache-manager 7's). */
export interface WrapOptions<T> {
  /** The ttl in ms, or a function of the loaded value answering it. */
  ttl?: number | ((value: T) => number)
  /** See `CreateCacheOptions.refreshThreshold` (not applied per call). */
  refreshThreshold?: number | ((value: T) => number)
  /** Answer `{ value, expires }` instead of the value. */
  raw?: boolean
}

/** The events of cache-manager 7 and their payloads. */
export type CacheManagerEvent = 'get' | 'mget' | 'ttl' | 'set' | 'mset' | 'del' | 'mdel' | 'clear' | 'refresh'

/** What `createCache` returns: cache-manager 7's cache. */
export interface HerdlessCacheManager {
  /** The value of `key` (this process's memory, else the shared tier), or `undefined`. Emits `get` on a hit. */
  get<T = unknown>(key: string): Promise<T | undefined>
  /** The values of `keys`, in their order. Emits `mget`. */
  mget<T = unknown>(keys: string[]): Promise<Array<T | undefined>>
  /** The absolute expiry (ms since the epoch) of `key`'s fresh value, or `undefined`. Emits `ttl`. */
  ttl(key: string): Promise<number | undefined>
  /** Stores `value` for `ttl` ms (default: the cache's) and resolves to it. Emits `set`. */
  set<T>(key: string, value: T, ttl?: number): Promise<T>
  /** Stores each entry; resolves to the list. Emits `mset`. */
  mset<T>(list: Array<CacheManagerEntry<T>>): Promise<Array<CacheManagerEntry<T>>>
  /** Removes `key` (fleet-wide with a shared tier). Emits `del`. */
  del(key: string): Promise<true>
  /** Removes each of `keys`. Emits `mdel`. */
  mdel(keys: string[]): Promise<true>
  /** Drops every key of the cache's namespace at once (`bump`). Emits `clear`. */
  clear(): Promise<true>
  /**
   * The value of `key`, else `fn()`'s, stored for `ttl`: herdless's `getOrLoad`, so one call
   * of `fn` per key for every concurrent caller (fleet-wide with a shared tier). `undefined`
   * from `fn` is not stored; a rejection is not stored. Emits `set` for a load, `refresh`
   * for a background refresh (refresh-ahead, grace).
   */
  wrap<T>(key: string, fn: () => T | Promise<T>, ttl?: number | ((value: T) => number), refreshThreshold?: number): Promise<T>
  wrap<T>(key: string, fn: () => T | Promise<T>, options: WrapOptions<T> & { raw: true }): Promise<{ value: T; expires: number | undefined }>
  wrap<T>(key: string, fn: () => T | Promise<T>, options: WrapOptions<T>): Promise<T>
  /** Adds a listener (cache-manager's events); returns the emitter. */
  on(event: CacheManagerEvent, listener: (...args: any[]) => void): EventEmitter
  /** Removes a listener; returns the emitter. */
  off(event: CacheManagerEvent, listener: (...args: any[]) => void): EventEmitter
  /** Closes the Cache `createCache` made (one you passed stays open). */
  disconnect(): Promise<void>
  /** The cache's id. */
  cacheId(): string
  /** cache-manager's stores: one Keyv storage adapter over the same entries. */
  stores: [KeyvHerdless]
  /** The herdless Cache underneath (metrics, `prometheus()`, `alerts()`...). */
  cache: Cache
}

/** A cache with cache-manager 7's surface over a herdless Cache. */
export declare function createCache(options?: CreateCacheOptions): HerdlessCacheManager
