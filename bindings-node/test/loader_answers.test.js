'use strict'
// Whatever a loader answers is read defensively (issue 33 item 2): a throwing getter, a
// Proxy whose traps throw, a revoked Proxy, a structure too deep to copy reject the call
// (single key and batch, and a batch answer that is itself such an object), and the
// process lives; sparse and huge arrays, cycles, BigInt and Symbols are answered.
const test = require('node:test')
const assert = require('node:assert/strict')

const { Cache } = require('..')

function revoked() {
  const r = Proxy.revocable({}, {})
  r.revoke()
  return r.proxy
}

const REJECTED = {
  'a throwing getter': () => ({ get x() { throw new Error('getter') } }),
  'a Proxy whose ownKeys throws': () => new Proxy({}, { ownKeys() { throw new Error('trap') } }),
  'a revoked Proxy': revoked,
  'a structure 100,000 levels deep': () => {
    const root = {}
    let o = root
    for (let i = 0; i < 100_000; i++) o = o.next = {}
    return root
  },
}

const ANSWERED = {
  'a sparse array': () => { const a = []; a[1e9] = 1; return a },
  'a cycle': () => { const o = { a: 1 }; o.self = o; return o },
  'a BigInt': () => 10n ** 30n,
  'a Symbol': () => Symbol('s'),
  'an object holding a Symbol': () => ({ s: Symbol('s') }),
}

for (const [what, make] of Object.entries(REJECTED)) {
  test(`a loader answering ${what} rejects the call; the process lives`, async () => {
    const cache = new Cache({ ttl: 1000 })
    await assert.rejects(cache.getOrLoad('k:1', async () => make()))
    await assert.rejects(cache.getOrLoadMany(['k:2'], async () => ({ 'k:2': make() })), { code: 'HERDLESS_BATCH' })
    // Nothing was cached: the next call loads again.
    assert.equal(await cache.getOrLoad('k:1', async () => 'fine'), 'fine')
  })
}

for (const what of ['a Proxy whose ownKeys throws', 'a revoked Proxy']) {
  test(`a batch loader whose whole answer is ${what} rejects the batch`, async () => {
    const cache = new Cache({ ttl: 1000 })
    await assert.rejects(cache.getOrLoadMany(['a:1'], async () => REJECTED[what]()), { code: 'HERDLESS_BATCH' })
  })
}

for (const [what, make] of Object.entries(ANSWERED)) {
  test(`a loader answering ${what} is answered`, async () => {
    const cache = new Cache({ ttl: 1000 })
    const v = await cache.getOrLoad('k:1', async () => make())
    assert.equal(typeof v, typeof make())
    const [w] = await cache.getOrLoadMany(['k:2'], async () => ({ 'k:2': make() }))
    assert.equal(typeof w, typeof make())
  })
}
