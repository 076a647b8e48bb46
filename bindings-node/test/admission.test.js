'use strict'
// Admission (`admission: true`, the engine's TinyLFU filter): a loop over a little more than
// the capacity hits with it; a refused value still answers its caller, a refused `set`
// resolves as usual, neither is kept, and `admissionRejections` counts them. Counts, not
// timings.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('herdless')

/** Reads, loader calls and refusals of 10 rounds of a loop over 1.2x the capacity. */
async function loop(admission) {
  const cache = new Cache({ capacity: 1000, ttl: 3_600_000, jitter: 0, front: false, admission })
  let calls = 0
  let reads = 0
  for (let round = 0; round < 10; round++) {
    for (let k = 0; k < 1200; k++) {
      const v = await cache.getOrLoad(`loop:${k}`, () => {
        calls++
        return k
      })
      assert.equal(v, k)
      reads++
    }
  }
  return { reads, calls, refused: cache.metrics().total.admissionRejections }
}

test('a loop over more than the capacity hits with admission', async () => {
  const off = await loop(false)
  assert.equal(off.refused, 0)
  const on = await loop(true)
  // The engine's own test (one shard) measures 0 hits off; here the keys spread over
  // several shards, so only the gap is asserted.
  assert.ok(on.reads - on.calls > on.reads / 4, `${on.reads - on.calls} hits`)
  assert.ok(on.reads - on.calls > 2 * (off.reads - off.calls))
  assert.ok(on.refused > 0)
})

test('a refused value answers its caller but is not kept', async () => {
  // A capacity of 1 is one shard of one entry: the victim is always "a".
  const cache = new Cache({ capacity: 1, ttl: 3_600_000, front: false, admission: true })
  for (let i = 0; i < 3; i++) await cache.set('a', 1)
  await cache.set('b', 2)
  assert.equal(await cache.get('b'), undefined)
  assert.equal(await cache.getOrLoad('c', () => 3), 3)
  assert.equal(await cache.get('c'), undefined)
  assert.equal(await cache.get('a'), 1)
  const m = cache.metrics()
  assert.deepEqual([m.entries, m.total.admissionRejections, m.total.evictions], [1, 2, 0])
})

test('admission is a boolean', () => {
  new Cache({ admission: false })
  assert.throws(() => new Cache({ admission: 1 }), {
    name: 'TypeError',
    code: 'HERDLESS_INVALID_OPTION',
    message: /option `admission` must be a boolean, got a number/,
  })
})
