'use strict'
// Value isolation (`copyValues`, issue 28): an object stored or read is the caller's own, as
// with the platforms' caches, so one caller mutating it never changes what another reads (a
// response mutated after it was cached carried one user's cookie to the next). Values come
// back as structured clones; what cannot be copied as it is is refused, not changed.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache, ABSENT } = require('herdless')

const fresh = (options = {}) => new Cache({ ttl: 60_000, jitter: 0, beta: 0, ...options })

test('a value mutated by its writer after set is not what readers get', async () => {
  const cache = fresh()
  const d = { plan: 'free', nested: { list: [1, 2] } }
  await cache.set('acct', d)
  d.plan = 'pro'
  d.nested.list.push(3)
  assert.deepEqual(cache.get('acct'), { plan: 'free', nested: { list: [1, 2] } })
})

test('a value mutated by one reader is not what the next reader gets, however often read', async () => {
  const cache = fresh()
  await cache.set('acct', { plan: 'free' })
  // Past the JS front's admission (it keeps answers read often): a copy is still per reader.
  for (let i = 0; i < 100; i++) {
    const v = cache.get('acct')
    assert.equal(v.plan, 'free', `read ${i}`)
    v.plan = `mutated ${i}`
  }
  assert.notEqual(cache.get('acct'), cache.get('acct'))
  assert.equal(cache.peek('acct').value.plan, 'free')
})

test('a loader answer is copied in, and each getOrLoad caller gets its own copy', async () => {
  const cache = fresh()
  const answer = { n: 1 }
  const first = await cache.getOrLoad('k', async () => answer)
  assert.notEqual(first, answer)
  answer.n = 99
  first.n = 98
  for (let i = 0; i < 100; i++) {
    const v = await cache.getOrLoad('k', async () => ({ n: -1 }))
    assert.equal(v.n, 1, `call ${i}`)
    v.n = 97
  }
  const [a, b] = await Promise.all([
    cache.getOrLoad('herd', async () => ({ n: 2 })),
    cache.getOrLoad('herd', async () => ({ n: 3 })),
  ])
  assert.deepEqual(a, { n: 2 })
  assert.deepEqual(b, { n: 2 })
  assert.notEqual(a, b, 'the leader and a waiter each get their own copy')
})

test('batch answers are copied in and out', async () => {
  const cache = fresh()
  const shared = { v: 1 }
  const [x, y] = await cache.getOrLoadMany(['x', 'y'], async () => ({ x: shared, y: shared }))
  assert.notEqual(x, y)
  x.v = 2
  shared.v = 3
  const [x2] = await cache.getOrLoadMany(['x'], async () => ({ x: { v: -1 } }))
  assert.equal(x2.v, 1)
})

test('the types structured clone keeps come back as themselves; cycles are kept', async () => {
  const cache = fresh()
  const cyclic = { name: 'root' }
  cyclic.self = cyclic
  const values = {
    map: new Map([['a', { b: 1 }]]),
    set: new Set([1, 2]),
    date: new Date(0),
    buffer: Buffer.from('bytes'),
    bytes: new Uint8Array([1, 2, 3]),
    array: [1, [2, [3]]],
    cyclic,
  }
  for (const [k, v] of Object.entries(values)) await cache.set(k, v)
  assert.ok(cache.get('map') instanceof Map)
  assert.deepEqual(cache.get('map').get('a'), { b: 1 })
  assert.ok(cache.get('set') instanceof Set)
  assert.ok(cache.get('date') instanceof Date)
  const buf = cache.get('buffer')
  assert.ok(Buffer.isBuffer(buf))
  assert.equal(buf.toString(), 'bytes')
  buf[0] = 0
  assert.equal(cache.get('buffer').toString(), 'bytes')
  assert.ok(cache.get('bytes') instanceof Uint8Array)
  assert.deepEqual(cache.get('array'), [1, [2, [3]]])
  const c = cache.get('cyclic')
  assert.equal(c.self, c)
  assert.notEqual(c, cyclic)
})

test('plain data past the copier\'s depth or budget, and odd keys, are copied faithfully', async () => {
  const cache = fresh()
  let deep = { leaf: true }
  for (let i = 0; i < 200; i++) deep = { next: deep }
  await cache.set('deep', deep)
  let got = cache.get('deep')
  for (let i = 0; i < 200; i++) got = got.next
  assert.equal(got.leaf, true)
  const wide = Array.from({ length: 150_000 }, (_, i) => i)
  await cache.set('wide', wide)
  assert.equal(cache.get('wide').length, 150_000)
  const sparse = []
  sparse[5] = 'x'
  await cache.set('sparse', sparse)
  assert.equal(cache.get('sparse').length, 6)
  assert.equal(0 in cache.get('sparse'), false, 'holes stay holes')
  const parsed = JSON.parse('{"__proto__": {"polluted": 1}, "ok": 1}')
  await cache.set('proto', parsed)
  const back = cache.get('proto')
  assert.equal(Object.getPrototypeOf(back), Object.prototype)
  assert.deepEqual(Object.keys(back), ['__proto__', 'ok'])
  assert.equal(({}).polluted, undefined)
  const bare = Object.create(null)
  bare.k = 1
  await cache.set('bare', bare)
  assert.equal(Object.getPrototypeOf(cache.get('bare')), null)
})

test('what cannot be copied as it is is refused with a typed error, never changed', async () => {
  const cache = fresh()
  class Account {
    constructor() {
      this.plan = 'free'
    }
  }
  await assert.rejects(cache.set('cls', new Account()), (e) => {
    assert.ok(e instanceof TypeError)
    assert.equal(e.code, 'HERDLESS_UNCOPYABLE_VALUE')
    assert.match(e.message, /copyValues: false/)
    return true
  })
  await assert.rejects(cache.set('fn', new Map([['f', () => 1]])), { code: 'HERDLESS_UNCOPYABLE_VALUE' })
  await assert.rejects(cache.getOrLoad('load', async () => new Account()), {
    code: 'HERDLESS_UNCOPYABLE_VALUE',
  })
  assert.equal(cache.get('cls'), undefined)
  // A getter that throws while the answer is copied fails the load; the process lives.
  const throwing = { get boom() { throw new Error('getter') } }
  await assert.rejects(cache.getOrLoad('getter', async () => throwing), /getter/)
  await assert.rejects(cache.getOrLoadMany(['p'], async () => ({ get p() { throw new Error('batch getter') } })))
  // Functions and primitives are kept as they are, at the top and inside plain data.
  const fn = () => 1
  await cache.set('function', fn)
  assert.equal(cache.get('function'), fn)
  await cache.set('holder', { fn, n: 10n })
  assert.equal(cache.get('holder').fn, fn)
  assert.equal(cache.get('holder').n, 10n)
  await cache.set('absent', ABSENT)
  assert.equal(cache.get('absent'), undefined)
})

test('copyValues: false shares the caller\'s object (and the class instances it holds)', async () => {
  const cache = fresh({ copyValues: false })
  class Account {}
  const a = new Account()
  await cache.set('a', a)
  assert.equal(cache.get('a'), a)
  assert.equal(await cache.getOrLoad('a', async () => null), a)
  assert.throws(() => new Cache({ copyValues: 'yes' }), { code: 'HERDLESS_INVALID_OPTION' })
})

test('a rejection is the loader\'s very object for every waiter, never a copy', async () => {
  const cache = fresh()
  const err = new Error('origin down')
  const calls = [1, 2].map(() => cache.getOrLoad('fails', async () => { throw err }))
  for (const c of calls) await assert.rejects(c, (e) => e === err)
})
