import { EventEmitter } from 'node:events'
import type { Cache, CacheOptions } from '../index'

/** Options of `new KeyvHerdless(...)`. */
export interface KeyvHerdlessOptions {
  /**
   * The Keyv namespace when Keyv sets none (default `'keyv'`): keys are stored as
   * `<namespace>:<key>`, so it is the herdless namespace, and `clear()` bumps it.
   */
  namespace?: string
  /**
   * The Keyv contract spoken: 6 (default; `capabilities.expires`: `set` takes an absolute
   * expiry, `deleteMany` answers one boolean per key) or 5 (`set` takes a ttl in ms,
   * `deleteMany` answers whether every key was there).
   */
  keyv?: 5 | 6
}

/** What a Keyv 6 storage adapter declares (`capabilities`). */
export interface KeyvHerdlessCapabilities {
  /** Always true. */
  compatible: true
  /** Always `'keyvStorage'`. */
  store: 'keyvStorage'
  /** Each storage method: all async, and no `iterator` (the engine lists no keys). */
  methods: Record<string, { exists: boolean; methodType: 'async' | 'none' }>
  /** `true` with Keyv 6's contract (absolute expiry times on `set`); absent with `keyv: 5`. */
  expires?: true
}

/** One entry of `setMany`. */
export interface KeyvHerdlessEntry {
  /** The key (without the namespace). */
  key: string
  /** The value, as Keyv encoded it. */
  value: unknown
  /** Keyv 6: the absolute expiry, ms since the epoch. */
  expires?: number
  /** Keyv 5: the ttl in ms. */
  ttl?: number
}

/**
 * A Keyv storage adapter over a herdless `Cache`:
 * `new Keyv({ store: new KeyvHerdless(cacheOrOptions) })`. Given a Cache it uses it (and
 * `disconnect()` leaves it open); given Cache options it makes one (`jitter` 0 and `ttl` one
 * day unless given: the lifetime of what Keyv stores without expiry; `disconnect()` closes
 * it). Values are stored as Keyv hands them (Keyv serializes); `get` reads this process's
 * memory, then the shared tier; `clear()` is the namespace's O(1) `bump`, fleet-wide. Errors
 * reject the call (Keyv reports them with its own `'error'` event).
 */
export declare class KeyvHerdless extends EventEmitter {
  constructor(cache: Cache, options?: KeyvHerdlessOptions)
  constructor(options?: CacheOptions & KeyvHerdlessOptions)
  /** The Cache the entries live in. */
  readonly cache: Cache
  /** The options given (Keyv reads its store's `opts`); `dialect` is `'herdless'`. */
  opts: Record<string, unknown>
  /** The Keyv namespace (Keyv sets it); undefined: the adapter's own (default `'keyv'`). */
  namespace: string | undefined
  /** What the adapter can do, as Keyv 6 reads it. */
  readonly capabilities: KeyvHerdlessCapabilities
  /** The value of `key` (this process's memory, else the shared tier), or `undefined`. */
  get(key: string): Promise<unknown>
  /** The values of `keys`, in their order. */
  getMany(keys: string[]): Promise<unknown[]>
  /** Whether `key` has a value `get` would answer. */
  has(key: string): Promise<boolean>
  /** `has` of each key. */
  hasMany(keys: string[]): Promise<boolean[]>
  /**
   * Stores `value`. `when`: Keyv 6, the absolute expiry (ms since the epoch; past: the key is
   * removed); Keyv 5, the ttl in ms. None: the Cache's `ttl`. Resolves to `true`.
   */
  set(key: string, value: unknown, when?: number): Promise<boolean>
  /** `set` of each entry; one `true` per entry. */
  setMany(entries: KeyvHerdlessEntry[]): Promise<boolean[]>
  /** Removes `key` (fleet-wide with a shared tier): whether there was an entry. */
  delete(key: string): Promise<boolean>
  /** `delete` of each key: Keyv 6, one boolean per key; Keyv 5, whether every key was there. */
  deleteMany(keys: string[]): Promise<boolean[] | boolean>
  /** Drops every key of the namespace at once (`cache.bump`). */
  clear(): Promise<void>
  /** Closes the Cache the adapter made; one you passed stays open. */
  disconnect(): Promise<void>
}

/**
 * A namespace name as a herdless namespace (what the adapter and herdless/cache-manager store
 * keys under): the characters a namespace may not hold, and `~`, become `~XX`.
 */
export declare function namespaceOf(namespace: string): string

export default KeyvHerdless
