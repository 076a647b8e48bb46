'use strict'
// Failures: a rejection reaches every waiter as the original error object; timeouts and bad
// arguments are Errors with stable codes.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('herdless')
const { sleep, within } = require('./helpers.js')

test('a rejecting loader rejects every waiter with the very same error object', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  const boom = new Error('origin down')
  boom.code = 'ECONNREFUSED'
  let calls = 0
  const loader = async () => {
    calls++
    await sleep(100)
    throw boom
  }
  const settled = await within(
    5_000,
    Promise.allSettled(Array.from({ length: 500 }, () => cache.getOrLoad('db:1', loader)))
  )
  assert.equal(calls, 1)
  for (const s of settled) {
    assert.equal(s.status, 'rejected')
    assert.equal(s.reason, boom) // identity, not a copy
  }
  assert.equal(cache.metrics().total.loadErrors, 1)
  // Errors are never cached: the next call loads again.
  assert.equal(await cache.getOrLoad('db:1', async () => 'back'), 'back')
  assert.equal(calls, 1)
})

test('non-Error rejections and synchronous throws reach the waiters as they are', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  const reason = { why: 'plain object' }
  const a = cache.getOrLoad('x:1', async () => {
    await sleep(30)
    throw reason
  })
  const b = cache.getOrLoad('x:1', async () => 'unused')
  await assert.rejects(a, (e) => e === reason)
  await assert.rejects(b, (e) => e === reason)

  await assert.rejects(cache.getOrLoad('x:2', async () => Promise.reject('a string')), (e) => e === 'a string')
  const thrown = new TypeError('sync')
  await assert.rejects(
    cache.getOrLoad('x:3', () => {
      throw thrown
    }),
    (e) => e === thrown
  )
})

test('waiters give up after waitTimeout with HERDLESS_WAIT_TIMEOUT; the load goes on', { timeout: 10_000 }, async () => {
  const cache = new Cache({ waitTimeout: 50 })
  const leader = cache.getOrLoad('slow:1', async () => {
    await sleep(300)
    return 'late'
  })
  const waiter = cache.getOrLoad('slow:1', async () => 'unused')
  await assert.rejects(waiter, (e) => {
    assert.ok(e instanceof Error)
    assert.equal(e.code, 'HERDLESS_WAIT_TIMEOUT')
    assert.ok(e.waitedMs >= 50, `waited ${e.waitedMs} ms`)
    return true
  })
  assert.equal(await leader, 'late')
  assert.equal(cache.get('slow:1'), 'late')
  assert.equal(cache.metrics().total.waitTimeouts, 1)
})

test('a loader past hardTimeout fails with HERDLESS_LOAD_TIMEOUT for all, and is not stored', { timeout: 10_000 }, async () => {
  const cache = new Cache({ hardTimeout: 60 })
  const loader = async () => {
    await sleep(250)
    return 'too late'
  }
  const calls = [cache.getOrLoad('h:1', loader), cache.getOrLoad('h:1', loader)]
  for (const c of calls) {
    await assert.rejects(c, (e) => e.code === 'HERDLESS_LOAD_TIMEOUT' && e.afterMs === 60)
  }
  await sleep(250)
  assert.equal(cache.get('h:1'), undefined)
})

test('fail-safe: a failed refresh serves the stale value within maxStale', { timeout: 10_000 }, async () => {
  const cache = new Cache({ ttl: 30, jitter: 0, beta: 0, maxStale: 10_000 })
  await cache.getOrLoad('fs:1', async () => 'stale but fine')
  await sleep(50)
  const v = await cache.getOrLoad('fs:1', async () => {
    throw new Error('origin down')
  })
  assert.equal(v, 'stale but fine')
  assert.equal(cache.metrics().total.failsafeServed, 1)
})

test('soft timeout: callers holding a fail-safe value take it; the load finishes and is stored', { timeout: 10_000 }, async () => {
  const cache = new Cache({ ttl: 30, jitter: 0, beta: 0, maxStale: 10_000, softTimeout: 50 })
  await cache.getOrLoad('soft:1', async () => 'old')
  await sleep(50)
  let loaded = false
  const v = await cache.getOrLoad(
    'soft:1',
    async () => {
      await sleep(200)
      loaded = true
      return 'new'
    },
    { ttl: 60_000 }
  )
  assert.equal(v, 'old')
  assert.equal(loaded, false, 'answered at the soft timeout, before the load ended')
  await within(5_000, (async () => { while (!loaded) await sleep(10) })(), 'the load')
  await sleep(20)
  assert.equal(cache.get('soft:1'), 'new')
})

test('bad arguments reject with TypeError/RangeError and a code; the sync get throws', async () => {
  const cache = new Cache({ maxKeyLen: 8 })
  await assert.rejects(cache.getOrLoad(42, async () => 1), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  await assert.rejects(cache.getOrLoad('k:1', 'not a function'), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  await assert.rejects(cache.getOrLoad('', async () => 1), { name: 'TypeError', code: 'HERDLESS_EMPTY_KEY' })
  await assert.rejects(cache.getOrLoad('much:too:long', async () => 1), (e) => {
    assert.equal(e.name, 'RangeError')
    assert.equal(e.code, 'HERDLESS_KEY_TOO_LONG')
    assert.equal(e.length, 13)
    assert.equal(e.max, 8)
    return true
  })
  assert.throws(() => cache.get({}), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  await assert.rejects(cache.set('', 1), { name: 'TypeError', code: 'HERDLESS_EMPTY_KEY' })
  await assert.rejects(cache.set('k:1', 1, { ttl: 0 }), { name: 'RangeError', code: 'HERDLESS_INVALID_OPTION' })
  await assert.rejects(cache.invalidate(7), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  await assert.rejects(cache.bump(), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  await assert.rejects(cache.bump(3), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
})
