// Hit-path latency, side by side in one process:
//   sync get hit:  herdless cache.get (copying objects, the default, and copyValues: false,
//                  like for like)  vs  lru-cache get (with TTL, and without), Map.get
//   async hit:     await herdless cache.getOrLoad (copying; not copying, without options, with
//                  an options object made once, with a literal per call)
//                  vs  await bentocache (memory) getOrSet
//                  vs  await async-cache-dedupe (memory)
// Every cache holds the same KEYS keys (all warmed, so every measured call is a hit), each
// case runs the same number of calls in its own loop (so no call site is shared between
// libraries), rounds are interleaved across cases to spread machine noise, and the figure
// is the median over rounds of the mean ns per call.
//
//   cd bindings-node/benchmarks && npm ci && node --expose-gc hits.mjs [--rounds N] [--calls N]
import { createRequire } from 'node:module'
import { LRUCache } from 'lru-cache'
import { BentoCache, bentostore } from 'bentocache'
import { memoryDriver } from 'bentocache/drivers/memory'
import { createCache } from 'async-cache-dedupe'

const require = createRequire(import.meta.url)
const { Cache } = require('..')

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const ROUNDS = arg('--rounds', 15)
const SYNC_CALLS = arg('--calls', 1_000_000)
const ASYNC_CALLS = Math.max(1, Math.floor(SYNC_CALLS / 5))
const KEYS = 1000
const keys = Array.from({ length: KEYS }, (_, i) => `bench:v1:item:#${i}`)
const values = keys.map((k, i) => ({ id: i, name: k }))
const MASK = KEYS - 1 // KEYS is not a power of two: use modulo below

// ---- the caches ------------------------------------------------------------------------

const herdless = new Cache({ ttl: 3_600_000, capacity: 10_000 })
// Like for like with lru-cache, which hands out the stored object: no copy per reader.
const shared = new Cache({ ttl: 3_600_000, capacity: 10_000, copyValues: false })
const lruTtl = new LRUCache({ max: 10_000, ttl: 3_600_000 })
const lruPlain = new LRUCache({ max: 10_000 })
const map = new Map()
const bento = new BentoCache({
  default: 'memory',
  stores: { memory: bentostore().useL1Layer(memoryDriver({ maxItems: 10_000 })) },
})
const dedupe = createCache({ ttl: 3600, storage: { type: 'memory', options: { size: 10_000 } } })
dedupe.define('item', async (i) => values[i])

for (let i = 0; i < KEYS; i++) {
  herdless.set(keys[i], values[i])
  shared.set(keys[i], values[i])
  lruTtl.set(keys[i], values[i])
  lruPlain.set(keys[i], values[i])
  map.set(keys[i], values[i])
  await bento.getOrSet({ key: keys[i], factory: () => values[i], ttl: '1h' })
  await dedupe.item(i)
}
const loaders = keys.map((_, i) => async () => values[i])
const LOAD_OPTIONS = { ttl: 60_000 }

// Sanity: every case answers the stored object (a hit).
const check = (name, got, i) => {
  if (got !== values[i] && !(got && got.id === values[i].id)) throw new Error(`${name}: not a hit for key ${i}`)
}
for (const i of [0, 1, KEYS - 1]) {
  check('herdless get', herdless.get(keys[i]), i)
  check('herdless getOrLoad', await herdless.getOrLoad(keys[i], loaders[i]), i)
  check('shared get', shared.get(keys[i]), i)
  check('shared getOrLoad', await shared.getOrLoad(keys[i], loaders[i], { ttl: 60_000 }), i)
  check('lru ttl', lruTtl.get(keys[i]), i)
  check('bentocache', await bento.getOrSet({ key: keys[i], factory: () => values[i], ttl: '1h' }), i)
  check('async-cache-dedupe', await dedupe.item(i), i)
}
void MASK

// ---- the cases: one loop each ------------------------------------------------------------

let sink
const cases = {
  'herdless get': (n) => {
    for (let i = 0; i < n; i++) sink = herdless.get(keys[i % KEYS])
  },
  'herdless get, copyValues: false': (n) => {
    for (let i = 0; i < n; i++) sink = shared.get(keys[i % KEYS])
  },
  'lru-cache get (ttl)': (n) => {
    for (let i = 0; i < n; i++) sink = lruTtl.get(keys[i % KEYS])
  },
  'lru-cache get (no ttl)': (n) => {
    for (let i = 0; i < n; i++) sink = lruPlain.get(keys[i % KEYS])
  },
  'Map get': (n) => {
    for (let i = 0; i < n; i++) sink = map.get(keys[i % KEYS])
  },
  'herdless await getOrLoad': async (n) => {
    for (let i = 0; i < n; i++) sink = await herdless.getOrLoad(keys[i % KEYS], loaders[i % KEYS])
  },
  'herdless await getOrLoad, copyValues: false': async (n) => {
    for (let i = 0; i < n; i++) sink = await shared.getOrLoad(keys[i % KEYS], loaders[i % KEYS])
  },
  'same, options object { ttl } made once': async (n) => {
    for (let i = 0; i < n; i++) sink = await shared.getOrLoad(keys[i % KEYS], loaders[i % KEYS], LOAD_OPTIONS)
  },
  'same, options literal { ttl } per call': async (n) => {
    for (let i = 0; i < n; i++) sink = await shared.getOrLoad(keys[i % KEYS], loaders[i % KEYS], { ttl: 60_000 })
  },
  'bentocache await getOrSet': async (n) => {
    for (let i = 0; i < n; i++) {
      const j = i % KEYS
      sink = await bento.getOrSet({ key: keys[j], factory: loaders[j], ttl: '1h' })
    }
  },
  'async-cache-dedupe await': async (n) => {
    for (let i = 0; i < n; i++) sink = await dedupe.item(i % KEYS)
  },
}
const asyncCases = new Set([
  'herdless await getOrLoad',
  'herdless await getOrLoad, copyValues: false',
  'same, options object { ttl } made once',
  'same, options literal { ttl } per call',
  'bentocache await getOrSet',
  'async-cache-dedupe await',
])

// Each round is timed twice: wall clock (the figure of the goals) and the process's CPU time
// (user + system, all threads), which time slices lost to other processes on a shared machine
// do not inflate.
async function round(name) {
  const n = asyncCases.has(name) ? ASYNC_CALLS : SYNC_CALLS
  if (global.gc) global.gc()
  const c0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  await cases[name](n)
  const wall = Number(process.hrtime.bigint() - t0) / n
  const c = process.cpuUsage(c0)
  return [wall, ((c.user + c.system) * 1000) / n]
}

// Warm-up: every case, enough calls for the JIT to settle.
for (const name of Object.keys(cases)) await round(name)
const samples = Object.fromEntries(Object.keys(cases).map((n) => [n, []]))
const cpuSamples = Object.fromEntries(Object.keys(cases).map((n) => [n, []]))
for (let r = 0; r < ROUNDS; r++) {
  for (const name of Object.keys(cases)) {
    const [wall, cpu] = await round(name)
    samples[name].push(wall)
    cpuSamples[name].push(cpu)
  }
}
void sink

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const result = Object.fromEntries(Object.entries(samples).map(([n, xs]) => [n, median(xs)]))
const cpuResult = Object.fromEntries(Object.entries(cpuSamples).map(([n, xs]) => [n, median(xs)]))
// The per-round ratio of herdless get to lru-cache get (ttl), for the spread over rounds.
const getRatios = samples['herdless get'].map((x, i) => x / samples['lru-cache get (ttl)'][i]).sort((a, b) => a - b)

const fmt = (ns) => (ns >= 1000 ? `${(ns / 1000).toFixed(2)} µs` : `${ns.toFixed(1)} ns`)
console.log(`node ${process.version}, ${ROUNDS} rounds, ${SYNC_CALLS} sync / ${ASYNC_CALLS} async calls per round, ${KEYS} keys, all hits`)
console.log('')
console.log('| case | median per call | calls/s | median CPU time per call |')
console.log('|------|----------------:|--------:|-------------------------:|')
for (const [name, ns] of Object.entries(result)) {
  console.log(`| ${name} | ${fmt(ns)} | ${Math.round(1e9 / ns).toLocaleString('en-US')} | ${fmt(cpuResult[name])} |`)
}
const getRatio = result['herdless get'] / result['lru-cache get (ttl)']
const bentoRatio = result['bentocache await getOrSet'] / result['herdless await getOrLoad']
const dedupeRatio = result['async-cache-dedupe await'] / result['herdless await getOrLoad']
console.log('')
console.log(`goal: herdless get <= 2x lru-cache get (ttl): ${getRatio.toFixed(2)}x -> ${getRatio <= 2 ? 'met' : 'MISSED'}`)
console.log(`goal: herdless getOrLoad >= 3x faster than bentocache getOrSet: ${bentoRatio.toFixed(2)}x -> ${bentoRatio >= 3 ? 'met' : 'MISSED'}`)
console.log(`herdless getOrLoad vs async-cache-dedupe: ${dedupeRatio.toFixed(2)}x faster`)
// Issue 32 goal 3, like for like (no copy per reader): get <= 1.0x lru-cache get (ttl),
// await getOrLoad (with or without options) within 3x of it.
const lru = result['lru-cache get (ttl)']
const lruCpu = cpuResult['lru-cache get (ttl)']
for (const [name, bound] of [
  ['herdless get, copyValues: false', 1],
  ['herdless await getOrLoad, copyValues: false', 3],
  ['same, options object { ttl } made once', 3],
  ['same, options literal { ttl } per call', 3],
]) {
  const r = result[name] / lru
  console.log(`goal: ${name} <= ${bound}x lru-cache get (ttl): ${r.toFixed(2)}x (CPU time ${(cpuResult[name] / lruCpu).toFixed(2)}x) -> ${r <= bound ? 'met' : 'MISSED'}`)
}
const cpuGetRatio = cpuResult['herdless get'] / cpuResult['lru-cache get (ttl)']
const q = (p) => getRatios[Math.min(getRatios.length - 1, Math.floor(p * getRatios.length))]
console.log(`herdless get / lru-cache get (ttl), per round: min ${getRatios[0].toFixed(2)}x, quartiles ${q(0.25).toFixed(2)}x-${q(0.75).toFixed(2)}x, max ${getRatios[getRatios.length - 1].toFixed(2)}x; on CPU time: ${cpuGetRatio.toFixed(2)}x`)
await bento.disconnectAll?.()
