'use strict'
// Listeners (issue #20): cache.on('evict' | 'expire' | 'loadError' | 'failSafe', fn), off,
// once and the onEvent option; events are told on the event loop after the fact, never on
// the hit path, and a listener that throws or falls behind never harms the cache.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const { Cache } = require('herdless')
const { sleep, startRedis, within } = require('./helpers.js')

/** The next event `name` of `cache` (a `once` listener). */
const next = (cache, name) => within(5000, new Promise((resolve) => cache.once(name, resolve)), `a '${name}' event`)

/** Polls `cond` until it holds. */
const until = (cond, what) =>
  within(
    5000,
    (async () => {
      while (!cond()) await sleep(5)
    })(),
    what
  )

test('evict: an entry evicted to stay within capacity, with its key', async () => {
  const cache = new Cache({ capacity: 1 })
  const seen = []
  cache.on('evict', (e) => seen.push(e))
  await cache.set('a', 1)
  await cache.set('b', 2)
  await until(() => seen.length === 1, 'the eviction')
  assert.deepEqual(seen, [{ kind: 'evict', key: 'a' }])
  assert.equal(cache.metrics().total.evictions, 1)
})

test('expire: an entry past its lifetime with no refresh, seen at its next lookup', async () => {
  const cache = new Cache({ ttl: 30, jitter: 0 })
  const expired = next(cache, 'expire')
  await cache.set('k', 1)
  await sleep(60)
  assert.equal(await cache.getOrLoad('k', () => 2), 2)
  assert.deepEqual(await expired, { kind: 'expire', key: 'k' })
})

test("loadError: the loader's own rejection, as getOrLoad rejects", async () => {
  const cache = new Cache()
  const failed = next(cache, 'loadError')
  const boom = new Error('origin down')
  await assert.rejects(
    cache.getOrLoad('bad', () => Promise.reject(boom)),
    (e) => e === boom
  )
  const e = await failed
  assert.equal(e.kind, 'loadError')
  assert.equal(e.key, 'bad')
  assert.equal(e.error, boom)
})

test("loadError: the engine's own errors carry their HERDLESS_* code", async () => {
  const cache = new Cache({ hardTimeout: 20 })
  const failed = next(cache, 'loadError')
  const never = () => new Promise((resolve) => setTimeout(resolve, 1000))
  await assert.rejects(cache.getOrLoad('slow', never), { code: 'HERDLESS_LOAD_TIMEOUT' })
  const e = await failed
  assert.equal(e.key, 'slow')
  assert.ok(e.error instanceof Error)
  assert.equal(e.error.code, 'HERDLESS_LOAD_TIMEOUT')
})

test('failSafe: a stale value served after a failing refresh', async () => {
  const cache = new Cache({ ttl: 30, maxStale: 60_000, jitter: 0, beta: 0 })
  const seen = []
  cache.on('failSafe', (e) => seen.push(e))
  cache.on('loadError', (e) => seen.push(e))
  await cache.set('p', 1)
  await sleep(60)
  const boom = new Error('origin down')
  assert.equal(await cache.getOrLoad('p', () => Promise.reject(boom)), 1)
  await until(() => seen.length === 2, 'both events')
  const byKind = Object.fromEntries(seen.map((e) => [e.kind, e]))
  assert.deepEqual(Object.keys(byKind).sort(), ['failSafe', 'loadError'])
  for (const e of seen) {
    assert.equal(e.key, 'p')
    assert.equal(e.error, boom)
  }
})

test('off() stops a listener, once() hears one event, the others go on', async () => {
  const cache = new Cache({ capacity: 1 })
  const counts = { off: 0, once: 0, stays: 0 }
  const removed = () => counts.off++
  assert.equal(cache.on('evict', removed), cache, 'on() returns the cache')
  assert.equal(
    cache.once('evict', () => counts.once++),
    cache
  )
  cache.on('evict', () => counts.stays++)
  await cache.set('k:0', 0)
  await cache.set('k:1', 1)
  await until(() => counts.stays === 1, 'the first eviction')
  assert.deepEqual(counts, { off: 1, once: 1, stays: 1 })
  assert.equal(cache.off('evict', removed), cache, 'off() returns the cache')
  cache.off('evict', () => {}) // not registered: nothing happens
  await cache.set('k:2', 2)
  await cache.set('k:3', 3)
  await until(() => counts.stays === 3, 'two more evictions')
  // Told in one go with `stays`: had they been called, they would show here.
  assert.deepEqual(counts, { off: 1, once: 1, stays: 3 })
})

test('the onEvent option hears every kind', async () => {
  const seen = []
  const cache = new Cache({ capacity: 1, onEvent: (e) => seen.push(e.kind) })
  await cache.set('a', 1)
  await cache.set('b', 2)
  await assert.rejects(cache.getOrLoad('c', () => Promise.reject(new Error('x'))))
  await until(() => seen.length === 2, 'two events')
  assert.deepEqual(seen, ['evict', 'loadError'])
})

test('events never fire on a hit', async () => {
  const seen = []
  const cache = new Cache({ onEvent: (e) => seen.push(e) })
  assert.equal(await cache.getOrLoad('k', () => 1), 1)
  for (let i = 0; i < 1000; i++) {
    assert.equal(cache.get('k'), 1)
    assert.equal(await cache.getOrLoad('k', () => 2), 1)
    assert.equal(cache.peek('k').value, 1)
  }
  // One queue tells events in order: once this one is heard, any earlier one was.
  await assert.rejects(cache.getOrLoad('marker', () => Promise.reject(new Error('x'))))
  await until(() => seen.length > 0, 'the marker event')
  assert.deepEqual(
    seen.map((e) => [e.kind, e.key]),
    [['loadError', 'marker']]
  )
  assert.equal(cache.metrics().total.hits, 2000)
})

test('a listener that throws is reported as a warning, and the others still run', async () => {
  const cache = new Cache({ capacity: 1 })
  const warned = within(
    5000,
    new Promise((resolve) => process.once('warning', resolve)),
    'the warning'
  )
  const after = []
  cache.on('evict', () => {
    throw new Error('listener bug')
  })
  cache.on('evict', (e) => after.push(e.key))
  await cache.set('a', 1)
  await cache.set('b', 2)
  const w = await warned
  assert.equal(w.name, 'HerdlessWarning')
  assert.match(w.message, /listener of 'evict' threw.*listener bug/)
  await until(() => after.length === 1, 'the second listener')
  assert.equal(cache.get('b'), 2)
})

test('listeners that fall behind drop events and count them; the cache never waits', async () => {
  const cache = new Cache({ capacity: 1 })
  let told = 0
  cache.on('evict', () => told++)
  // The event loop is busy with this loop, so no listener runs meanwhile: the engine's
  // queue and the way to the event loop fill up, and the cache goes on regardless.
  const n = 5000
  for (let i = 0; i < n; i++) cache.set(`k:${i}`, i)
  assert.equal(cache.get(`k:${n - 1}`), n - 1)
  assert.equal(await cache.getOrLoad('other', () => 'answered'), 'answered')
  const evictions = () => cache.metrics().total.evictions
  const dropped = () => cache.metrics().total.eventsDropped
  // Every eviction is either told or counted as dropped.
  await until(() => told + dropped() === evictions(), 'every event told or dropped')
  assert.equal(evictions(), n)
  assert.ok(dropped() > 0, 'some events were dropped')
  assert.ok(told > 0, 'some events were told')
})

test('without listeners the cache makes no events (none dropped either)', async () => {
  const cache = new Cache({ capacity: 1 })
  for (let i = 0; i < 5000; i++) cache.set(`k:${i}`, i)
  assert.equal(cache.metrics().total.evictions, 4999)
  assert.equal(cache.metrics().total.eventsDropped, 0)
  // Registered and removed again: muted again.
  const f = () => {}
  cache.on('evict', f).off('evict', f)
  for (let i = 0; i < 5000; i++) cache.set(`j:${i}`, i)
  assert.equal(cache.metrics().total.eventsDropped, 0)
})

test('a listener that refers to its cache does not keep the cache alive', { timeout: 20_000 }, async () => {
  require('node:v8').setFlagsFromString('--expose-gc')
  const gc = require('node:vm').runInNewContext('gc')
  const ref = (() => {
    const cache = new Cache({ capacity: 1, onEvent: () => cache.metrics() })
    cache.on('evict', () => cache.get('a'))
    return new WeakRef(cache)
  })()
  let collected = false
  for (let i = 0; i < 100 && !collected; i++) {
    await sleep(10)
    gc()
    await sleep(0)
    collected = ref.deref() === undefined
  }
  assert.ok(collected, 'the cache was not collected')
})

test('bad arguments: TypeError with a HERDLESS_* code', () => {
  const cache = new Cache()
  for (const name of ['evicted', 'load_error', 'failsafe', 'error', '']) {
    assert.throws(() => cache.on(name, () => {}), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' }, name)
  }
  assert.throws(() => cache.off('nope', () => {}), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  assert.throws(() => cache.once(42, () => {}), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  assert.throws(() => cache.on('evict', 'not a function'), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  assert.throws(() => new Cache({ onEvent: 42 }), { name: 'TypeError', code: 'HERDLESS_INVALID_OPTION' })
})

test('a listener does not keep the process alive', { timeout: 20_000 }, () => {
  const script = `
    const { Cache } = require(${JSON.stringify(require.resolve('herdless'))})
    const cache = new Cache({ capacity: 1, onEvent: () => {} })
    cache.on('evict', () => console.log('evict'))
    cache.set('a', 1); cache.set('b', 2)
  `
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 15_000 })
  assert.equal(r.status, 0, r.stderr)
})

test('with a shared tier (memory://): the L1 tells its events', async () => {
  const cache = new Cache({ capacity: 1, redis: `memory://events-${process.pid}` })
  const seen = []
  cache.on('evict', (e) => seen.push(e.key))
  cache.on('loadError', (e) => seen.push(e.key))
  await cache.set('a', 1)
  await cache.set('b', 2)
  await assert.rejects(cache.getOrLoad('c', () => Promise.reject(new Error('x'))))
  await until(() => seen.length === 2, 'both events')
  assert.deepEqual(seen.sort(), ['a', 'c'])
})

const haveRedis = spawnSync('redis-server', ['--version']).status === 0
test('with Redis: a fail-safe served when the origin fails', { skip: haveRedis ? false : 'redis-server is not on PATH', timeout: 20_000 }, async (t) => {
  const { server, port } = await startRedis()
  t.after(() => server.kill('SIGKILL'))
  const cache = new Cache({ redis: `redis://127.0.0.1:${port}`, redisPrefix: `ev${process.pid}`, ttl: 50, maxStale: 60_000, beta: 0 })
  const failSafe = next(cache, 'failSafe')
  assert.equal(await cache.getOrLoad('p', () => 1), 1)
  await sleep(150)
  const boom = new Error('origin down')
  assert.equal(await cache.getOrLoad('p', () => Promise.reject(boom)), 1)
  const e = await failSafe
  assert.equal(e.key, 'p')
  assert.equal(e.error, boom)
})
