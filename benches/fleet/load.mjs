// The load generator of benches/fleet: sends the request sequence of a file (one product id
// a line) to the fleet's workers, round-robin, over keep-alive connections, at a fixed rate.
//
// Paced, not flat out: every contender then runs for the same wall time, so the same keys
// expire during the run (a faster contender would otherwise see fewer expiries and fewer
// origin queries), and CPU per request is measured at one given load, which is what a fleet
// is sized for. Its own CPU is not counted (the driver reads the workers' only).
//
//   node load.mjs <sequence-file> <rate req/s> <concurrency> <port>[,<port>...]
// Prints one JSON line: {sent, ok, errors, seconds, behind_ms} (behind_ms: how late the last
// request left against its slot; large when the fleet could not keep the rate).
import { readFileSync } from 'node:fs'
import http from 'node:http'

const [file, rateArg, concArg, portsArg] = process.argv.slice(2)
const ids = readFileSync(file, 'utf8').trim().split('\n')
const rate = Number(rateArg)
const concurrency = Number(concArg)
const ports = portsArg.split(',').map(Number)
// One keep-alive pool per worker, so every worker gets its share of the connections.
const agents = ports.map(() => new http.Agent({ keepAlive: true, maxSockets: Math.ceil(concurrency / ports.length) }))

let next = 0
let ok = 0
let errors = 0
let behind = 0
const firstError = []

function get(i) {
  const w = i % ports.length
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port: ports[w], path: `/products/${ids[i]}`, agent: agents[w] }, (res) => {
      res.resume()
      res.on('end', () => {
        if (res.statusCode === 200) ok++
        else {
          errors++
          if (firstError.length === 0) firstError.push(`status ${res.statusCode}`)
        }
        resolve()
      })
    })
    req.on('error', (e) => {
      errors++
      if (firstError.length === 0) firstError.push(String(e.message))
      resolve()
    })
  })
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const t0 = performance.now()
async function lane() {
  for (;;) {
    const i = next++
    if (i >= ids.length) return
    const slot = t0 + (i * 1000) / rate
    const now = performance.now()
    if (slot > now + 1) await sleep(slot - now)
    else behind = Math.max(behind, now - slot)
    await get(i)
  }
}
await Promise.all(Array.from({ length: concurrency }, lane))
const seconds = (performance.now() - t0) / 1000
for (const a of agents) a.destroy()
console.log(JSON.stringify({ sent: ids.length, ok, errors, seconds, behind_ms: Math.round(behind), first_error: firstError[0] }))
