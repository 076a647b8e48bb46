'use strict'
// The package loads from CommonJS and from ES modules, with the same objects.
const test = require('node:test')
const assert = require('node:assert/strict')

test('require and import give the same API', async () => {
  const cjs = require('herdless')
  const esm = await import('herdless')
  assert.equal(typeof cjs.Cache, 'function')
  assert.equal(esm.Cache, cjs.Cache)
  assert.equal(esm.buildKey, cjs.buildKey)
  assert.equal(esm.ABSENT, cjs.ABSENT)
  assert.equal(typeof cjs.testing.memoryStore, 'function')
  assert.equal(esm.testing, cjs.testing)
  assert.equal(esm.default.Cache, cjs.Cache)
})
