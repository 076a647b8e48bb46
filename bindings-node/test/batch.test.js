'use strict'
// Batch loads: getOrLoadMany. One loader call for the keys nobody has, each key
// single-flight with every other caller, answers in the order of the keys, failures per key.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache, ABSENT } = require('herdless')
const { sleep } = require('./helpers.js')

const valueOf = (key) => Number(key.split(':')[1]) * 10

function batchLoader (delayMs = 0) {
  const calls = []
  const load = async (keys) => {
    calls.push([...keys])
    if (delayMs) await sleep(delayMs)
    return Object.fromEntries(keys.map((k) => [k, valueOf(k)]))
  }
  load.calls = calls
  load.loads = () => {
    const n = new Map()
    for (const c of calls) for (const k of c) n.set(k, (n.get(k) ?? 0) + 1)
    return n
  }
  return load
}

test('one loader call for the misses, answered in the order of the keys', async () => {
  const cache = new Cache()
  await cache.set('p:1', 1)
  const load = batchLoader()
  assert.deepEqual(await cache.getOrLoadMany(['p:2', 'p:1', 'p:3', 'p:2'], load), [20, 1, 30, 20])
  assert.deepEqual(load.calls, [['p:2', 'p:3']])
  assert.equal(cache.metrics().total.batchLoads, 1)
})

test('absent and omitted keys are cached absences; a Map answers too', async () => {
  const cache = new Cache()
  const got = await cache.getOrLoadMany(['a:1', 'a:2', 'a:3'], async () => new Map([['a:1', 1], ['a:2', ABSENT]]))
  assert.deepEqual(got, [1, undefined, undefined])
  const load = batchLoader()
  assert.deepEqual(await cache.getOrLoadMany(['a:2', 'a:3'], load), [undefined, undefined])
  assert.deepEqual(load.calls, [], 'absences are hits until negativeTtl')
})

test('a failing loader rejects with a BatchError naming each failed key', async () => {
  const cache = new Cache()
  await cache.set('f:1', 1)
  const down = new Error('database down')
  await assert.rejects(cache.getOrLoadMany(['f:1', 'f:2', 'f:3'], async () => { throw down }), (e) => {
    assert.equal(e.code, 'HERDLESS_BATCH')
    assert.deepEqual(Object.keys(e.errors), ['f:2', 'f:3'])
    assert.equal(e.errors['f:2'], down)
    assert.equal(e.values[0], 1)
    return true
  })
  assert.deepEqual(await cache.getOrLoadMany(['f:2', 'f:3'], batchLoader()), [20, 30])
})

test('twenty concurrent batches of fifty keys load every key once', { timeout: 20_000 }, async () => {
  const cache = new Cache({ ttl: 600_000 })
  const load = batchLoader(20)
  const asks = Array.from({ length: 20 }, (_, c) => Array.from({ length: 50 }, (_, j) => `p:${(c * 5 + j) % 100}`))
  const answers = await Promise.all(asks.map((keys) => cache.getOrLoadMany(keys, load)))
  answers.forEach((got, c) => assert.deepEqual(got, asks[c].map(valueOf)))
  const loads = load.loads()
  assert.equal(loads.size, 100)
  assert.deepEqual([...new Set(loads.values())], [1])
  assert.ok(load.calls.length <= 20)
  assert.equal(cache._internals().pendingCalls, 0)
})

test('maxBatch splits the misses', async () => {
  const cache = new Cache({ maxBatch: 10 })
  const load = batchLoader()
  const keys = Array.from({ length: 25 }, (_, n) => `m:${n}`)
  assert.deepEqual(await cache.getOrLoadMany(keys, load), keys.map(valueOf))
  assert.deepEqual(load.calls.map((c) => c.length), [10, 10, 5])
})

test('bad arguments reject', async () => {
  const cache = new Cache()
  await assert.rejects(cache.getOrLoadMany('p:1', batchLoader()), { name: 'TypeError' })
  await assert.rejects(cache.getOrLoadMany(['p:1'], 'nope'), { name: 'TypeError' })
  await assert.rejects(cache.getOrLoadMany(['p:1', ''], batchLoader()), (e) => {
    assert.deepEqual(Object.keys(e.errors), [''])
    assert.equal(e.values[0], 10)
    return true
  })
})

test('on a memory:// tier the other process reads the batch', async () => {
  const name = `memory://batch-${process.pid}-${Date.now()}`
  const a = new Cache({ redis: name })
  const b = new Cache({ redis: name })
  assert.deepEqual(await a.getOrLoadMany(['s:1', 's:2'], batchLoader()), [10, 20])
  const lb = batchLoader()
  assert.deepEqual(await b.getOrLoadMany(['s:1', 's:2', 's:3'], lb), [10, 20, 30])
  assert.deepEqual(lb.calls, [['s:3']])
  assert.equal(a.metrics().redis.batchRoundTrips, 1)
})

test('a batch loader answering an array fails its keys instead of caching them absent', async () => {
  const cache = new Cache({ ttl: 60_000 })
  await assert.rejects(
    cache.getOrLoadMany(['p:1', 'p:2'], async () => [10, 20]),
    (err) => {
      assert.equal(err.code, 'HERDLESS_BATCH')
      assert.match(String(err.errors['p:1'].message), /got an array/)
      return true
    }
  )
  assert.equal(cache.peek('p:1'), undefined, 'nothing cached')
  assert.deepEqual(await cache.getOrLoadMany(['p:1'], async () => ({ 'p:1': 10 })), [10])
})
