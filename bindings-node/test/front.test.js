'use strict'
// The JS front of recent answers (issue #17 part 1, lib/front.js, src/front.rs): it never
// answers what the engine would not, and its hits are the engine's hits.
// - the model: random operations from several async tasks run against two caches of one
//   configuration, the front on and off, give the same answers and the same counters;
// - each kind of write makes the front miss at once (set, invalidate, bump, tag
//   invalidation and expiry, eviction, a finished load, a notification from the fleet, a
//   lost subscription);
// - hits served by the front reach metrics, the hot-key tracker and the eviction policy.

const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache, testing } = require('herdless')
const { sleep } = require('./helpers.js')

// Room for every key: each cache seeds its own hasher, so two caches spread keys over
// their shards differently and per-shard eviction would differ with or without a front.
// The front keeps answers readers share: with copyValues (the default) an object is each
// reader's own copy and never kept there, so the tests of objects in the front share them.
const OPTIONS = { copyValues: false, ttl: 60_000, jitter: 0, capacity: 10_000 }

// A small deterministic generator (mulberry32), so a failing run can be replayed.
function rng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// The counters of a metrics snapshot, by namespace and in total (histograms left out: they
// hold durations).
function counters(cache) {
  const m = cache.metrics()
  const pick = (o) => Object.fromEntries(Object.entries(o).filter(([, v]) => typeof v === 'number'))
  const ns = Object.fromEntries(m.namespaces.map((n) => [n.namespace, pick(n)]))
  return { total: pick(m.total), ns, entries: m.entries }
}

const front = (cache) => cache._front()

test('the front is on by default, off with front: false, and its option is checked', () => {
  assert.ok(front(new Cache()))
  assert.ok(front(new Cache({ front: true })))
  assert.ok(front(new Cache({ front: { capacity: 4 } })))
  assert.equal(front(new Cache({ front: false })), null)
  assert.throws(() => new Cache({ front: { capacity: 0 } }), { name: 'RangeError', code: 'HERDLESS_INVALID_OPTION' })
  assert.throws(() => new Cache({ front: { capacity: 70_000 } }), { name: 'RangeError' })
  assert.throws(() => new Cache({ front: { size: 3 } }), { name: 'TypeError', code: 'HERDLESS_INVALID_OPTION' })
  assert.throws(() => new Cache({ front: 'yes' }), { name: 'TypeError', code: 'HERDLESS_INVALID_OPTION' })
})

for (const seed of [1, 2, 3, 4]) {
  test(`model (seed ${seed}): front on and off give the same answers and counters`, async () => {
    const on = new Cache({ ...OPTIONS })
    const off = new Cache({ ...OPTIONS, front: false })
    const random = rng(seed)
    const keys = []
    for (const ns of ['a', 'b', 'c']) for (let i = 0; i < 16; i++) keys.push(`${ns}:${i}`)
    const tagsOf = (key) => [`t${key.length % 3}`, `t:${key.split(':')[1] % 4}`]
    let version = 0
    const pickKey = () => keys[Math.floor(random() * keys.length)]
    const loader = (v) => async () => {
      await new Promise((r) => setImmediate(r))
      return v
    }
    const same = (a, b, what) => assert.deepEqual(a, b, `${what}: front on and off differ`)
    // One operation at a time across both caches (tasks interleave between operations):
    // a load's completion reaches the JS thread through another thread, so two caches
    // racing the same operations could finish their loads in different orders.
    let turn = Promise.resolve()
    const exclusive = (f) => {
      const run = turn.then(f)
      turn = run.catch(() => {})
      return run
    }
    async function task(steps) {
      for (let s = 0; s < steps; s++) await exclusive(() => step())
    }
    // Reads right after a write, before its promise settles, are where a stale front
    // would show: writes are made at once, their promises settle later.
    const readBack = (key) => {
      if (random() < 0.7) for (const k of [key, key, pickKey()]) same(on.get(k), off.get(k), `get ${k} after a write`)
    }
    async function both(key, write) {
      const p = Promise.all([write(on), write(off)])
      readBack(key)
      return p
    }
    async function step() {
      const r = random()
      const key = pickKey()
      if (r < 0.35) {
        same(on.get(key), off.get(key), `get ${key}`)
      } else if (r < 0.65) {
        const v = `v${++version}`
        const [x, y] = await Promise.all([on.getOrLoad(key, loader(v)), off.getOrLoad(key, loader(v))])
        same(x, y, `getOrLoad ${key}`)
        readBack(key)
      } else if (r < 0.75) {
        const v = `s${++version}`
        const tags = random() < 0.5 ? tagsOf(key) : undefined
        await both(key, (c) => c.set(key, v, { tags }))
      } else if (r < 0.82) {
        same(...(await both(key, (c) => c.invalidate(key))), `invalidate ${key}`)
      } else if (r < 0.85) {
        await both(key, (c) => c.bump(key.split(':')[0]))
      } else if (r < 0.89) {
        const tag = tagsOf(key)[Math.floor(random() * 2)]
        const soft = random() < 0.3
        await both(key, (c) => c.invalidateTag(tag, { soft }))
      } else if (r < 0.94) {
        const p = (c) => {
          const x = c.peek(key)
          return x && { value: x.value, state: x.state }
        }
        same(p(on), p(off), `peek ${key}`)
      } else {
        same(counters(on), counters(off), 'counters mid-run')
      }
    }
    await Promise.all([task(250), task(250), task(250), task(250)])
    same(counters(on), counters(off), 'counters at the end')
    assert.ok(counters(on).total.hits > 100, 'the run had hits')
  })
}

// Fills the front with `key` (the engine admits an answer after a few reads under one write
// generation) and checks it is there.
function warmFront(cache, key) {
  const a = cache.get(key)
  for (let i = 0; i < 40; i++) assert.equal(cache.get(key), a)
  const e = front(cache).map.get(key)
  assert.ok(e && e.value === a, `${key} is in the front`)
  return a
}

test('each kind of write makes the front miss at once', async () => {
  const cache = new Cache({ ttl: 60_000, capacity: 8, copyValues: false })
  const one = { n: 1 }
  const two = { n: 2 }

  await cache.set('k:1', one)
  warmFront(cache, 'k:1')
  await cache.set('k:1', two) // set
  assert.equal(cache.get('k:1'), two)

  warmFront(cache, 'k:1')
  await cache.invalidate('k:1') // invalidate
  assert.equal(cache.get('k:1'), undefined)

  await cache.set('k:1', one)
  warmFront(cache, 'k:1')
  await cache.bump('k') // namespace bump
  assert.equal(cache.get('k:1'), undefined)

  await cache.set('k:1', one, { tags: ['red'] })
  warmFront(cache, 'k:1')
  await cache.invalidateTag('red') // tag invalidation
  assert.equal(cache.get('k:1'), undefined)

  await cache.set('k:1', one, { tags: ['blue'] })
  warmFront(cache, 'k:1')
  await cache.invalidateTags(['blue'], { soft: true }) // tag expiry: no grace, so gone
  assert.equal(cache.get('k:1'), undefined)

  await cache.set('k:1', one)
  warmFront(cache, 'k:1')
  for (let i = 0; i < 8; i++) await cache.set(`other:${i}`, i) // eviction
  assert.equal(cache.get('k:1'), cache.peek('k:1')?.value)

  await cache.invalidate('k:2')
  assert.equal(await cache.getOrLoad('k:2', async () => one), one)
  warmFront(cache, 'k:2')
  await cache.invalidate('k:2')
  const p = cache.getOrLoad('k:2', async () => two) // a finished load
  assert.equal(await p, two)
  assert.equal(cache.get('k:2'), two)
  assert.equal(await cache.getOrLoad('k:2', async () => one), two)
})

test('Cache.prototype.get (no front) stays coherent with the front', async () => {
  const cache = new Cache({ ttl: 60_000, copyValues: false })
  await cache.set('p:1', 'a')
  warmFront(cache, 'p:1')
  await cache.set('p:1', 'b')
  assert.equal(Object.getPrototypeOf(Object.getPrototypeOf(cache)).get.call(cache, 'p:1'), 'b')
  assert.equal(cache.get('p:1'), 'b')
})

test('a notification from the fleet, and a lost subscription, make the front miss', async () => {
  const name = `front-${process.pid}`
  const a = new Cache({ ttl: 60_000, redis: `memory://${name}`, copyValues: false })
  const b = new Cache({ ttl: 60_000, redis: `memory://${name}`, copyValues: false })
  await a.set('f:1', 'one')
  assert.equal(await a.getOrLoad('f:1', async () => 'never'), 'one')
  warmFront(a, 'f:1')
  await b.set('f:1', 'two')
  let seen
  for (let i = 0; i < 200 && seen !== 'two' && seen !== undefined; i++) {
    await sleep(5)
    seen = a.get('f:1')
  }
  assert.notEqual(seen, 'one', 'the front kept an answer the fleet replaced')

  await a.set('f:2', 'x')
  warmFront(a, 'f:2')
  testing.memoryStore(name).restartSubscriptions()
  for (let i = 0; i < 200 && a.peek('f:2') !== undefined; i++) await sleep(5)
  assert.equal(a.peek('f:2'), undefined)
  assert.equal(a.get('f:2'), undefined)
})

test('front hits are counted, sampled by the hot-key tracker and mark entries as used', async () => {
  const on = new Cache({ ttl: 60_000, capacity: 64, copyValues: false })
  const off = new Cache({ ttl: 60_000, capacity: 64, front: false, copyValues: false })
  for (const c of [on, off]) {
    await c.set('hot:1', 'h')
    for (let i = 0; i < 5000; i++) c.get('hot:1')
  }
  assert.equal(on.metrics().total.hits, 5000)
  assert.deepEqual(counters(on), counters(off))
  assert.equal(on.hotKeys(1)[0]?.key, 'hot:1')
  assert.equal(on.alerts().length, off.alerts().length)
  // Eviction sees the marks of front hits: a key read (from the front) between every two
  // writes of a flood keeps its second chance and survives, as without a front.
  for (let i = 0; i < 400; i++) {
    for (const c of [on, off]) {
      await c.set(`cold:${i}`, i)
      c.get('hot:1')
    }
  }
  assert.ok(on.metrics().total.evictions > 300)
  assert.equal(on.peek('hot:1')?.value, 'h')
  assert.equal(off.peek('hot:1')?.value, 'h')
  assert.equal(on.metrics().total.hits, off.metrics().total.hits)
})

test('the front is bounded by its capacity', async () => {
  const cache = new Cache({ ttl: 60_000, front: { capacity: 4 }, copyValues: false })
  for (let i = 0; i < 20; i++) {
    await cache.set(`b:${i}`, i)
    cache.get(`b:${i}`)
  }
  assert.ok(front(cache).map.size <= 4)
  for (let i = 0; i < 20; i++) assert.equal(cache.get(`b:${i}`), i)
  assert.equal(cache.metrics().total.hits, 40)
})

test('with copyValues (the default) objects never enter the front; primitives do', async () => {
  const cache = new Cache({ ttl: 60_000 })
  await cache.set('obj', { n: 1 })
  await cache.set('str', 'shared')
  for (let i = 0; i < 40; i++) {
    cache.get('obj').n = i + 2
    assert.equal(cache.get('str'), 'shared')
    assert.equal((await cache.getOrLoad('obj', async () => null)).n, 1)
  }
  assert.equal(front(cache).map.has('obj'), false, 'an object copy is never kept for the next reader')
  assert.equal(front(cache).map.has('str'), true)
  assert.equal(cache.get('obj').n, 1)
})

test('getOrLoad with options takes the front exactly when the engine would take its hit path', async () => {
  const cache = new Cache({ ...OPTIONS })
  const off = new Cache({ ...OPTIONS, front: false })
  for (const c of [cache, off]) await c.set('k', 'v')
  warmFront(cache, 'k')
  for (let i = 0; i < 41; i++) off.get('k')
  // A marker in the front's answer tells a front hit from the engine's.
  front(cache).map.get('k').value = 'front'
  const loader = async () => 'loaded'
  const hoisted = { ttl: 1000 }
  const answers = async (options) => [await cache.getOrLoad('k', loader, options), await off.getOrLoad('k', loader, options)]
  for (let i = 0; i < 3; i++) {
    assert.deepEqual(await answers(hoisted), ['front', 'v'])
    assert.deepEqual(await answers({ ttl: 5, tti: 7 }), ['front', 'v'])
    assert.deepEqual(await answers({}), ['front', 'v'])
  }
  // Invalid options are rejected as the engine rejects them, front or not.
  for (const bad of [{ ttl: -1 }, { tti: 'x' }, { bogus: 1 }, 'x', null, [], () => {}, { signal: 3 }]) {
    for (const c of [cache, off]) {
      await assert.rejects(c.getOrLoad('k', loader, bad), { code: 'HERDLESS_INVALID_OPTION' }, `${c === off ? 'off' : 'on'}: ${JSON.stringify(bad)}`)
    }
  }
  // A call with a signal is the engine's: an aborted one rejects even a hit.
  const live = new AbortController()
  assert.deepEqual(await answers({ signal: live.signal }), ['v', 'v'])
  const gone = new AbortController()
  gone.abort(new Error('gone'))
  for (const c of [cache, off]) await assert.rejects(c.getOrLoad('k', loader, { signal: gone.signal }), /gone/)
  // A remembered options object given a signal since goes to the engine again.
  hoisted.signal = gone.signal
  await assert.rejects(cache.getOrLoad('k', loader, hoisted), /gone/)
  await assert.rejects(off.getOrLoad('k', loader, hoisted), /gone/)
  assert.deepEqual(counters(cache), counters(off))
})
