'use strict'
// CPU of one herdless hit in the Node binding over Redis, with and without a per-call options
// object: `getOrLoad(key, load, { ttl })` goes to the engine on every hit, `getOrLoad(key,
// load)` is answered by the JS front (lib/front.js). Tells whether the front matters at the
// scale of a fleet's request (BENCHMARKS.md, "Fleets: CPU per request").
//   node benches/fleet/hit_cost.cjs [redis://127.0.0.1:6379/13]
const { Cache } = require('../../bindings-node')

const cache = new Cache({ ttl: 60_000, redis: process.argv[2] ?? 'redis://127.0.0.1:6379/13', redisPrefix: `hitcost${process.pid}` })
const load = async () => ({ id: 1, name: 'x'.repeat(200), price: 3.5 })
const options = { ttl: 60_000 }
;(async () => {
  for (let k = 0; k < 10; k++) await cache.getOrLoad(`products:${k}`, load, options)
  for (const round of [1, 2]) {
    for (const [label, call] of [
      ['getOrLoad(key, load, { ttl })', (k) => cache.getOrLoad(k, load, options)],
      ['getOrLoad(key, load)', (k) => cache.getOrLoad(k, load)],
    ]) {
      const before = process.cpuUsage()
      for (let i = 0; i < 200_000; i++) await call(`products:${i % 10}`)
      const used = process.cpuUsage(before)
      console.log(`round ${round}: ${label}: ${((used.user + used.system) / 200_000).toFixed(2)} us CPU per hit`)
    }
  }
  for (let k = 0; k < 10; k++) await cache.invalidate(`products:${k}`)
  process.exit(0)
})()
