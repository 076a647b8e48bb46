// One process of ab.mjs: `get` hits of one addon build against lru-cache `get` (ttl), in the
// same loop shape, interleaved; prints "<herdless ns> <lru-cache ns>" (the second-fastest of
// 12 rounds of 1,000,000 calls each: the least disturbed, not the typical).
import { createRequire } from 'node:module'
const require = createRequire(import.meta.url)
const { LRUCache } = require('lru-cache')
const { Cache } = require(process.argv[2])

const KEYS = 1000
const N = 1_000_000
const keys = Array.from({ length: KEYS }, (_, i) => `bench:v1:item:#${i}`)
const values = keys.map((k, i) => ({ id: i, name: k }))
const cache = new Cache({ ttl: 3_600_000, capacity: 10_000 })
const lru = new LRUCache({ max: 10_000, ttl: 3_600_000 })
for (let i = 0; i < KEYS; i++) {
  cache.set(keys[i], values[i])
  lru.set(keys[i], values[i])
}
// Scratch builds that stop part-way (to time a part of the path) answer no hits: allowed
// with AB_PARTIAL=1.
if (cache.get(keys[7]) !== values[7] && !process.env.AB_PARTIAL) {
  throw new Error(`${process.argv[2]}: not a hit (a partial build? AB_PARTIAL=1)`)
}

const herdless = () => {
  let s
  for (let i = 0; i < N; i++) s = cache.get(keys[i % KEYS])
  return s
}
const lruGet = () => {
  let s
  for (let i = 0; i < N; i++) s = lru.get(keys[i % KEYS])
  return s
}
let sink
const time = (f) => {
  const t0 = process.hrtime.bigint()
  sink = f()
  return Number(process.hrtime.bigint() - t0) / N
}
const a = []
const b = []
for (let r = 0; r < 12; r++) {
  a.push(time(herdless))
  b.push(time(lruGet))
}
void sink
a.sort((x, y) => x - y)
b.sort((x, y) => x - y)
console.log(a[1].toFixed(2), b[1].toFixed(2))
