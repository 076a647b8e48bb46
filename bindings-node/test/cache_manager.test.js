'use strict'
// herdless/cache-manager against cache-manager 7's documented behaviour (its README: get, set
// with a ttl, mset/mget/mdel, del, clear, ttl, wrap with a ttl function and refreshThreshold,
// events): the same calls on cache-manager's own createCache (a Keyv memory store) and on
// herdless's answer the same values and emit the same events. cache-manager's npm package
// ships no tests of its own to run. Then what herdless adds: wrap single-flight across two
// caches of one Redis, and stale-while-revalidate.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync } = require('node:child_process')
const cm = require('cache-manager')
const { Cache } = require('..')
const { createCache } = require('../lib/cache-manager.js')
const { freePort, sleep, within } = require('./helpers.js')

const EVENTS = ['get', 'mget', 'ttl', 'set', 'mset', 'del', 'mdel', 'clear', 'refresh']

function record(cache) {
  const log = []
  for (const name of EVENTS) cache.on(name, (payload) => log.push([name, payload]))
  return log
}

// The calls of the README, on either implementation: what each answered.
async function script(cache) {
  const out = []
  out.push(await cache.set('foo', 'bar'))
  out.push(await cache.get('foo'))
  out.push(await cache.get('missing'))
  out.push(await cache.set('obj', { a: [1, 2] }, 5_000))
  out.push(await cache.get('obj'))
  out.push(await cache.mset([{ key: 'k1', value: 1 }, { key: 'k2', value: 'two', ttl: 5_000 }]))
  out.push(await cache.mget(['k1', 'k2', 'nope']))
  out.push(await cache.del('foo'))
  out.push(await cache.get('foo'))
  out.push(await cache.mdel(['k1', 'k2']))
  out.push(await cache.mget(['k1', 'k2']))
  out.push(await cache.wrap('w', async () => ({ loaded: true }), 5_000))
  out.push(await cache.wrap('w', async () => ({ loaded: false }), 5_000))
  out.push(await cache.set('null', null))
  out.push(await cache.get('null'))
  out.push(await cache.clear())
  out.push(await cache.get('obj'))
  out.push(await cache.wrap('w', async () => 'after clear'))
  return out
}

test('the README calls answer and emit as cache-manager 7 does', async () => {
  const theirs = cm.createCache({ ttl: 60_000 })
  const ours = createCache({ ttl: 60_000 })
  const theirLog = record(theirs)
  const ourLog = record(ours)
  assert.deepEqual(await script(ours), await script(theirs))
  assert.deepEqual(ourLog, theirLog)
  await ours.disconnect()
})

test('set with a ttl expires; ttl(key) is the absolute expiry time', async () => {
  const cache = createCache()
  const before = Date.now()
  await cache.set('short', 'v', 300)
  const expires = await cache.ttl('short')
  assert.ok(expires >= before + 200 && expires <= Date.now() + 400, `${expires - before} ms`)
  assert.equal(await cache.ttl('none'), undefined)
  await sleep(400)
  assert.equal(await cache.get('short'), undefined)
  await cache.disconnect()
})

test('wrap: a ttl function of the value, undefined never cached, a rejection not cached', async () => {
  const cache = createCache({ ttl: 60_000 })
  await cache.wrap('fn-ttl', async () => 'x', (v) => (v === 'x' ? 300 : 60_000))
  await sleep(400)
  let calls = 0
  assert.equal(await cache.wrap('fn-ttl', async () => (calls++, 'y')), 'y')
  assert.equal(calls, 1, 'the 300 ms ttl chosen from the value applied')
  assert.equal(await cache.wrap('undef', async () => (calls++, undefined)), undefined)
  assert.equal(await cache.wrap('undef', async () => (calls++, undefined)), undefined)
  assert.equal(calls, 3, 'undefined is not cached, as in cache-manager')
  await assert.rejects(cache.wrap('boom', async () => { throw new Error('origin down') }), /origin down/)
  assert.equal(await cache.wrap('boom', async () => 'ok'), 'ok')
  const raw = await cache.wrap('raw', async () => 7, { ttl: 10_000, raw: true })
  assert.equal(raw.value, 7)
  assert.ok(Math.abs(raw.expires - (Date.now() + 10_000)) < 1_000)
  await cache.disconnect()
})

test('wrap: concurrent callers share one call of fn (single-flight)', async () => {
  const cache = createCache({ ttl: 60_000 })
  let calls = 0
  const values = await Promise.all(
    Array.from({ length: 100 }, () => cache.wrap('herd', async () => { calls++; await sleep(100); return { n: 1 } }))
  )
  assert.equal(calls, 1)
  values[0].n = 2
  assert.deepEqual(values[1], { n: 1 }, 'each caller has its own copy')
  await cache.disconnect()
})

test('refreshThreshold: a hit near the end of the ttl answers at once and refreshes in the background', async () => {
  const cache = createCache({ ttl: 3_000, refreshThreshold: 2_400 })
  const refreshes = []
  cache.on('refresh', (e) => refreshes.push(e))
  let version = 0
  const load = async () => { await sleep(50); return ++version }
  assert.equal(await cache.wrap('r', load), 1)
  await sleep(700) // past 1 - 2400/3000 = 20% of the ttl
  assert.equal(await cache.wrap('r', load), 1, 'the cached value, at once')
  await within(2_000, (async () => { while (refreshes.length === 0) await sleep(10) })(), 'the refresh')
  assert.deepEqual(refreshes, [{ key: 'r', value: 2 }])
  assert.equal(await cache.get('r'), 2)
  await cache.disconnect()
})

test('grace: past the ttl a stale value is served while one refresh runs', async () => {
  const cache = createCache({ ttl: 200, grace: 5_000 })
  let calls = 0
  const load = async () => { calls++; await sleep(100); return calls }
  assert.equal(await cache.wrap('g', load), 1)
  await sleep(300)
  const stale = await Promise.all(Array.from({ length: 20 }, () => cache.wrap('g', load)))
  assert.deepEqual([...new Set(stale)], [1])
  await within(5_000, (async () => { while ((await cache.get('g')) !== 2) await sleep(10) })(), 'the refresh')
  assert.equal(calls, 2, 'one background refresh for the 20 callers')
  await cache.disconnect()
})

test('clear() drops only this cache\'s namespace; keys with ":" stay in it', async () => {
  const shared = new Cache({ ttl: 60_000 })
  const a = createCache({ cache: shared, namespace: 'a' })
  const b = createCache({ cache: shared, namespace: 'b' })
  await a.set('user:1', 'a1')
  await b.set('user:1', 'b1')
  await a.clear()
  assert.equal(await a.get('user:1'), undefined)
  assert.equal(await b.get('user:1'), 'b1')
  await a.disconnect()
  assert.equal(shared.closed, false, 'a Cache you pass stays open')
  assert.equal(await a.get('x'.repeat(5_000)), undefined, 'a key too long is a miss, not a crash')
  assert.throws(() => createCache({ cache: shared, refreshThreshold: 10 }), /refreshAhead/)
  assert.throws(() => createCache({ stores: [] }), /stores/)
  shared.close()
})

const haveRedis = spawnSync('redis-server', ['--version']).status === 0
const ci = process.env.CI === 'true'

test('wrap across two caches of one Redis: one call of fn for the herd', { skip: !haveRedis && !ci && 'redis-server is not on PATH', timeout: 30_000 }, async () => {
  assert.ok(haveRedis, 'redis-server is not installed, and CI=true requires the Redis tests to run')
  const port = await freePort()
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'inherit'] })
  try {
    await within(10_000, new Promise((resolve) => server.stdout.on('data', (d) => /Ready to accept/.test(String(d)) && resolve())), 'redis-server start')
    const redis = `redis://127.0.0.1:${port}`
    const one = createCache({ ttl: 60_000, redis })
    const two = createCache({ ttl: 60_000, redis })
    let calls = 0
    const fn = async () => { calls++; await sleep(200); return { price: 42 } }
    const all = await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 ? one : two).wrap('product:7', fn)))
    assert.equal(calls, 1)
    assert.deepEqual([...new Set(all.map((v) => v.price))], [42])
    await one.del('product:7')
    assert.equal(await two.get('product:7'), undefined, 'a del reaches the other cache')
    await one.disconnect()
    await two.disconnect()
  } finally {
    server.kill()
  }
})
