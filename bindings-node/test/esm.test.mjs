// The ES module entry, used as an ES module.
import test from 'node:test'
import assert from 'node:assert/strict'
import herdless, { Cache, ABSENT, buildKey } from 'herdless'

test('ESM: named and default imports work', async () => {
  const cache = new Cache({ ttl: 1000 })
  assert.equal(await cache.getOrLoad(buildKey({ namespace: 'esm', entity: 'x', id: 1 }), async () => 'ok'), 'ok')
  assert.equal(await cache.getOrLoad('esm:absent', async () => ABSENT), undefined)
  assert.equal(herdless.Cache, Cache)
})
