// Peak memory of one getOrLoadMany of N distinct keys (issue 33 item 6): each N in a fresh
// child process, its peak RSS (process.resourceUsage().maxRSS) beside that of N single
// getOrLoad calls, on the memory tier or, with --redis URL, on a Redis tier.
//
//   node bindings-node/benchmarks/batch-memory.mjs [--redis redis://127.0.0.1:6379]
import { execFileSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const SIZES = [25_000, 50_000, 100_000, 200_000]
const args = process.argv.slice(2)
const redis = args.includes('--redis') ? args[args.indexOf('--redis') + 1] : undefined

async function child(n, how) {
  const { Cache } = require('..')
  // A batch holds a flight per key it leads: the default maxFlights (100,000) refuses more.
  const options = { ttl: 600_000, capacity: 2 * n, maxFlights: 2 * n }
  if (redis) Object.assign(options, { redis, redisPrefix: `bench-mem-${randomUUID().slice(0, 8)}` })
  const cache = new Cache(options)
  const keys = Array.from({ length: n }, (_, i) => `p:${i}`)
  let values
  if (how === 'batch') {
    values = await cache.getOrLoadMany(keys, (ks) => Object.fromEntries(ks.map((k) => [k, k.length])))
  } else {
    values = await Promise.all(keys.map((k) => cache.getOrLoad(k, async () => k.length)))
  }
  if (values.length !== n) throw new Error('short answer')
  console.log(JSON.stringify({ peakKiB: process.resourceUsage().maxRSS }))
  await cache.close?.()
}

if (args[0] === '--child') {
  await child(Number(args[1]), args[2])
  process.exit(0)
} else {
  console.log(`| keys | one batch, peak RSS (MB) | N getOrLoad, peak RSS (MB) | tier ${redis ? 'redis' : 'memory'} |`)
  console.log('|---|---|---|---|')
  for (const n of SIZES) {
    const row = ['batch', 'single'].map((how) => {
      const extra = redis ? ['--redis', redis] : []
      const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', String(n), how, ...extra])
      return (JSON.parse(out.toString()).peakKiB / 1024).toFixed(0)
    })
    console.log(`| ${n.toLocaleString('en')} | ${row[0]} | ${row[1]} | |`)
  }
}
