// Type checks of the generated index.d.ts (run by `tsc --noEmit -p test/types`; never run).
// Lines marked @ts-expect-error must fail to type-check, so the types are not just `any`.
import { ABSENT, Cache, FleetLock, buildKey, defaults, testing } from 'herdless'
import type { CacheEvent, CacheEventName, CacheOptions, CodecObject, Defaults, DetectorOptions, LockOptions, Metrics, Peek, WarmReport } from 'herdless'

interface User {
  id: number
  name: string
}

const options: CacheOptions = { ttl: 60_000, grace: 30_000, namespace: 'users', redis: undefined }
const cache = new Cache(options)

async function usage(signal: AbortSignal): Promise<void> {
  const user: User | undefined = await cache.getOrLoad('users:1', async (): Promise<User> => ({ id: 1, name: 'Ada' }), {
    signal,
    ttl: 1000,
  })
  // The result's type is the loader's: ABSENT becomes undefined, and only a loader that
  // may return ABSENT adds undefined.
  const maybe: User | undefined = await cache.getOrLoad('users:2', async (): Promise<User | typeof ABSENT> => ABSENT)
  const exact: User = await cache.getOrLoad('users:1', async (): Promise<User> => ({ id: 1, name: 'Ada' }))
  const sync: number = await cache.getOrLoad('n:1', () => 42)
  const anything: unknown = await cache.getOrLoad('n:2', (): unknown => 1)
  void [exact, anything]

  const key: string = buildKey({ namespace: 'users', entity: 'profile', id: 42, params: { tags: ['a', 'b'], lang: null } })
  await cache.set(key, user)
  await cache.set(key, ABSENT, { ttl: 10 })
  const value: unknown = cache.get(key)
  const seen: Peek | undefined = cache.peek(key)
  if (seen) {
    const state: 'fresh' | 'stale' | 'failSafe' = seen.state
    const times: number[] = [seen.ageMs, seen.freshUntilMs, seen.staleUntilMs, seen.loadDurationMs]
    void [state, times, seen.value]
  }
  const shared: Promise<unknown> = cache.read(key)
  void shared
  const removed: boolean = await cache.invalidate(key)
  const epoch: number = await cache.bump("users")
  await cache.set(key, user, { ttl: 10, tags: ['product:42', 'seller:7'] })
  const tagged: Promise<void> = cache.invalidateTag('product:42', { soft: true })
  await cache.invalidateTags(['seller:7'])
  void tagged
  if (seen) {
    const tags: string[] = seen.tags
    void tags
  }
  await cache.getOrLoad('pages:1', (ctx) => {
    ctx.setTags(['product:42'])
    const before: string[] | undefined = ctx.previous?.tags
    void before
    return 'page'
  })
  const tagging = cache.wrap(async (id: number) => id, { entity: 'tagged', tags: (id: number) => [`product:${id}`] })
  const fixed = cache.wrap(async (id: number) => id, { entity: 'fixed', tags: ['catalog'] })
  void [tagging, fixed]
  const m = cache.metrics()
  const tagCounts: number[] = [m.tags, m.tagInvalidations, m.tagExpirations, m.retiredTags]
  void tagCounts

  const profile = cache.wrap(async (id: number): Promise<User> => ({ id, name: 'x' }), { entity: 'profile', version: 2 })
  const p: User = await profile(3)
  const none = cache.wrap(async (id: number): Promise<User | typeof ABSENT> => (id ? { id, name: 'x' } : ABSENT), { entity: 'none' })
  const q: User | undefined = await none(0)
  void q
  const byKey = cache.wrap(async (a: string, b: number) => a.repeat(b), { key: (a: string, b: number) => ({ id: a, params: { b } }) })
  const s: string | undefined = await byKey('x', 2)

  const report: WarmReport = await cache.warm(['a:1'], async (k: string) => k, { concurrency: 4 })
  const failedKeys: string[] = report.errors.map((e) => e.key)
  const counts: number = report.loaded + report.absent + report.skipped + report.failed
  void counts
  const engine: Defaults = defaults()
  const tick: number = engine.detector.tick + engine.maxNamespaces + engine.warmConcurrency
  void tick
  const metrics: Metrics = cache.metrics()
  const hits: number = metrics.total.hits + metrics.namespaces[0].counters.coalescedWaiters
  const p99: number | null = metrics.namespaces[0].loadDuration.p99Ms
  const text: string = cache.prometheus()
  void [maybe, sync, value, removed, epoch, p, s, failedKeys, hits, p99, text]

  // The detector and the hot-key tracker.
  for (const alert of cache.alerts()) {
    const kind: 'missSpike' | 'originLatency' | 'lockWait' | 'sawtooth' = alert.kind
    const since: number = alert.sinceMs
    const key: string | undefined = alert.key
    const perSecond: number | undefined = alert.evidence.missesPerSecond
    const firstCure: string | undefined = alert.cures[0]
    void [kind, since, key, perSecond, firstCure, alert.message]
  }
  const saved: string = cache.exportHotKeys(100)
  const keys: string[] = new Cache({ detectorTick: 500 }).importHotKeys(saved)
  const thresholds: DetectorOptions = { spikeFactor: 8, minSpikeMisses: 50, hold: 60_000 }
  void [new Cache({ detector: thresholds }), new Cache({ detector: false })]
  const hottest: number | undefined = cache.hotKeys(10)[0]?.count
  const warmed = await cache.warm(keys, async (k) => k, { onProgress: (r) => void r.skipped })
  const loaded: number = warmed.loaded
  void [hottest, loaded]
  // The shared tier: an address, a cluster's nodes, a codec of your own; the testing store.
  const codec: CodecObject = { encode: (v) => Buffer.from(JSON.stringify(v)), decode: (b) => JSON.parse(b.toString()) }
  void [new Cache({ redis: 'memory://t', codec }), new Cache({ redis: ['redis://a:1', 'redis://b:2'] }), new Cache({ redis: 'redis+cluster://a:1,b:2', codec: 'buffer' })]
  const store: testing.MemoryStore = testing.memoryStore('t')
  store.setFault('down')
  store.setFault(null)
  store.setFault('stall', 'users')
  store.setFault(null, 'users')
  store.plant('k:1', 'junk')
  store.plantEpoch('k', '1.5')
  store.plantLock('k:1', 500)
  store.restartSubscriptions()
  const lost: number = cache.metrics().redis?.unshareableValues ?? 0
  void lost
  // @ts-expect-error: faults are a closed set
  store.setFault('flaky')
  // @ts-expect-error: a codec has both halves
  new Cache({ redis: 'memory://t', codec: { encode: (v: unknown) => Buffer.from(String(v)) } })

  // @ts-expect-error: alert kinds are a closed set
  const notAKind: 'stampede' = cache.alerts()[0].kind
  void notAKind

  // @ts-expect-error: keys are strings
  await cache.getOrLoad(1, async () => 1)
  // @ts-expect-error: durations are numbers of milliseconds
  new Cache({ ttl: '60s' })
  // @ts-expect-error: unknown option
  new Cache({ ttlMs: 5 })
  // @ts-expect-error: unknown detector option
  new Cache({ detector: { spikefactor: 8 } })
  // @ts-expect-error: the result may be undefined (the loader may answer ABSENT)
  const notUndefined: User = await cache.getOrLoad('users:1', async (): Promise<User | typeof ABSENT> => ({ id: 1, name: 'Ada' }))
  // @ts-expect-error: wrapped functions keep their parameter types
  await profile('not a number')
  void notUndefined
}

void usage

// The loader's context (issue #20).
async function contextUsage(): Promise<string> {
  const v = await cache.getOrLoad('page', async (ctx) => {
    const reason: 'first' | 'refresh' | 'earlyRefresh' | 'refreshAhead' | 'warm' = ctx.reason
    void reason
    const res = await fetch('http://localhost/', {
      signal: ctx.signal,
      headers: ctx.previous?.meta ? { 'if-none-match': ctx.previous.meta } : {},
    })
    if (res.status === 304) return ctx.notModified()
    ctx.setTtl(1000)
    ctx.meta = res.headers.get('etag') ?? undefined
    return await res.text()
  })
  return v
}
void contextUsage
// @ts-expect-error setTtl takes milliseconds as a number
void cache.getOrLoad('k', (ctx) => ctx.setTtl('1s'))
// Time-to-idle (issue 31): a cache option, a loader's own, a write's own.
void new Cache({ ttl: 3_600_000, tti: 60_000 })
void cache.getOrLoad('k', (ctx) => {
  ctx.setTti(5_000)
  return 'v'
})
void cache.set('k', 'v', { tti: 5_000 })
// @ts-expect-error setTti takes milliseconds as a number
void cache.getOrLoad('k', (ctx) => ctx.setTti('5s'))
// @ts-expect-error tti is in milliseconds (a number)
void new Cache({ tti: '1m' })

// Listeners (issue #20): on/once/off return the cache, the event is typed.
const listened: Cache = cache
  .on('evict', (e: CacheEvent) => {
    const kind: CacheEventName = e.kind
    const key: string = e.key
    void kind
    void key
  })
  .once('loadError', ({ error }) => void error)
  .off('failSafe', () => {})
void listened
void new Cache({ onEvent: (e) => void e.kind })
// @ts-expect-error an unknown event name
cache.on('evicted', () => {})

// A cache's lifecycle: close() releases it now; `using` / `await using` close it at the
// end of the block (through Symbol.dispose / Symbol.asyncDispose).
function lifecycleUsage(): void {
  const c = new Cache({ redis: 'memory://types' })
  const wasClosed: boolean = c.closed
  const closing: void = c.close()
  const disposed: void = c[Symbol.dispose]()
  const asyncDisposed: Promise<void> = c[Symbol.asyncDispose]()
  void [wasClosed, closing, disposed, asyncDisposed]
  // @ts-expect-error: `closed` is read-only
  c.closed = false
}
void lifecycleUsage

// Locks (cache.lock): resolved once held, with `timeout` (ms) and `signal`; tryLock may
// answer null; FleetLock's state is read-only; withLock passes fn's result through.
async function lockUsage(c: Cache): Promise<void> {
  const lock: FleetLock = await c.lock('jobs:v1:k', { timeout: 1000, signal: AbortSignal.timeout(5000) })
  const key: string = lock.key
  const owned: boolean = lock.owned
  const lost: boolean = lock.lost
  const released: boolean = await lock.release()
  void [key, owned, lost, released]
  const maybe: FleetLock | null = await c.tryLock('jobs:v1:k')
  // @ts-expect-error: tryLock may answer null
  const surely: FleetLock = await c.tryLock('jobs:v1:k')
  void [maybe, surely]
  const locked: boolean = await c.isLocked('jobs:v1:k')
  const n: number = await c.withLock('jobs:v1:k', async (l: FleetLock) => (l.owned ? 1 : 0), { timeout: 50 })
  const s: string = await c.withLock('jobs:v1:k', () => 'sync')
  void [locked, n, s]
  const options: LockOptions = { timeout: 0 }
  void options
  // @ts-expect-error: the timeout is a number of milliseconds
  void c.lock('k', { timeout: '1s' })
  // @ts-expect-error: unknown option
  void c.lock('k', { timeoutMs: 5 })
  // @ts-expect-error: `lost` is read-only
  lock.lost = false
  await using held = await c.lock('jobs:v1:k')
  const disposing: Promise<void> = held[Symbol.asyncDispose]()
  void disposing
}
void lockUsage
