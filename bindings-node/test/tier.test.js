'use strict'
// The shared tier's behaviour as a Node user sees it, on the in-memory tier
// (`memory://<name>` and `testing.memoryStore`, no redis-server needed): what writes do when
// the tier fails, a codec of your own, unreadable and unshareable values, absences.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache, ABSENT, testing } = require('herdless')
const { sleep, within } = require('./helpers.js')

let stores = 0
/** A fresh in-memory tier and `n` caches on it (processes of one fleet). */
function fleet(n, options = {}) {
  const name = `tier-test-${process.pid}-${++stores}`
  const caches = Array.from({ length: n }, () => new Cache({ redis: `memory://${name}`, jitter: 0, beta: 0, ...options }))
  return { store: testing.memoryStore(name), caches }
}

const counters = (cache, ns) => cache.metrics().namespaces.find((n) => n.namespace === ns)?.counters

/** Collects the HerdlessWarnings emitted while `f` runs (they are emitted on a later tick). */
async function warnings(f) {
  const seen = []
  const on = (w) => w.name === 'HerdlessWarning' && seen.push(w.message)
  process.on('warning', on)
  try {
    await f()
    await sleep(10)
  } finally {
    process.off('warning', on)
  }
  return seen
}

test('testing.memoryStore: arguments are checked; the class is not constructed by hand', () => {
  assert.ok(testing.memoryStore('same') instanceof testing.MemoryStore)
  assert.throws(() => testing.memoryStore('same').setFault('flaky'), { name: 'RangeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  assert.throws(() => testing.memoryStore('same').plantLock('k:1', 0), { name: 'RangeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  assert.throws(() => testing.memoryStore('same').plantLock('k:1', NaN), { name: 'RangeError' })
  assert.throws(() => new testing.MemoryStore())
})

test('the tier down: get and read answer from memory or miss; set, invalidate and bump reject after dropping the copy', { timeout: 10_000 }, async () => {
  const { store, caches: [a, b] } = fleet(2)
  await a.set('down:1', 'v1')
  assert.equal(await b.read('down:1'), 'v1', 'read asks the tier')
  store.setFault('down')
  assert.equal(a.get('down:1'), 'v1')
  assert.equal(await a.read('down:1'), 'v1')
  assert.equal(await a.read('down:2'), undefined)
  await assert.rejects(a.set('down:1', 'v2'), { name: 'Error', code: 'HERDLESS_BACKEND', message: /the shared cache tier failed/ })
  assert.equal(a.get('down:1'), undefined, 'a write that did not reach the fleet leaves no copy')
  await b.set('down:3', 'kept?').catch(() => {})
  assert.equal(b.get('down:3'), undefined)
  await assert.rejects(a.invalidate('down:1'), { code: 'HERDLESS_BACKEND' })
  await assert.rejects(a.bump('down'), { code: 'HERDLESS_BACKEND' })
  assert.equal(counters(a, 'down').backendErrors, 4) // read of down:2, set, invalidate, bump
  // Loads go on in each process, for itself.
  assert.equal(await a.getOrLoad('down:4', async () => 'local'), 'local')
  store.setFault(null)
  await a.set('down:1', 'v3')
  assert.equal(await b.read('down:1'), 'v3')
})

test('a codec of your own: a Date round-trips through the shared tier', { timeout: 10_000 }, async () => {
  const codec = {
    encode: (v) => Buffer.from(v instanceof Date ? `D${v.toISOString()}` : `J${JSON.stringify(v)}`),
    decode: (b) => {
      const text = b.toString()
      return text[0] === 'D' ? new Date(text.slice(1)) : JSON.parse(text.slice(1))
    },
  }
  const { caches: [a, b] } = fleet(2, { codec })
  const when = new Date('2024-02-29T12:34:56.789Z')
  assert.deepEqual(await a.getOrLoad('dates:1', async () => when), when)
  let called = false
  const got = await b.getOrLoad('dates:1', async () => ((called = true), null))
  assert.equal(called, false, 'read from the shared tier')
  assert.ok(got instanceof Date)
  assert.equal(got.getTime(), when.getTime())
  await a.set('dates:2', { n: 1 })
  assert.deepEqual(await b.read('dates:2'), { n: 1 })
})

test("a codec's refusals: set rejects with encode's own error, a load is served locally and warned once per namespace", { timeout: 10_000 }, async () => {
  const refusal = new TypeError('not this one')
  const codec = {
    encode: (v) => {
      if (v === 'odd') throw refusal
      return typeof v === 'string' ? Buffer.from(v) : 'not bytes'
    },
    decode: (b) => b.toString(),
  }
  const { caches: [a, b] } = fleet(2, { codec })
  await assert.rejects(a.set('odd:1', 'odd'), (e) => e === refusal)
  await assert.rejects(a.set('odd:1', 42), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT', message: /codec.encode must return a Buffer or Uint8Array/ })
  const told = await warnings(async () => {
    assert.equal(await a.getOrLoad('odd:1', async () => 'odd'), 'odd')
    assert.equal(await a.getOrLoad('odd:2', async () => 'odd'), 'odd')
    assert.equal(await a.getOrLoad('other:1', async () => 'odd'), 'odd')
  })
  assert.equal(told.length, 2, `once per namespace: ${told.join(' | ')}`)
  assert.match(told[0], /the value of "odd:1" cannot be encoded by the cache's codec \(codec: not this one\)/)
  assert.match(told[1], /"other:1"/)
  assert.equal(a.metrics().redis.unshareableValues, 3)
  assert.equal(a.get('odd:1'), 'odd', 'served in its process')
  // The other process loads for itself (the "load locally" mark) rather than waiting.
  assert.equal(await b.getOrLoad('odd:1', async () => 'b loaded'), 'b loaded')
})

test('bytes a codec cannot read are a miss and a corrupt entry, left for the process that can', { timeout: 10_000 }, async () => {
  const name = `tier-test-${process.pid}-${++stores}`
  const raw = new Cache({ redis: `memory://${name}`, codec: 'buffer' })
  const json = new Cache({ redis: `memory://${name}` })
  const strict = new Cache({ redis: `memory://${name}`, codec: { encode: (v) => Buffer.from(String(v)), decode: () => { throw new Error('not mine') } } })
  await raw.set('bytes:1', Buffer.from([0xff, 0xfe, 0x00]))
  assert.equal(await json.read('bytes:1'), undefined)
  assert.equal(await json.getOrLoad('bytes:1', async () => 'json loads its own'), 'json loads its own')
  assert.equal(await strict.read('bytes:1'), undefined)
  assert.equal(json.metrics().redis.corruptEntries, 2, 'the read and the load')
  assert.equal(strict.metrics().redis.corruptEntries, 1)
  // Not overwritten by the processes that cannot read them.
  assert.deepEqual([...(await new Cache({ redis: `memory://${name}`, codec: 'buffer' }).read('bytes:1'))], [0xff, 0xfe, 0x00])
  // Planted junk that is no entry at all: a miss too, never an error.
  testing.memoryStore(name).plant('junk:1', 'not an entry')
  assert.equal(await json.read('junk:1'), undefined)
  assert.equal(json.metrics().redis.corruptEntries, 3)
})

test('an absence set in one process is shared', { timeout: 10_000 }, async () => {
  const { caches: [a, b] } = fleet(2)
  await a.set('gone:1', ABSENT)
  let called = false
  assert.equal(await b.getOrLoad('gone:1', async () => ((called = true), 'loaded')), undefined)
  assert.equal(called, false)
  assert.equal(b.metrics().total.negativeHits + b.metrics().redis.l2Hits, 1)
})

test('a per-call ttl past what the tier keeps (100 years) is a RangeError', { timeout: 10_000 }, async () => {
  const { caches: [a] } = fleet(1)
  const tooLong = 101 * 365 * 86_400_000
  for (const call of [() => a.set('ttl:1', 1, { ttl: tooLong }), () => a.getOrLoad('ttl:2', async () => 1, { ttl: tooLong })]) {
    await assert.rejects(call(), (e) => {
      assert.equal(e.name, 'RangeError')
      assert.equal(e.code, 'HERDLESS_INVALID_OPTION')
      assert.match(e.message, /longer than/)
      assert.equal(e.maxMs, 100 * 365 * 86_400_000)
      return true
    })
  }
  assert.equal(a.get('ttl:2'), undefined)
  assert.equal(await a.getOrLoad('ttl:2', async () => 'fine', { ttl: 1000 }), 'fine')
})

test('without a shared tier, read is get as a promise', async () => {
  const cache = new Cache()
  await cache.set('r:1', 'here')
  assert.equal(await cache.read('r:1'), 'here')
  assert.equal(await cache.read('r:2'), undefined)
  await assert.rejects(cache.read(7), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  assert.equal(cache.metrics().redis, undefined)
})

test('a stall: the leader gives up at the operation timeout and loads for itself; the tier catches up', { timeout: 15_000 }, async () => {
  const { store, caches: [a, b] } = fleet(2)
  store.setFault('stall')
  const started = Date.now()
  assert.equal(await within(5_000, a.getOrLoad('stall:1', async () => 'local')), 'local')
  assert.ok(Date.now() - started >= 900, 'after the 1 s operation timeout')
  store.setFault(null)
  await sleep(100)
  assert.equal(await b.getOrLoad('stall:1', async () => 'shared'), 'shared', 'no lock was left behind')
})
