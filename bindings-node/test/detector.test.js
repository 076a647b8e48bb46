'use strict'
// alerts(), hot keys and their export / import, warm's progress and budget: the engine's
// detector and tracker seen from Node (camelCase, milliseconds).
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache, ABSENT } = require('herdless')
const { sleep } = require('./helpers.js')

test('a miss storm is reported with its namespace and cure', { timeout: 10_000 }, async () => {
  // Short ticks, so the steady state (8 ticks at least) is learnt in well under a second.
  const cache = new Cache({ detectorTick: 50 })
  cache.set('accounts:1', 'ada')
  const end = Date.now() + 600
  while (Date.now() < end) {
    assert.equal(cache.get('accounts:1'), 'ada')
    cache.get('accounts:missing')
    await sleep(10)
  }
  for (let i = 0; i < 300; i++) assert.equal(cache.get(`accounts:absent-${i}`), undefined)
  await sleep(60)
  const spikes = cache.alerts().filter((a) => a.kind === 'missSpike')
  assert.ok(spikes.length > 0, JSON.stringify(cache.alerts()))
  const a = spikes[0]
  assert.equal(a.namespace, 'accounts')
  assert.equal(a.cause, 'missStorm')
  assert.equal(a.key, undefined)
  assert.ok(a.cures.includes('negativeCaching'), a.cures.join())
  assert.ok(a.active && a.sinceMs <= a.lastSeenMs)
  assert.ok(a.evidence.missesPerSecond > 5 * Math.max(a.evidence.steadyMissesPerSecond, 1))
  assert.match(a.message, /^miss spike in "accounts"/)
})

test('a quiet cache has no alerts', async () => {
  const cache = new Cache({ detectorTick: 50 })
  for (let i = 0; i < 50; i++) await cache.getOrLoad(`u:${i}`, async () => i)
  assert.deepEqual(cache.alerts(), [])
})

test('hot keys survive export, restart and import; warm stays within the budget', { timeout: 10_000 }, async () => {
  const old = new Cache()
  // p:0, p:1 and p:2 are read 16,000, 8,000 and 4,000 times (hits are sampled one in 256,
  // so the gaps are wide); p:3 to p:9 ten times each.
  const reads = [16000, 8000, 4000, 10, 10, 10, 10, 10, 10, 10]
  for (let i = 0; i < reads.length; i++) {
    for (let n = 0; n < reads[i]; n++) await old.getOrLoad(`p:${i}`, async () => 'x')
  }
  const top = old.hotKeys(3)
  assert.deepEqual(top.map((k) => k.key), ['p:0', 'p:1', 'p:2'])
  assert.ok(top[0].count >= top[1].count)
  const saved = old.exportHotKeys(10)

  const fresh = new Cache({ originBudget: 2 })
  const keys = fresh.importHotKeys(saved)
  assert.equal(keys.length, 10)
  assert.deepEqual(keys.slice(0, 3), ['p:0', 'p:1', 'p:2'])
  let running = 0
  let peak = 0
  const seen = []
  const report = await fresh.warm(
    keys,
    async (key) => {
      running++
      peak = Math.max(peak, running)
      await sleep(5)
      running--
      return key === 'p:9' ? ABSENT : key.toUpperCase()
    },
    { concurrency: 8, onProgress: (r) => seen.push(r.loaded + r.skipped + r.failed) },
  )
  assert.equal(report.total, 10)
  assert.equal(report.loaded, 10)
  assert.equal(report.skipped, 0)
  assert.ok(peak <= 2, `peak ${peak}`)
  assert.deepEqual(seen, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
  const before = fresh.metrics().total
  assert.equal(fresh.get('p:0'), 'P:0')
  assert.equal(fresh.metrics().total.hits, before.hits + 1, 'the first request after warm-up hits')
  const again = await fresh.warm(keys, async () => 'never')
  assert.equal(again.skipped, 10)
  assert.throws(() => fresh.importHotKeys('[{"key": 1}]'), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
})

test('metrics count expired and cold misses', async () => {
  const cache = new Cache({ ttl: 50, jitter: 0 })
  cache.set('n:1', 1)
  assert.equal(cache.get('n:2'), undefined)
  await sleep(80)
  assert.equal(cache.get('n:1'), undefined)
  const t = cache.metrics().total
  assert.deepEqual([t.coldMisses, t.expiredMisses, t.misses], [1, 1, 2])
  assert.match(cache.prometheus(), /herdless_expired_misses_total\{namespace="n"\} 1/)
})
