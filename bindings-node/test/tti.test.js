'use strict'
// Time-to-idle (issue 31 item 1): the `tti` option, `ctx.setTti` and `set`'s `tti` reach the
// engine, which decides what idle means (an entry not read for its tti is dropped within its
// ttl; in memory it lives tti..tti*17/16 past its last read, the shared entry while any
// process reads it). Real timers with wide margins: an idle wait is at least twice the
// bound, a read to keep an entry comes at most a quarter of the tti after the last one, and
// a slow machine can only make a "kept" read come later, never an idle one sooner; those
// reads are timed from the previous read's end and a late one fails with how late it was.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const { Cache } = require('herdless')
const { sleep, startRedis } = require('./helpers.js')

const haveRedis = spawnSync('redis-server', ['--version']).status === 0
const skip = haveRedis ? false : 'redis-server is not on PATH'

/** A loader answering `value`, counting its calls. */
function counting(value) {
  const loader = () => {
    loader.calls++
    return value
  }
  loader.calls = 0
  return loader
}

/**
 * Reads with `read` every `every` ms for `total` ms; each read must come within `tti` of the
 * previous one (else the machine stalled past the tti and the check would not say anything).
 */
async function keepReading(read, { every, total, tti }) {
  const end = performance.now() + total
  let last = performance.now()
  while (performance.now() < end) {
    await sleep(every)
    const gap = performance.now() - last
    assert.ok(gap < tti, `a read came ${Math.round(gap)} ms after the previous one (tti ${tti} ms): the machine stalled`)
    await read()
    last = performance.now()
  }
}

test('an entry not read for its tti is gone within its ttl', { timeout: 20_000 }, async () => {
  const cache = new Cache({ ttl: 600_000, tti: 400 })
  const load = counting('v')
  assert.equal(await cache.getOrLoad('idle:a', load), 'v')
  assert.equal(cache.get('idle:a'), 'v')
  await sleep(1_200) // 3 ttis, well past tti * 17 / 16
  assert.equal(cache.get('idle:a'), undefined)
  assert.equal(await cache.getOrLoad('idle:a', load), 'v')
  assert.equal(load.calls, 2, 'loaded again once idle')
  cache.close()
})

test('reads every tti/4 keep an entry past several ttis', { timeout: 20_000 }, async () => {
  const tti = 800
  const cache = new Cache({ ttl: 600_000, tti })
  const load = counting('v')
  await cache.getOrLoad('idle:kept', load)
  await keepReading(
    async () => {
      assert.equal(cache.get('idle:kept'), 'v')
      assert.equal(await cache.getOrLoad('idle:kept', load), 'v')
    },
    { every: tti / 4, total: tti * 4, tti }
  )
  assert.equal(load.calls, 1, 'never loaded again while read')
  cache.close()
})

test('ctx.setTti gives one entry its own tti; set takes one too', { timeout: 20_000 }, async () => {
  // The cache's tti is long: only the entries given a short one idle out.
  const cache = new Cache({ ttl: 600_000, tti: 600_000 })
  const own = counting('short')
  const short = (ctx) => {
    ctx.setTti(300)
    return own(ctx)
  }
  assert.equal(await cache.getOrLoad('idle:own', short), 'short')
  assert.equal(await cache.getOrLoad('idle:cache', counting('long')), 'long')
  await cache.set('idle:set', 'written', { tti: 300 })
  await cache.set('idle:set-long', 'kept', { ttl: 600_000 })
  await sleep(1_000) // over 3 of the short ttis
  assert.equal(cache.get('idle:own'), undefined)
  assert.equal(cache.get('idle:set'), undefined)
  assert.equal(cache.get('idle:cache'), 'long')
  assert.equal(cache.get('idle:set-long'), 'kept')
  assert.equal(await cache.getOrLoad('idle:own', short), 'short')
  assert.equal(own.calls, 2)
  cache.close()
})

test('a loader tti without a cache tti works alone', { timeout: 20_000 }, async () => {
  const cache = new Cache({ ttl: 600_000 })
  await cache.getOrLoad('idle:alone', (ctx) => {
    ctx.setTti(300)
    return 1
  })
  await cache.getOrLoad('idle:none', () => 2)
  await sleep(1_000)
  assert.equal(cache.get('idle:alone'), undefined)
  assert.equal(cache.get('idle:none'), 2)
  cache.close()
})

test('an invalid tti is refused with HERDLESS_INVALID_OPTION', () => {
  const invalid = (kind) => (e) => e instanceof kind && e.code === 'HERDLESS_INVALID_OPTION'
  for (const tti of [0, -1, Infinity, NaN, 1e-7]) {
    assert.throws(() => new Cache({ tti }), invalid(RangeError), String(tti))
  }
  for (const tti of ['1s', null, {}, true]) {
    assert.throws(() => new Cache({ tti }), invalid(TypeError), String(tti))
  }
})

test('an invalid ctx.setTti throws in the loader; an invalid set tti rejects', async () => {
  const cache = new Cache()
  const thrown = []
  await cache.getOrLoad('k', (ctx) => {
    for (const bad of [0, -5, 'x', Infinity, 1e-7]) {
      try {
        ctx.setTti(bad)
      } catch (e) {
        thrown.push([e.constructor.name, e.code])
      }
    }
    return 1
  })
  assert.deepEqual(thrown, [
    ['RangeError', 'HERDLESS_INVALID_ARGUMENT'],
    ['RangeError', 'HERDLESS_INVALID_ARGUMENT'],
    ['TypeError', 'HERDLESS_INVALID_ARGUMENT'],
    ['RangeError', 'HERDLESS_INVALID_ARGUMENT'],
    ['RangeError', 'HERDLESS_INVALID_ARGUMENT'],
  ])
  for (const tti of [0, -1, 1e-7]) {
    await assert.rejects(
      cache.set('k', 1, { tti }),
      (e) => e instanceof RangeError && e.code === 'HERDLESS_INVALID_OPTION',
      String(tti)
    )
  }
  await assert.rejects(cache.set('k', 1, { tti: '1s' }), (e) => e instanceof TypeError && e.code === 'HERDLESS_INVALID_OPTION')
  cache.close()
})

test('Redis: a process that keeps reading keeps the shared entry for the others; idle, it is gone for both', { skip, timeout: 60_000 }, async () => {
  const { server, url } = await startRedis()
  const tti = 1_000
  const opts = { redis: url, redisPrefix: `hltti${process.pid}`, ttl: 600_000, tti }
  // Two caches: two processes of the fleet as far as the engine is concerned (each its own
  // memory copy and Redis connections).
  const a = new Cache(opts)
  const b = new Cache(opts)
  try {
    const load = counting('shared')
    assert.equal(await a.getOrLoad('idle:fleet', load), 'shared')
    assert.equal(await b.getOrLoad('idle:fleet', load), 'shared')
    assert.equal(load.calls, 1, 'b read the shared entry')
    // `a` keeps reading its own copy for 3 ttis; `b` reads nothing, so its copy idles out.
    await keepReading(async () => assert.equal(a.get('idle:fleet'), 'shared'), { every: tti / 4, total: tti * 3, tti })
    assert.equal(b.get('idle:fleet'), undefined, "b's own copy idled out")
    // The shared entry is still there: `a`'s reads kept it (a read from Redis, no load).
    assert.equal(await b.getOrLoad('idle:fleet', load), 'shared')
    assert.equal(load.calls, 1, "b found the entry in Redis after its copy idled out")
    assert.ok(a.metrics().redis.idleTouches > 0, 'a told Redis of its reads')
    // Nobody reads now: gone for both, in memory and in Redis (past tti * 5 / 4 with margin).
    await sleep(tti * 3)
    assert.equal(a.get('idle:fleet'), undefined)
    assert.equal(b.get('idle:fleet'), undefined)
    assert.equal(await a.read('idle:fleet'), undefined, 'gone from Redis too')
    assert.equal(await b.getOrLoad('idle:fleet', load), 'shared')
    assert.equal(load.calls, 2, 'loaded again once idle everywhere')
  } finally {
    a.close()
    b.close()
    server.kill('SIGKILL')
  }
})

test("getOrLoad's tti gives the value it loads its own tti; the loader's ctx.setTti wins", { timeout: 20_000 }, async () => {
  const cache = new Cache({ ttl: 600_000 })
  assert.equal(await cache.getOrLoad('call:a', () => 'a', { tti: 300 }), 'a')
  const own = (ctx) => {
    ctx.setTti(600_000)
    return 'o'
  }
  assert.equal(await cache.getOrLoad('call:own', own, { tti: 300 }), 'o')
  await cache.getOrLoad('call:none', () => 'n')
  await sleep(1_000) // past 300 * 17 / 16 twice over
  assert.equal(cache.get('call:a'), undefined, 'idle past the call tti')
  assert.equal(cache.get('call:own'), 'o', "the loader's own tti wins")
  assert.equal(cache.get('call:none'), 'n', 'no tti: lives its ttl')
  await assert.rejects(cache.getOrLoad('call:bad', () => 'x', { tti: -1 }), { code: 'HERDLESS_INVALID_OPTION' })
  cache.close()
})

test("wrap's tti: a memoised result nobody asks for is dropped", { timeout: 20_000 }, async () => {
  const cache = new Cache({ ttl: 600_000, namespace: 'tti' })
  let calls = 0
  const price = cache.wrap(async function price(id) {
    calls++
    return id * 2
  }, { tti: 300 })
  assert.equal(await price(1), 2)
  assert.equal(await price(1), 2)
  assert.equal(calls, 1)
  await sleep(1_000)
  assert.equal(await price(1), 2)
  assert.equal(calls, 2, 'idle past the tti: called again')
  assert.throws(() => cache.wrap(async function f() {}, { tti: -5 }), { code: 'HERDLESS_INVALID_OPTION' })
  cache.close()
})
