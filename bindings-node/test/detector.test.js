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

/** 600 ms of steady traffic on `accounts`, then a storm of 300 misses on absent ids. */
async function missStorm(cache) {
  cache.set('accounts:1', 'ada')
  const end = Date.now() + 600
  while (Date.now() < end) {
    cache.get('accounts:1')
    cache.get('accounts:missing')
    await sleep(10)
  }
  for (let i = 0; i < 300; i++) cache.get(`accounts:absent-${i}`)
  await sleep(60)
}

test('the detector can be switched off or given its thresholds', { timeout: 10_000 }, async () => {
  const off = new Cache({ detector: false })
  await missStorm(off)
  assert.deepEqual(off.alerts(), [])
  // A spike must now be 1,000x the steady state and 1,000 misses in a tick: 300 are not.
  const lenient = new Cache({ detector: { tick: 50, spikeFactor: 1000, minSpikeMisses: 1000 } })
  await missStorm(lenient)
  assert.deepEqual(lenient.alerts().filter((a) => a.kind === 'missSpike'), [])
  // The same storm with the default thresholds (and `detector: true`) is reported.
  const strict = new Cache({ detector: { tick: 50 } })
  await missStorm(strict)
  assert.ok(strict.alerts().some((a) => a.kind === 'missSpike'), JSON.stringify(strict.alerts()))
  assert.ok(new Cache({ detector: true, detectorTick: 50 }))
})

test('bad detector options throw with the option named', () => {
  const bad = (detector, type, pattern) =>
    assert.throws(() => new Cache({ detector }), (e) => e instanceof type && e.code === 'HERDLESS_INVALID_OPTION' && pattern.test(e.message))
  bad('on', TypeError, /`detector` must be a boolean or an object, got a string/)
  bad([], TypeError, /`detector` must be a boolean or an object/)
  bad({ spikefactor: 2 }, TypeError, /unknown detector option `spikefactor`/)
  bad({ tick: 0 }, RangeError, /`detector.tick` must be a duration in milliseconds > 0/)
  bad({ hold: -1 }, RangeError, /`detector.hold`/)
  bad({ minSamples: 1.5 }, RangeError, /`detector.minSamples` must be an integer/)
  bad({ spikeFactor: '5' }, TypeError, /`detector.spikeFactor` must be a number, got a string/)
  bad({ spikeFactor: 0.5 }, RangeError, /detector factors must be finite and at least 1/)
  bad({ keyShare: 0 }, RangeError, /key_share must be in \(0, 1\]/)
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
    { concurrency: 8, onProgress: (r) => seen.push(r.loaded + r.absent + r.skipped + r.failed) },
  )
  assert.equal(report.total, 10)
  assert.equal(report.loaded, 9)
  assert.equal(report.absent, 1, 'p:9 answered ABSENT')
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
