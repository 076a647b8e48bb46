'use strict'
// The stampede: thousands of concurrent callers of one expired key, one loader call.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('herdless')
const { sleep, slowLoader, within } = require('./helpers.js')

test('5,000 concurrent getOrLoad calls on one expired key run a 200 ms loader once', { timeout: 30_000 }, async () => {
  const cache = new Cache({ ttl: 50, jitter: 0, beta: 0 })
  cache.set('hot:key', 'old')
  await sleep(80) // expired
  assert.equal(cache.get('hot:key'), undefined)

  const loader = slowLoader(200, () => ({ fresh: true }))
  // The event loop must keep running while 4,999 callers wait.
  let ticks = 0
  const timer = setInterval(() => ticks++, 10)
  const started = Date.now()
  const results = await within(
    10_000,
    Promise.all(Array.from({ length: 5000 }, () => cache.getOrLoad('hot:key', loader))),
    '5,000 callers'
  )
  clearInterval(timer)

  assert.equal(loader.calls, 1)
  assert.equal(results.length, 5000)
  assert.ok(results.every((r) => r.id === results[0].id), 'every caller gets the same value')
  assert.ok(new Set(results).size === 5000, 'each caller gets its own copy (copyValues)')
  assert.deepEqual(results[0], { fresh: true })
  assert.ok(Date.now() - started >= 190, 'the callers waited for the load')
  assert.ok(ticks >= 1, 'the interval fired while the callers waited')
  const total = cache.metrics().total
  assert.equal(total.loads, 1)
  assert.equal(total.coalescedWaiters, 4999)
  assert.equal(cache._internals().pendingCalls, 0)
})

test('the event loop keeps running while waiters wait: a load that needs 5 timer ticks completes', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  let ticks = 0
  let release
  const fiveTicks = new Promise((resolve) => (release = resolve))
  const timer = setInterval(() => {
    if (++ticks === 5) release()
  }, 5)
  // A blocked event loop would never fire the ticks, and the load would never end.
  const loader = async () => {
    await fiveTicks
    return ticks
  }
  const values = await within(5_000, Promise.all(Array.from({ length: 1000 }, () => cache.getOrLoad('tick:1', loader))))
  clearInterval(timer)
  assert.ok(values.every((v) => v === 5))
})

test('callers arriving while a load runs join it; later callers hit', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  const loader = slowLoader(100, 'v')
  const first = cache.getOrLoad('k:1', loader)
  await sleep(30)
  const second = cache.getOrLoad('k:1', loader)
  assert.deepEqual(await Promise.all([first, second]), ['v', 'v'])
  assert.equal(await cache.getOrLoad('k:1', loader), 'v')
  assert.equal(loader.calls, 1)
  assert.equal(cache.metrics().total.hits, 1)
})

test('different keys load independently', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  const seen = []
  const results = await Promise.all(
    ['a:1', 'a:2', 'a:1', 'a:3', 'a:2'].map((k) =>
      cache.getOrLoad(k, async () => {
        seen.push(k)
        await sleep(20)
        return k.toUpperCase()
      })
    )
  )
  assert.deepEqual(results, ['A:1', 'A:2', 'A:1', 'A:3', 'A:2'])
  assert.deepEqual(seen.sort(), ['a:1', 'a:2', 'a:3'])
})

// The callers of a herd are answered together when the first waiter's call ends (src/driver/
// group.rs), but each keeps its own waiter: its own deadline and the engine's own answer.
test('a herd member that arrived later times out at its own deadline, not the first waiter\'s', { timeout: 10_000 }, async () => {
  const cache = new Cache({ waitTimeout: 150 })
  const loader = slowLoader(600, 'v')
  const t0 = Date.now()
  const leader = cache.getOrLoad('h:1', loader)
  const settled = (p) => p.then(() => ['ok', Date.now() - t0], (e) => [e.code, Date.now() - t0])
  const anchor = settled(cache.getOrLoad('h:1', loader))
  await sleep(100)
  const late = settled(cache.getOrLoad('h:1', loader))
  assert.equal(cache._internals().pendingCalls, 3, 'a member of a herd is a pending call')
  const [anchorCode, anchorAt] = await anchor
  assert.equal(anchorCode, 'HERDLESS_WAIT_TIMEOUT')
  assert.ok(anchorAt >= 140 && anchorAt < 240, `the first waiter timed out at ${anchorAt} ms`)
  const [lateCode, lateAt] = await late
  assert.equal(lateCode, 'HERDLESS_WAIT_TIMEOUT')
  assert.ok(lateAt >= 240, `the later waiter timed out at ${lateAt} ms, its own deadline (250 ms)`)
  assert.equal(await leader, 'v')
  assert.equal(loader.calls, 1)
  const total = cache.metrics().total
  assert.equal(total.waitTimeouts, 2)
  assert.equal(total.coalescedWaiters, 2)
  assert.equal(cache._internals().pendingCalls, 0)
})

test('a herd whose load fails: every member is rejected with the loader\'s error, or served its fail-safe value', { timeout: 10_000 }, async () => {
  const cache = new Cache({ ttl: 40, jitter: 0, beta: 0, maxStale: 60_000 })
  const boom = new Error('boom')
  const failing = async () => {
    await sleep(50)
    throw boom
  }
  const all = Array.from({ length: 50 }, () => cache.getOrLoad('f:1', failing).catch((e) => e))
  assert.ok((await Promise.all(all)).every((e) => e === boom))
  await cache.set('f:2', 'old')
  await sleep(60) // expired, kept for fail-safe
  const served = await Promise.all(Array.from({ length: 50 }, () => cache.getOrLoad('f:2', failing)))
  assert.ok(served.every((v) => v === 'old'))
  assert.equal(cache._internals().pendingCalls, 0)
})
