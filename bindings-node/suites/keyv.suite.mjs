// @keyv/test-suite, unchanged, against herdless/keyv: on the memory tier, on memcached, and on the Redis tier
// (two caches of one Redis, the suite's stores alternating between them, so a value one writes
// is read by the other through Redis), with Keyv 5 (the suite's peer: `{ keyv: 5 }`) and Keyv 6
// (the default contract). test/keyv_suite.test.js runs this file with vitest.
import * as vitest from 'vitest'
import keyvTestSuite from '@keyv/test-suite'
import Keyv5 from 'keyv'
import { Keyv as Keyv6 } from 'keyv6'
import { createRequire } from 'node:module'
import { redisSkip, startRedis } from './redis.mjs'

const require = createRequire(import.meta.url)
const { Cache } = require('..')
const { KeyvHerdless } = require('../lib/keyv.js')
const { Memcached, haveMemcached } = require('../test/memcached_support.js')
const memcachedSkip = !haveMemcached && process.env.CI !== 'true' && 'memcached is not on PATH'

for (const [version, Keyv] of [[5, Keyv5], [6, Keyv6]]) {
  vitest.describe(`Keyv ${version}, memory tier`, () => {
    const cache = new Cache({ jitter: 0 })
    keyvTestSuite(vitest, Keyv, () => new KeyvHerdless(cache, { keyv: version }))
  })

  vitest.describe.skipIf(redisSkip)(`Keyv ${version}, Redis tier`, () => {
    let redis
    let caches = []
    let turn = 0
    vitest.beforeAll(async () => {
      redis = await startRedis()
      caches = [new Cache({ jitter: 0, redis: redis.url }), new Cache({ jitter: 0, redis: redis.url })]
    })
    vitest.afterAll(() => {
      for (const c of caches) c.close()
      redis?.stop()
    })
    keyvTestSuite(vitest, Keyv, () => new KeyvHerdless(caches[turn++ % 2], { keyv: version }))
  })

  // The same on memcached: two caches of one memcached, no copies kept in either.
  vitest.describe.skipIf(memcachedSkip)(`Keyv ${version}, memcached tier`, () => {
    let server
    let caches = []
    let turn = 0
    vitest.beforeAll(async () => {
      server = await Memcached.start()
      caches = [new Cache({ jitter: 0, memcached: server.url }), new Cache({ jitter: 0, memcached: server.url })]
    })
    vitest.afterAll(async () => {
      for (const c of caches) c.close()
      await server?.kill()
    })
    keyvTestSuite(vitest, Keyv, () => new KeyvHerdless(caches[turn++ % 2], { keyv: version }))
  })
}

// The control: the suite is written for Keyv 5 (its peer dependency); Keyv 6's own Map store
// shows which of its cases Keyv 6 itself answers otherwise (`delete([keys])` resolves to one
// boolean per key there).
vitest.describe('Keyv 6, its own Map store (control)', () => {
  const map = new Map()
  keyvTestSuite(vitest, Keyv6, () => map)
})
