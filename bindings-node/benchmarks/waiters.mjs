// Herds of waiters: N concurrent calls ask for one key that was just dropped, the loader
// takes 1 ms (a setTimeout), and the time is from the start of the round until all N have
// the value. Contenders take turns round by round in a rotating order (so machine noise
// falls on all alike); the figures are each one's median and lowest round per N.
//   floor:              no cache; one call waits the 1 ms, the others resolve at once
//   herdless:           await cache.getOrLoad(key, loader)
//   promise memo:       a Map of in-flight promises (the hand-written dedupe)
//   bentocache:         await bento.getOrSet({ key, factory }) (memory store)
//   async-cache-dedupe: await cache.item(key) (memory storage)
//
//   cd bindings-node/benchmarks && npm ci && node waiters.mjs [--rounds N]
import { createRequire } from 'node:module'
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
const SIZES = [1, 100, 1000, 5000]
const KEY = 'herd:key'
const LOAD_MS = 1
const load = () => new Promise((resolve) => setTimeout(() => resolve(1), LOAD_MS))

const herdless = new Cache({ ttl: 3_600_000, capacity: 10_000 })
const memo = new Map()
const values = new Map()
const bento = new BentoCache({
  default: 'memory',
  stores: { memory: bentostore().useL1Layer(memoryDriver({ maxItems: 10_000 })) },
})
const dedupe = createCache({ ttl: 3600, storage: { type: 'memory', options: { size: 10_000 } } })
dedupe.define('item', async () => load())

const contenders = [
  {
    name: 'floor (no cache)',
    call: (i) => (i === 0 ? load() : Promise.resolve(1)),
    reset: async () => {},
  },
  {
    name: 'herdless await getOrLoad',
    call: () => herdless.getOrLoad(KEY, load),
    reset: async () => {
      await herdless.invalidate(KEY)
    },
  },
  {
    name: 'promise memo (Map of in-flight promises)',
    call: async () => {
      if (values.has(KEY)) return values.get(KEY)
      let p = memo.get(KEY)
      if (!p) {
        p = load().then((v) => {
          values.set(KEY, v)
          memo.delete(KEY)
          return v
        })
        memo.set(KEY, p)
      }
      return p
    },
    reset: async () => {
      values.delete(KEY)
    },
  },
  {
    name: 'bentocache getOrSet (memory)',
    call: () => bento.getOrSet({ key: KEY, factory: load, ttl: '1h' }),
    reset: async () => {
      await bento.delete({ key: KEY })
    },
  },
  {
    name: 'async-cache-dedupe (memory)',
    call: () => dedupe.item(KEY),
    reset: async () => {
      await dedupe.clear('item', KEY)
    },
  },
]

async function roundTime(c, n) {
  await c.reset()
  const began = process.hrtime.bigint()
  const calls = new Array(n)
  for (let i = 0; i < n; i++) calls[i] = c.call(i)
  const got = await Promise.all(calls)
  const took = Number(process.hrtime.bigint() - began) / 1e6
  if (!got.every((v) => v === 1)) throw new Error(`${c.name}: wrong value`)
  return took
}

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]

console.log(`Node ${process.version}, load ${LOAD_MS} ms, ${ROUNDS} rounds per size`)
console.log('| N | contender | median | lowest | median ratio to floor |')
console.log('|---:|---|---:|---:|---:|')
for (const n of SIZES) {
  const times = contenders.map(() => [])
  for (let r = 0; r < ROUNDS + 2; r++) {
    for (let j = 0; j < contenders.length; j++) {
      const k = (j + r) % contenders.length
      const t = await roundTime(contenders[k], n)
      if (r >= 2) times[k].push(t) // the first rounds warm up
    }
  }
  const floor = median(times[0])
  contenders.forEach((c, k) => {
    const m = median(times[k])
    console.log(
      `| ${n.toLocaleString('en')} | ${c.name} | ${m.toFixed(2)} ms | ${Math.min(...times[k]).toFixed(2)} ms | ${(m / floor).toFixed(2)}x |`,
    )
  })
}
await bento.disconnect()
