// The cost of value isolation (`copyValues`, issue 28), side by side in one process: a
// `get` hit with copies (the default) against the same hit with `copyValues: false`, for a
// string (never copied), a small object and a larger one (a 50-item list of records), and
// `structuredClone` of that value alone (the floor of a copy). Rounds interleave the cases;
// the figure is the median over rounds of the mean ns per call.
//
//   cd bindings-node/benchmarks && node copy.mjs [--rounds N] [--calls N]
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { Cache } = require('..')

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const ROUNDS = arg('--rounds', 11)
const CALLS = arg('--calls', 200_000)

const values = {
  string: 'a cached string value',
  small: { id: 42, name: 'Ada', plan: 'free' },
  large: { items: Array.from({ length: 50 }, (_, i) => ({ id: i, name: `item ${i}`, tags: ['a', 'b'] })) },
}
const copied = new Cache({ ttl: 3_600_000, copyValues: true })
const shared = new Cache({ ttl: 3_600_000, copyValues: false })
for (const [k, v] of Object.entries(values)) {
  await copied.set(k, v)
  await shared.set(k, v)
}

let sink = 0
const cases = []
for (const k of Object.keys(values)) {
  cases.push([`get ${k}, copyValues: true`, () => { for (let i = 0; i < CALLS; i++) sink ^= copied.get(k) === undefined ? 1 : 0 }])
  cases.push([`get ${k}, copyValues: false`, () => { for (let i = 0; i < CALLS; i++) sink ^= shared.get(k) === undefined ? 1 : 0 }])
  if (k !== 'string') {
    const v = values[k]
    cases.push([`structuredClone(${k}) alone`, () => { for (let i = 0; i < CALLS; i++) sink ^= structuredClone(v) === undefined ? 1 : 0 }])
  }
}
const times = new Map(cases.map(([name]) => [name, []]))
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, run] of cases) {
    const t = process.hrtime.bigint()
    run()
    times.get(name).push(Number(process.hrtime.bigint() - t) / CALLS)
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
console.log(`node ${process.version}, ${ROUNDS} rounds x ${CALLS} calls (sink ${sink})`)
for (const [name, xs] of times) console.log(`${name.padEnd(36)} ${median(xs).toFixed(1).padStart(9)} ns`)
