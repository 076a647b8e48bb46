'use strict'
// AbortSignal: a caller stops waiting; the shared load goes on for the others.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('herdless')
const { sleep, slowLoader, within } = require('./helpers.js')

test('an aborted waiter rejects at once and leaves the other callers unharmed', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  const loader = slowLoader(200, 'shared')
  const controller = new AbortController()
  const leader = cache.getOrLoad('ab:1', loader)
  const others = Array.from({ length: 50 }, () => cache.getOrLoad('ab:1', loader))
  const aborted = cache.getOrLoad('ab:1', loader, { signal: controller.signal })
  await sleep(50)
  let loadDone = false
  leader.then(() => (loadDone = true))
  controller.abort()
  await assert.rejects(aborted, (e) => e.name === 'AbortError')
  assert.equal(loadDone, false, 'rejected at the abort, not at the end of the load')
  assert.deepEqual(await within(5_000, Promise.all([leader, ...others])), Array(51).fill('shared'))
  assert.equal(loader.calls, 1)
  assert.equal(cache._internals().pendingCalls, 0)
})

test('aborting the leader does not cancel the load: waiters get its value, and it is stored', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  const loader = slowLoader(150, 'from the leader')
  const controller = new AbortController()
  const leader = cache.getOrLoad('ab:2', loader, { signal: controller.signal })
  const waiter = cache.getOrLoad('ab:2', loader)
  await sleep(30)
  controller.abort(new Error('client went away'))
  await assert.rejects(leader, { message: 'client went away' })
  assert.equal(await waiter, 'from the leader')
  assert.equal(cache.get('ab:2'), 'from the leader')
  assert.equal(loader.calls, 1)
})

test('an already aborted signal rejects without calling the loader', async () => {
  const cache = new Cache()
  const loader = slowLoader(10, 'never')
  await assert.rejects(cache.getOrLoad('ab:3', loader, { signal: AbortSignal.abort() }), { name: 'AbortError' })
  assert.equal(loader.calls, 0)
  assert.equal(cache._internals().pendingCalls, 0)
})

test('an already aborted caller is not counted: no hit, no miss, no load in flight', async () => {
  const cache = new Cache()
  await cache.set('ab:counted', 'cached')
  const before = cache.metrics().total
  const reason = new Error('gone')
  const loader = slowLoader(10, 'never')
  for (const key of ['ab:counted', 'ab:uncached']) {
    await assert.rejects(cache.getOrLoad(key, loader, { signal: AbortSignal.abort(reason) }), (e) => e === reason)
  }
  const after = cache.metrics()
  assert.equal(loader.calls, 0)
  assert.equal(after.total.hits, before.hits)
  assert.equal(after.total.misses, before.misses)
  assert.equal(after.total.lockAcquired, before.lockAcquired)
  assert.equal(after.loadsInFlight, 0)
  // A live signal still takes the engine's paths.
  assert.equal(await cache.getOrLoad('ab:counted', loader, { signal: new AbortController().signal }), 'cached')
  assert.equal(cache.metrics().total.hits, before.hits + 1)
})

test('an already aborted batch is rejected before the engine reads a key', async () => {
  const cache = new Cache()
  await cache.set('ab:many:1', 'cached')
  const before = cache.metrics().total
  const reason = new Error('gone')
  let calls = 0
  const loader = async (keys) => {
    calls++
    return Object.fromEntries(keys.map((k) => [k, 'never']))
  }
  await assert.rejects(cache.getOrLoadMany(['ab:many:1', 'ab:many:2'], loader, { signal: AbortSignal.abort(reason) }), (e) => e === reason)
  const after = cache.metrics()
  assert.equal(calls, 0)
  assert.equal(after.total.hits, before.hits)
  assert.equal(after.total.misses, before.misses)
  assert.equal(after.loadsInFlight, 0)
  assert.equal(cache._internals().pendingCalls, 0)
})

test('a signal that never aborts is released when the call ends', { timeout: 10_000 }, async () => {
  const cache = new Cache()
  const controller = new AbortController()
  for (let i = 0; i < 20; i++) {
    assert.equal(await cache.getOrLoad(`ab:4:${i}`, async () => i, { signal: controller.signal }), i)
  }
  // Every listener was removed: aborting now touches no call.
  controller.abort()
  assert.equal(cache._internals().pendingCalls, 0)
})

test('signal must be an AbortSignal', async () => {
  const cache = new Cache()
  await assert.rejects(cache.getOrLoad('ab:5', async () => 1, { signal: 'nope' }), {
    name: 'TypeError',
    code: 'HERDLESS_INVALID_OPTION',
  })
})

test('a loader that aborts its own caller: the caller gets the reason, the value is stored', async () => {
  const cache = new Cache()
  const controller = new AbortController()
  const p = cache.getOrLoad('ab:self', () => {
    controller.abort(new Error('left during the load'))
    return 'kept'
  }, { signal: controller.signal })
  await assert.rejects(p, { message: 'left during the load' })
  assert.equal(cache.get('ab:self'), 'kept')
  assert.equal(cache._internals().pendingCalls, 0)
})
