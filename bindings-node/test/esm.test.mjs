// The ES module entry, used as an ES module.
import test from 'node:test'
import assert from 'node:assert/strict'
import herdless, { Cache, ABSENT, FleetLock, buildKey, testing } from 'herdless'

test('ESM: named and default imports work', async () => {
  const cache = new Cache({ ttl: 1000 })
  assert.equal(await cache.getOrLoad(buildKey({ namespace: 'esm', entity: 'x', id: 1 }), async () => 'ok'), 'ok')
  assert.equal(await cache.getOrLoad('esm:absent', async () => ABSENT), undefined)
  assert.equal(herdless.Cache, Cache)
  const lock = await cache.lock('esm:lock')
  assert.ok(lock instanceof FleetLock && herdless.FleetLock === FleetLock)
  assert.equal(await lock.release(), true)
  // The testing API: an in-memory shared tier with faults.
  const store = testing.memoryStore('esm-test')
  const fleet = new Cache({ redis: 'memory://esm-test' })
  store.setFault('down')
  await assert.rejects(fleet.set('esm:1', 1), { code: 'HERDLESS_BACKEND' })
  store.setFault(null)
  await fleet.set('esm:1', 1)
  assert.equal(await new Cache({ redis: 'memory://esm-test' }).read('esm:1'), 1)
})
