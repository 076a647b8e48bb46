'use strict'
// One getOrLoadMany of N keys needs memory linear in N and any N the flights allow (issue 33
// item 6): each loader call split off the keys used to keep the capacity of every key after
// it (peak RSS 124 MB at 25,000 keys, 877 MB at 100,000), and a sync loader's answers were
// taken a stack frame per loader call (RangeError past ~119 calls). Peak RSS is read in fresh
// child processes.
const test = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')

const CHILD = `
const { Cache } = require(${JSON.stringify(path.join(__dirname, '..'))})
const n = Number(process.argv[1])
const cache = new Cache({ ttl: 600000, capacity: 2 * n, maxFlights: 2 * n })
const keys = Array.from({ length: n }, (_, i) => 'p:' + i)
let calls = 0
cache.getOrLoadMany(keys, (ks) => { calls++; return Object.fromEntries(ks.map((k) => [k, k.length])) })
  .then((values) => {
    const ok = values.length === n && values.every((v, i) => v === keys[i].length)
    console.log(JSON.stringify({ ok, calls, peakKiB: process.resourceUsage().maxRSS }))
  }, (e) => { console.log(JSON.stringify({ ok: false, error: String(e) })) })
`

function batchOf(n) {
  return JSON.parse(execFileSync(process.execPath, ['-e', CHILD, String(n)]).toString())
}

test('a batch of 150,000 keys with a sync loader answers every key', () => {
  const r = batchOf(150_000)
  assert.equal(r.ok, true, r.error)
  assert.equal(r.calls, 150)
})

test('the peak memory of one batch grows linearly with its keys', () => {
  const small = batchOf(25_000)
  const large = batchOf(100_000)
  assert.ok(small.ok && large.ok)
  // Four times the keys: 2.1x the peak RSS here (88 -> 188 MB, a ~50 MB process included);
  // quadratic growth was 7x.
  assert.ok(large.peakKiB < 4 * small.peakKiB, `25,000 keys ${small.peakKiB} KiB, 100,000 keys ${large.peakKiB} KiB`)
})
