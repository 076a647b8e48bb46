// A/B of addon builds: `get` hit time of each build, in alternating processes (one build
// per process: two caches in one process disturb each other's memory, and the first one
// loaded measured fastest whichever it was), against lru-cache `get` (ttl) in each process.
//
//   cp ../herdless.linux-x64-gnu.node /tmp/a.node   # a build; then change, rebuild, copy b
//   node ab.mjs /tmp/a.node /tmp/b.node [--passes 6]
//
// Prints per build the fastest and the median over passes, in ns and as a multiple of
// lru-cache's `get` in the same process.
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { resolve } from 'node:path'

const args = process.argv.slice(2)
const at = args.indexOf('--passes')
const passes = at >= 0 ? Number(args.splice(at, 2)[1]) : 6
const builds = args.map((f) => resolve(f))
if (builds.length === 0) throw new Error('usage: node ab.mjs a.node [b.node ...] [--passes N]')
const one = fileURLToPath(new URL('./ab-one.mjs', import.meta.url))

const runs = builds.map(() => [])
for (let p = 0; p < passes; p++) {
  builds.forEach((b, i) => {
    const [ns, lru] = execFileSync(process.execPath, [one, b], { encoding: 'utf8' }).trim().split(' ').map(Number)
    runs[i].push({ ns, ratio: ns / lru })
  })
}
const sorted = (xs) => [...xs].sort((x, y) => x - y)
const median = (xs) => sorted(xs)[xs.length >> 1]
console.log(`node ${process.version}, ${passes} passes`)
console.log('| build | fastest | median | x lru-cache get (ttl), fastest | median |')
console.log('|-------|--------:|-------:|------:|------:|')
builds.forEach((b, i) => {
  const ns = runs[i].map((r) => r.ns)
  const ratio = runs[i].map((r) => r.ratio)
  const name = b.split('/').pop()
  console.log(`| ${name} | ${sorted(ns)[0].toFixed(1)} ns | ${median(ns).toFixed(1)} ns | ${sorted(ratio)[0].toFixed(2)}x | ${median(ratio).toFixed(2)}x |`)
})
