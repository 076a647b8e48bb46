'use strict'
// cache.peek(key): an entry as it is, without side effects.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache, ABSENT } = require('herdless')
const { sleep } = require('./helpers.js')

test('a miss is undefined and a cached absence is a peek', async () => {
  const cache = new Cache({ jitter: 0, beta: 0 })
  assert.equal(cache.peek('users:1'), undefined)
  await cache.set('users:1', ABSENT)
  const seen = cache.peek('users:1')
  assert.equal(seen.value, ABSENT)
  assert.equal(seen.state, 'fresh')
  assert.equal(seen.staleUntilMs, seen.freshUntilMs, 'an absence has no grace')
  assert.equal(cache.peek(''), undefined, 'a bad key is a miss')
  assert.throws(() => cache.peek(42), TypeError)
})

test('state, age, expiry and load duration', async () => {
  const cache = new Cache({ ttl: 200, grace: 30_000, jitter: 0, beta: 0 })
  const value = { id: 1 }
  await cache.getOrLoad('users:1', async () => {
    await sleep(50)
    return value
  })
  const first = cache.peek('users:1')
  assert.deepEqual(first.value, value, 'a copy of the value stored')
  assert.equal(first.state, 'fresh')
  assert.ok(first.loadDurationMs >= 45 && first.loadDurationMs < 1000, `${first.loadDurationMs}`)
  assert.equal(first.staleUntilMs - first.freshUntilMs, 30_000)
  await sleep(250)
  const later = cache.peek('users:1')
  assert.equal(later.state, 'stale')
  assert.equal(later.freshUntilMs, first.freshUntilMs)
  assert.ok(later.ageMs - first.ageMs >= 240)
})

test('peeking counts nothing, samples nothing and refreshes nothing', async () => {
  const cache = new Cache({ ttl: 50, grace: 30_000, jitter: 0, beta: 0 })
  await cache.set('users:1', 'ada')
  await sleep(80) // stale: a read would start a refresh
  const before = JSON.stringify(cache.metrics().namespaces)
  for (let i = 0; i < 50; i++) {
    assert.equal(cache.peek('users:1').state, 'stale')
    assert.equal(cache.peek('users:2'), undefined)
  }
  assert.equal(JSON.stringify(cache.metrics().namespaces), before)
  assert.equal(cache._internals().flights, 0)
  assert.deepEqual(cache.hotKeys(), [])
})
