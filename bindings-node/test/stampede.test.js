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
