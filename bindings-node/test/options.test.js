'use strict'
// Bad options throw TypeError (wrong type) or RangeError (out of range), naming the option.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('herdless')

const cases = [
  [{ ttl: '60s' }, TypeError, /option `ttl` must be a number, got a string/],
  [{ ttl: 0 }, RangeError, /option `ttl` must be a duration in milliseconds > 0, got 0/],
  [{ ttl: -5 }, RangeError, /`ttl`/],
  [{ ttl: Infinity }, RangeError, /option `ttl` must be a finite number/],
  [{ ttl: NaN }, RangeError, /option `ttl` must be a finite number/],
  [{ grace: -1 }, RangeError, /option `grace` must be a duration in milliseconds >= 0/],
  [{ negativeTtl: 0 }, RangeError, /`negativeTtl`/],
  [{ waitTimeout: null }, TypeError, /option `waitTimeout` must be a number, got null/],
  [{ maxStale: 0 }, RangeError, /`maxStale`/],
  [{ failsafeBackoff: -1 }, RangeError, /`failsafeBackoff`/],
  [{ softTimeout: 100, hardTimeout: 100 }, RangeError, /`softTimeout` must be shorter than `hardTimeout`/],
  [{ grace: 1000, maxStale: 10 }, RangeError, /`maxStale` must be at least `grace`/],
  [{ jitter: 1 }, RangeError, /option `jitter` must be in \[0, 1\), got 1/],
  [{ jitter: '0.1' }, TypeError, /option `jitter` must be a number/],
  [{ beta: -0.5 }, RangeError, /option `beta` must be >= 0/],
  [{ capacity: 0 }, RangeError, /option `capacity` must be an integer >= 1, got 0/],
  [{ capacity: 1.5 }, RangeError, /`capacity`/],
  [{ originBudget: 0 }, RangeError, /`originBudget`/],
  [{ maxKeyLen: 0 }, RangeError, /`maxKeyLen`/],
  [{ maxFlights: -1 }, RangeError, /`maxFlights`/],
  [{ namespace: 'a:b' }, RangeError, /option `namespace`/],
  [{ namespace: 7 }, TypeError, /option `namespace` must be a string, got a number/],
  [{ redis: 'localhost:6379' }, TypeError, /option `redis`: .*expected redis:\/\/, unix:\/\/, redis\+cluster:\/\/.* or memory:\/\//],
  [{ redis: 42 }, TypeError, /option `redis` must be a URL string or an array of node URLs, got a number/],
  [{ redis: [] }, TypeError, /option `redis`: .*must not be empty/],
  [{ redis: ['redis://127.0.0.1:1', 7] }, TypeError, /option `redis`: node 1 must be a URL string/],
  [{ redis: ['redis://127.0.0.1:1', 'memory://x'] }, TypeError, /option `redis`: .*expected redis:\/\/host:port/],
  [{ ttlMs: 5 }, TypeError, /unknown Cache option `ttlMs`/],
  ['fast', TypeError, /Cache options must be an object, got a string/],
  [[1], TypeError, /Cache options must be an object, got an array/],
]

for (const [options, kind, message] of cases) {
  test(`new Cache(${JSON.stringify(options)}) throws ${kind.name}`, () => {
    assert.throws(
      () => new Cache(options),
      (e) => {
        assert.ok(e instanceof kind, `${e.name}: ${e.message}`)
        assert.equal(e.code, 'HERDLESS_INVALID_OPTION')
        assert.match(e.message, message)
        return true
      }
    )
  })
}

test('good options build a cache; no options too', () => {
  assert.ok(new Cache())
  assert.ok(new Cache(undefined))
  assert.ok(
    new Cache({
      ttl: 1500.5,
      grace: 0,
      negativeTtl: 100,
      waitTimeout: 1000,
      maxStale: 60_000,
      failsafeBackoff: 0,
      softTimeout: 100,
      hardTimeout: 1000,
      jitter: 0,
      beta: 0,
      capacity: 1,
      originBudget: 20,
      maxFlights: 10,
      maxKeyLen: 64,
      maxNamespaces: 4,
      namespace: 'app',
    })
  )
})

test('Redis options need the redis option, and are checked', () => {
  assert.throws(() => new Cache({ codec: 'json' }), { name: 'TypeError', message: /option `codec` needs the `redis` option/ })
  assert.throws(() => new Cache({ lease: 100 }), { name: 'TypeError', message: /option `lease` needs the `redis` option/ })
  assert.throws(() => new Cache({ redis: 'redis://127.0.0.1:1', codec: 'pickle' }), { name: 'RangeError', message: /option `codec` must be 'json' or 'buffer'/ })
  assert.throws(() => new Cache({ redis: 'redis://127.0.0.1:1', lease: 0 }), { name: 'RangeError', message: /`lease`/ })
  // Connecting is lazy: a cache is made while Redis is unreachable.
  assert.ok(new Cache({ redis: 'redis://127.0.0.1:1', redisPrefix: 'x', codec: 'buffer', lease: 1000 }))
})

test('redis takes every address form, and codec an { encode, decode } object', () => {
  // Connecting is lazy: these build while nothing listens.
  const addresses = [
    'redis://127.0.0.1:1',
    'unix:///tmp/herdless-none.sock',
    'redis+cluster://127.0.0.1:1,127.0.0.1:2',
    'memory://options-test',
    ['redis://127.0.0.1:1', 'redis://127.0.0.1:2'],
  ]
  for (const redis of addresses) assert.ok(new Cache({ redis }), JSON.stringify(redis))
  const codec = { encode: (v) => Buffer.from(String(v)), decode: (b) => b.toString() }
  assert.ok(new Cache({ redis: 'memory://options-test', codec }))
  assert.throws(() => new Cache({ redis: 'memory://options-test', codec: { encode: 1, decode() {} } }), {
    name: 'TypeError',
    code: 'HERDLESS_INVALID_OPTION',
    message: /option `codec`: `encode` must be a function/,
  })
  assert.throws(() => new Cache({ redis: 'memory://options-test', codec: { encode() {} } }), {
    name: 'TypeError',
    message: /option `codec`: `decode` must be a function/,
  })
  for (const bad of [7, [], null]) {
    assert.throws(() => new Cache({ redis: 'memory://options-test', codec: bad }), { name: 'TypeError', code: 'HERDLESS_INVALID_OPTION' })
  }
  assert.throws(() => new Cache({ codec }), { name: 'TypeError', message: /option `codec` needs the `redis` option/ })
})
