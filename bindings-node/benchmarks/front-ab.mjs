// The JS front before/after, side by side in one process: the addon of a previous build
// (`--base path/to/herdless.node`, no front) against this checkout (front on, and off),
// with lru-cache get (ttl) as the anchor; and reads mixed with writes (a `set` every 10
// reads over 1,000 keys; every 200 reads over 20 hot keys), which move the write
// generation and empty the front. Same keys, same loops, rounds interleaved; the
// figure is the median over rounds of the mean ns per call.
//
//   cd bindings-node/benchmarks && node --expose-gc front-ab.mjs --base /tmp/base.node [--rounds N] [--calls N]
import { createRequire } from 'node:module'
import { LRUCache } from 'lru-cache'

const require = createRequire(import.meta.url)
const { Cache } = require('..')
const argv = process.argv
const arg = (name, fallback) => {
  const i = argv.indexOf(name)
  return i > 0 ? argv[i + 1] : fallback
}
const ROUNDS = Number(arg('--rounds', 15))
const CALLS = Number(arg('--calls', 1_000_000))
const ASYNC_CALLS = Math.floor(CALLS / 5)
const base = arg('--base', null)
const KEYS = 1000
const keys = Array.from({ length: KEYS }, (_, i) => `bench:v1:item:#${i}`)
const values = keys.map((k, i) => ({ id: i, name: k }))
const loaders = keys.map((_, i) => async () => values[i])

const caches = { front: new Cache({ ttl: 3_600_000, capacity: 10_000 }), 'front off': new Cache({ ttl: 3_600_000, capacity: 10_000, front: false }) }
if (base) caches.base = new (require(base).Cache)({ ttl: 3_600_000, capacity: 10_000 })
const lru = new LRUCache({ max: 10_000, ttl: 3_600_000 })
for (let i = 0; i < KEYS; i++) {
  for (const c of Object.values(caches)) c.set(keys[i], values[i])
  lru.set(keys[i], values[i])
}
let sink
const cases = { 'lru-cache get (ttl)': (n) => { for (let i = 0; i < n; i++) sink = lru.get(keys[i % KEYS]) } }
// One loop per case, written out so no call site is shared.
if (caches.base) {
  const c = caches.base
  cases['base get'] = (n) => { for (let i = 0; i < n; i++) sink = c.get(keys[i % KEYS]) }
  cases['base await getOrLoad'] = async (n) => { for (let i = 0; i < n; i++) sink = await c.getOrLoad(keys[i % KEYS], loaders[i % KEYS]) }
}
{
  const c = caches.front
  cases['front get'] = (n) => { for (let i = 0; i < n; i++) sink = c.get(keys[i % KEYS]) }
  // A write every 10 reads: each moves the (global) write generation, so the front refills.
  cases['front get, 1 set per 10'] = (n) => { for (let i = 0; i < n; i++) { if (i % 10 === 0) c.set(keys[(i * 7) % KEYS], values[(i * 7) % KEYS]); sink = c.get(keys[i % KEYS]) } }
  cases['front get, 1 set per 200'] = (n) => { for (let i = 0; i < n; i++) { if (i % 200 === 0) c.set(keys[(i * 7) % KEYS], values[(i * 7) % KEYS]); sink = c.get(keys[i % 20]) } }
  cases['front await getOrLoad'] = async (n) => { for (let i = 0; i < n; i++) sink = await c.getOrLoad(keys[i % KEYS], loaders[i % KEYS]) }
}
{
  const c = caches['front off']
  cases['front off get'] = (n) => { for (let i = 0; i < n; i++) sink = c.get(keys[i % KEYS]) }
  cases['front off get, 1 set per 10'] = (n) => { for (let i = 0; i < n; i++) { if (i % 10 === 0) c.set(keys[(i * 7) % KEYS], values[(i * 7) % KEYS]); sink = c.get(keys[i % KEYS]) } }
  cases['front off get, 1 set per 200'] = (n) => { for (let i = 0; i < n; i++) { if (i % 200 === 0) c.set(keys[(i * 7) % KEYS], values[(i * 7) % KEYS]); sink = c.get(keys[i % 20]) } }
  cases['front off await getOrLoad'] = async (n) => { for (let i = 0; i < n; i++) sink = await c.getOrLoad(keys[i % KEYS], loaders[i % KEYS]) }
}
for (const [name, c] of Object.entries(caches)) {
  for (const i of [0, 1, KEYS - 1]) if (c.get(keys[i]) !== values[i]) throw new Error(`${name}: not a hit`)
}
async function round(name) {
  const n = name.includes('await') ? ASYNC_CALLS : CALLS
  if (global.gc) global.gc()
  const t0 = process.hrtime.bigint()
  await cases[name](n)
  return Number(process.hrtime.bigint() - t0) / n
}
for (const name of Object.keys(cases)) await round(name)
const samples = Object.fromEntries(Object.keys(cases).map((n) => [n, []]))
for (let r = 0; r < ROUNDS; r++) for (const name of Object.keys(cases)) samples[name].push(await round(name))
void sink
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const lruM = median(samples['lru-cache get (ttl)'])
console.log(`node ${process.version}, ${ROUNDS} rounds, ${CALLS} sync / ${ASYNC_CALLS} async calls per round, ${KEYS} keys, all hits`)
console.log('| case | median per call | / lru-cache get (ttl) |')
console.log('|------|----------------:|------:|')
for (const [name, xs] of Object.entries(samples)) console.log(`| ${name} | ${median(xs).toFixed(1)} ns | ${(median(xs) / lruM).toFixed(2)}x |`)
const per = samples['front get'].map((x, i) => x / samples['lru-cache get (ttl)'][i]).sort((a, b) => a - b)
console.log(`front get / lru-cache get (ttl) per round: min ${per[0].toFixed(2)}x, median ${median(per).toFixed(2)}x, max ${per[per.length - 1].toFixed(2)}x`)
for (const c of Object.values(caches)) if (c.metrics().total.hits === 0) throw new Error('no hits counted')
