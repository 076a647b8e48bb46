'use strict'
// The rest of the API: get/set/invalidate/bump, absence, TTLs, stale-while-revalidate,
// the origin budget, wrap, warm, metrics, and that released values are let go.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache, ABSENT, buildKey } = require('herdless')
const { sleep, slowLoader, within } = require('./helpers.js')

test('get/set/invalidate keep the very object with copyValues: false', async () => {
  const cache = new Cache({ copyValues: false })
  const obj = { deep: { list: [1, 2] } }
  assert.equal(await cache.set('o:1', obj), undefined)
  assert.equal(cache.get('o:1'), obj)
  assert.equal(cache.get('o:2'), undefined)
  assert.equal(await cache.invalidate('o:1'), true)
  assert.equal(await cache.invalidate('o:1'), false)
  assert.equal(cache.get('o:1'), undefined)
  for (const v of [0, '', false, null, 12.5, 10n, Symbol('s'), () => 1]) {
    cache.set('p:1', v)
    assert.equal(cache.get('p:1'), v)
  }
})

test('undefined and null are cached values; ABSENT is a cached absence', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  const undef = slowLoader(1, undefined)
  assert.equal(await cache.getOrLoad('u:1', undef), undefined)
  assert.equal(await cache.getOrLoad('u:1', undef), undefined)
  assert.equal(undef.calls, 1)
  const nul = slowLoader(1, null)
  assert.equal(await cache.getOrLoad('n:1', nul), null)
  assert.equal(await cache.getOrLoad('n:1', nul), null)
  assert.equal(nul.calls, 1)

  const absent = slowLoader(1, ABSENT)
  assert.equal(await cache.getOrLoad('a:1', absent), undefined)
  assert.equal(await cache.getOrLoad('a:1', absent), undefined)
  assert.equal(absent.calls, 1)
  assert.equal(cache.metrics().total.negativeHits, 1)
  assert.equal(cache.get('a:1'), undefined)
  assert.equal(ABSENT, Symbol.for('herdless.absent'))

  cache.set('a:2', ABSENT)
  assert.equal(await cache.getOrLoad('a:2', async () => 'loaded'), undefined)
})

test('negativeTtl bounds a cached absence; a real write replaces it', { timeout: 10_000 }, async () => {
  const cache = new Cache({ negativeTtl: 40, jitter: 0 })
  assert.equal(await cache.getOrLoad('neg:1', async () => ABSENT), undefined)
  await sleep(60)
  assert.equal(await cache.getOrLoad('neg:1', async () => 'now here'), 'now here')
  cache.set('neg:2', ABSENT)
  cache.set('neg:2', 'written')
  assert.equal(cache.get('neg:2'), 'written')
})

test('ttl: per cache, per set and per getOrLoad', { timeout: 10_000 }, async () => {
  const cache = new Cache({ ttl: 60_000, jitter: 0, beta: 0 })
  cache.set('t:1', 'short', { ttl: 30 })
  await cache.getOrLoad('t:2', async () => 'short too', { ttl: 30 })
  cache.set('t:3', 'long')
  await sleep(60)
  assert.equal(cache.get('t:1'), undefined)
  assert.equal(cache.get('t:2'), undefined)
  assert.equal(cache.get('t:3'), 'long')
})

test('bump invalidates a namespace in O(1); a load that began before is not stored', { timeout: 10_000 }, async () => {
  const cache = new Cache({ namespace: 'users' })
  cache.set('users:1', 'a')
  cache.set('orders:1', 'b')
  const before = await cache.bump('users')
  assert.equal(cache.get('users:1'), undefined)
  assert.equal(cache.get('orders:1'), 'b')
  assert.equal(await cache.bump(), before + 1) // the cache's namespace

  const loading = cache.getOrLoad('users:2', slowLoader(60, 'old epoch'))
  await sleep(10)
  cache.bump('users')
  assert.equal(await loading, 'old epoch')
  assert.equal(cache.get('users:2'), undefined)
})

test('a set during a load wins over the load', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  const loading = cache.getOrLoad('w:1', slowLoader(60, 'stale read'))
  await sleep(10)
  cache.set('w:1', 'newer write')
  assert.equal(await loading, 'stale read')
  assert.equal(cache.get('w:1'), 'newer write')
})

test('stale-while-revalidate: stale served at once, one background refresh', { timeout: 10_000 }, async () => {
  const cache = new Cache({ ttl: 40, grace: 5_000, jitter: 0, beta: 0 })
  await cache.getOrLoad('s:1', async () => 'v1')
  await sleep(60)
  let refreshed = false
  const refresh = slowLoader(100, () => ((refreshed = true), 'v2'))
  const served = await Promise.all(Array.from({ length: 100 }, () => cache.getOrLoad('s:1', refresh)))
  assert.equal(refreshed, false, 'stale values are served without waiting for the refresh')
  assert.deepEqual(served, Array(100).fill('v1'))
  await within(5_000, (async () => { while (!refreshed) await sleep(10) })(), 'the refresh')
  await sleep(20)
  assert.equal(refresh.calls, 1)
  assert.equal(cache.get('s:1'), 'v2')
  const total = cache.metrics().total
  assert.equal(total.refreshes, 1)
  assert.ok(total.staleServed >= 100)
})

test('originBudget bounds concurrent loader calls across keys', { timeout: 10_000 }, async () => {
  const cache = new Cache({ originBudget: 2 })
  let running = 0
  let peak = 0
  const loader = async () => {
    running++
    peak = Math.max(peak, running)
    await sleep(30)
    running--
    return 'ok'
  }
  const keys = Array.from({ length: 8 }, (_, i) => `b:${i}`)
  const values = await within(5_000, Promise.all(keys.map((k) => cache.getOrLoad(k, loader))))
  assert.deepEqual(values, Array(8).fill('ok'))
  assert.equal(peak, 2)
})

test('buildKey is the canonical key builder', () => {
  assert.equal(buildKey({ namespace: 'shop', entity: 'products', params: { page: 2 } }), 'shop:v1:products?page=#2')
  assert.equal(
    buildKey({ namespace: 'users', version: 2, entity: 'profile', id: 42, params: { lang: 'en', fields: ['name', 'email'], team: null } }),
    'users:v2:profile:#42?fields=#[email,name]&lang=en&team=#null'
  )
  assert.equal(buildKey({ namespace: 'n', entity: 'e', id: 1.5 }), 'n:v1:e:#1.5e0')
  assert.equal(buildKey({ namespace: 'n', entity: 'e', id: 10n ** 20n }), 'n:v1:e:#100000000000000000000')
  assert.equal(buildKey({ namespace: 'n', entity: 'a:b c', id: '%' }), 'n:v1:a%3Ab%20c:%25')
  assert.throws(() => buildKey({ namespace: 'a:b', entity: 'e' }), { name: 'TypeError', code: 'HERDLESS_INVALID_KEY' })
  assert.throws(() => buildKey({ namespace: 'n', entity: '' }), { code: 'HERDLESS_INVALID_KEY' })
  assert.throws(() => buildKey({ namespace: 'n', entity: 'e', id: NaN }), { code: 'HERDLESS_INVALID_KEY' })
  assert.throws(() => buildKey({ namespace: 'n', entity: 'e', id: {} }), { name: 'TypeError' })
})

test('wrap memoises through canonical keys', { timeout: 10_000 }, async () => {
  const cache = new Cache({ namespace: 'app' })
  let calls = 0
  const user = cache.wrap(async function user(id) {
    calls++
    await sleep(20)
    return { id }
  })
  const [a, b] = await Promise.all([user(1), user(1)])
  assert.deepEqual(a, b)
  assert.equal(calls, 1)
  assert.deepEqual(cache.get('app:v1:user:#1'), a)

  const search = cache.wrap(async (q) => `results for ${q.term} p${q.page}`, { entity: 'search', version: 3 })
  assert.equal(await search({ page: 2, term: 'x' }), 'results for x p2')
  assert.ok(cache.get(buildKey({ namespace: 'app', version: 3, entity: 'search', params: { term: 'x', page: 2 } })))

  const add = cache.wrap(async (x, y) => x + y, { namespace: 'math', entity: 'add' })
  assert.equal(await add(1, 2), 3)
  assert.equal(cache.get('math:v1:add:#2?0=#1&1=#2'), 3)

  const keyed = cache.wrap(async (req) => req.id * 10, { entity: 'byKey', key: (req) => ({ id: req.id, params: { v: 1 } }) })
  assert.equal(await keyed(new (class Req { constructor() { this.id = 4 } })()), 40)
  assert.equal(cache.get('app:v1:byKey:#4?v=#1'), 40)

  const none = cache.wrap(async () => ABSENT, { entity: 'none' })
  assert.equal(await none(), undefined)

  const self = { factor: 3 }
  const method = cache.wrap(async function scaled(x) { return this.factor * x })
  assert.equal(await method.call(self, 5), 15)

  await assert.rejects(cache.wrap(async (d) => d, { entity: 'dates' })(new Date()), { name: 'TypeError' })
  assert.throws(() => cache.wrap(async () => 1), { name: 'TypeError' }) // no name
  assert.throws(() => new Cache().wrap(async function f() {}), { name: 'TypeError' }) // no namespace
  assert.throws(() => cache.wrap('nope'), { name: 'TypeError' })
})

test('warm loads keys with bounded concurrency and reports failures', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  cache.set('warm:0', 'already')
  let running = 0
  let peak = 0
  const keys = Array.from({ length: 20 }, (_, i) => `warm:${i}`)
  const report = await within(
    5_000,
    cache.warm(
      keys,
      async (key) => {
        running++
        peak = Math.max(peak, running)
        await sleep(10)
        running--
        if (key === 'warm:13') throw new Error('no 13')
        return key.toUpperCase()
      },
      { concurrency: 3 }
    )
  )
  assert.equal(report.ok, 19)
  assert.equal(report.failed, 1)
  assert.equal(report.errors[0].key, 'warm:13')
  assert.equal(report.errors[0].error.message, 'no 13')
  assert.ok(peak <= 3, `peak ${peak}`)
  assert.equal(cache.get('warm:0'), 'already')
  assert.equal(cache.get('warm:7'), 'WARM:7')

  const sync = await cache.warm(Array.from({ length: 5000 }, (_, i) => `sync:${i}`), (k) => k, { concurrency: 64 })
  assert.equal(sync.ok, 5000)
  await assert.rejects(cache.warm('warm:1', async () => 1), { name: 'TypeError' })
  await assert.rejects(cache.warm(['a:1'], async () => 1, { concurrency: 0 }), { name: 'RangeError' })
})

test('warm: a key another caller is loading is waited for, not loaded again, and counted skipped', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  const other = cache.getOrLoad('ws:0', async () => {
    await sleep(50)
    return 'theirs'
  })
  let calls = 0
  const report = await within(5_000, cache.warm(['ws:0', 'ws:1'], async (key) => {
    calls++
    return key
  }))
  assert.equal(await other, 'theirs')
  assert.equal(calls, 1)
  assert.deepEqual({ loaded: report.loaded, skipped: report.skipped, ok: report.ok }, { loaded: 1, skipped: 1, ok: 2 })
  assert.equal(cache.get('ws:0'), 'theirs')
  assert.equal(cache._internals().pendingCalls, 0)
})

test('warm: the engine decides how many load at once (4 by default, within originBudget); the report counts absences', { timeout: 10_000 }, async () => {
  const probe = (cache, keys, options) => {
    const seen = { running: 0, peak: 0 }
    const done = cache.warm(
      keys,
      async (key) => {
        seen.running++
        seen.peak = Math.max(seen.peak, seen.running)
        await sleep(10)
        seen.running--
        if (key.endsWith(':1')) return ABSENT
        if (key.endsWith(':2')) throw new Error('no 2')
        return key
      },
      options
    )
    return within(5_000, done).then((report) => ({ report, peak: seen.peak }))
  }
  const keys = Array.from({ length: 12 }, (_, i) => `w:${i}`)
  const { report, peak } = await probe(new Cache(), keys)
  assert.equal(peak, 4, 'the engine\'s default (DEFAULT_WARM_CONCURRENCY)')
  const { total, loaded, absent, skipped, ok, failed } = report
  assert.deepEqual({ total, loaded, absent, skipped, ok, failed }, { total: 12, loaded: 10, absent: 1, skipped: 0, ok: 11, failed: 1 })
  assert.deepEqual(report.errors.map((e) => [e.key, e.error.message]), [['w:2', 'no 2']])
  // Never more than the origin budget, whatever is asked; never more than the keys.
  assert.equal((await probe(new Cache({ originBudget: 2 }), keys, { concurrency: 8 })).peak, 2)
  assert.equal((await probe(new Cache({ originBudget: 2 }), keys)).peak, 2)
  assert.equal((await probe(new Cache(), keys, { concurrency: 6 })).peak, 6)
  assert.equal((await probe(new Cache(), ['x:0', 'x:3'])).peak, 2)
})

test('metrics mirror the engine snapshot; prometheus exposes them', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  await cache.getOrLoad('m:1', async () => 1)
  await cache.getOrLoad('m:1', async () => 1)
  await cache.getOrLoad('other:1', async () => 2)
  const m = cache.metrics()
  assert.equal(m.entries, 2)
  assert.equal(m.loadsInFlight, 0)
  assert.equal(m.total.loads, 2)
  assert.equal(m.total.hits, 1)
  assert.equal(m.total.misses, 2)
  const ns = m.namespaces.find((n) => n.namespace === 'm')
  assert.equal(ns.counters.loads, 1)
  assert.equal(ns.loadDuration.count, 1)
  assert.equal(ns.loadDuration.counts.length, ns.loadDuration.boundsMs.length + 1)
  assert.equal(typeof ns.loadDuration.p99Ms, 'number')
  assert.equal(ns.lockWait.p50Ms, null)
  for (const key of ['hits', 'negativeHits', 'staleServed', 'misses', 'failsafeServed', 'loads', 'loadErrors', 'loadTimeouts', 'abandonedLoads', 'coalescedWaiters', 'lockAcquired', 'lockContended', 'waitTimeouts', 'earlyRefreshes', 'refreshes', 'backendErrors', 'evictions']) {
    assert.equal(typeof m.total[key], 'number', key)
  }
  const text = cache.prometheus()
  assert.match(text, /herdless_loads_total\{namespace="m"\} 1/)
  assert.match(text, /# TYPE herdless_hits_total counter/)
})

test('evicted, replaced and failed values are released (no leak)', { timeout: 20_000 }, async () => {
  const cache = new Cache({ capacity: 16 })
  for (let i = 0; i < 2000; i++) {
    cache.set(`leak:${i % 100}`, { big: new Array(100).fill(i) })
  }
  for (let i = 0; i < 500; i++) {
    await cache.getOrLoad(`load:${i}`, async () => ({ i }))
    await cache.getOrLoad(`fail:${i}`, async () => { throw new Error('x') }).catch(() => {})
  }
  const { liveValues, pendingCalls, flights } = cache._internals()
  assert.ok(liveValues <= 16 + 4, `${liveValues} values still held for a capacity of 16`)
  assert.equal(pendingCalls, 0)
  assert.equal(flights, 0)
  assert.ok(cache.metrics().total.evictions > 0)

  // The JS values themselves are collectable once released.
  require('node:v8').setFlagsFromString('--expose-gc')
  const gc = require('node:vm').runInNewContext('gc')
  const ref = (() => {
    const obj = { held: true }
    cache.set('leak:held', obj)
    return new WeakRef(obj)
  })()
  await sleep(0)
  assert.ok(cache.get('leak:held'))
  for (let i = 0; i < 100; i++) cache.set(`leak:${i}`, i) // evicts it (capacity 16)
  cache.set('leak:held', 'replaced')
  await cache._internals() // collects released values
  let collected = false
  for (let i = 0; i < 100 && !collected; i++) {
    await sleep(10)
    gc()
    await sleep(0)
    collected = ref.deref() === undefined
  }
  assert.ok(collected, 'a replaced value was not released')
})

test('a finished program exits: nothing keeps the event loop alive', { timeout: 20_000 }, async () => {
  const { spawnSync } = require('node:child_process')
  const script = `
    const { Cache } = require(${JSON.stringify(require.resolve('herdless'))})
    const cache = new Cache({ waitTimeout: 60000 })
    const slow = () => new Promise((r) => setTimeout(() => r('v'), 100))
    Promise.all([cache.getOrLoad('k:1', slow), cache.getOrLoad('k:1', slow)]).then((v) => console.log(v.join(',')))
  `
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 15_000 })
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), 'v,v')
})

test('keys: non-ASCII, lone surrogates and long keys are read exactly', { timeout: 10_000 }, async () => {
  const cache = new Cache({ maxKeyLen: 4096 })
  const keys = ['ключ:1', 'emoji:🔥', 'mixed:a\u00e9b', 'real:\ufffd', `long:${'x'.repeat(200)}`, `longer:${'y'.repeat(3000)}`, `wide:${'я'.repeat(300)}`]
  keys.forEach((k, i) => cache.set(k, i))
  keys.forEach((k, i) => assert.equal(cache.get(k), i, k.slice(0, 20)))
  assert.equal(cache.get(`long:${'x'.repeat(199)}`), undefined)
  assert.equal(await cache.getOrLoad(keys[5], async () => 'unused'), 5)
  // A lone surrogate would read as U+FFFD (Node-API's conversion), folding 'lone:\ud800',
  // 'lone:\udfff' and 'lone:\ufffd' onto one key: it is refused instead.
  assert.throws(() => cache.get('real:\ud800'), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  await assert.rejects(cache.set('lone:\ud800', 1), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
})

test('keys at the edges of the stack buffers (127 UTF-16 units, 255 UTF-8 bytes) are read whole', () => {
  const cache = new Cache({ maxKeyLen: 4096 })
  // Each length is stored under two keys that differ only in their last character, so a
  // key cut at a buffer's edge would make them collide.
  const lengths = [2, 15, 16, 17, 125, 126, 127, 128, 129, 253, 254, 255, 256, 257]
  const keys = []
  for (const n of lengths) {
    for (const [fill, tail] of [['a', 'b'], ['a', 'c'], ['é', 'b'], ['é', 'c']]) {
      keys.push(fill.repeat(n - 1) + tail)
    }
  }
  assert.equal(new Set(keys).size, keys.length)
  keys.forEach((k, i) => cache.set(k, i))
  keys.forEach((k, i) => assert.equal(cache.get(k), i, `${k.length} units: ${k.slice(-3)}`))
  assert.equal(cache.get('a'.repeat(126) + 'd'), undefined)
})

test('the instance fast paths and the prototype methods agree', async () => {
  const cache = new Cache()
  cache.set('f:1', 'one')
  assert.ok(Object.hasOwn(cache, 'get') && Object.hasOwn(cache, 'getOrLoad'))
  assert.deepEqual(Object.keys(cache), [], 'the fast paths are not enumerable')
  assert.equal(Cache.prototype.get.call(cache, 'f:1'), cache.get('f:1'))
  // set/invalidate/bump take effect in this process at once, awaited or not.
  cache.set('f:3', 'now')
  assert.equal(cache.get('f:3'), 'now')
  cache.invalidate('f:3')
  assert.equal(cache.get('f:3'), undefined)
  assert.equal(await Cache.prototype.getOrLoad.call(cache, 'f:1', async () => 'x'), await cache.getOrLoad('f:1', async () => 'y'))
  assert.throws(() => cache.get(), { code: 'HERDLESS_INVALID_ARGUMENT' })
  await assert.rejects(cache.getOrLoad('f:2'), { code: 'HERDLESS_INVALID_ARGUMENT' })
})

test('a cache that is garbage collected lets its values go', { timeout: 20_000 }, async () => {
  require('node:v8').setFlagsFromString('--expose-gc')
  const gc = require('node:vm').runInNewContext('gc')
  const refs = []
  const fill = (options, fails) => {
    const cache = new Cache(options)
    const value = { big: new Array(1000).fill(7) }
    // Not awaited: the fleet write (failing here: it rejects) keeps the cache until it ends.
    cache.set('gc:1', value).then(
      () => fails && assert.fail('set resolved with the tier unreachable'),
      (e) => (fails ? assert.equal(e.code, 'HERDLESS_BACKEND') : assert.fail('set rejected'))
    )
    refs.push(new WeakRef(value))
  }
  fill({}, false)
  fill({ redis: 'redis://127.0.0.1:1' }, true) // the Redis tier (unreachable: nothing is sent)
  // `deref` keeps its target alive until the job ends: collect in a later job than any check.
  for (let i = 0; i < 150; i++) {
    await sleep(20)
    gc()
    await sleep(0)
    if (refs.every((r) => r.deref() === undefined)) break
  }
  assert.deepEqual(refs.map((r) => r.deref()), [undefined, undefined])
})
