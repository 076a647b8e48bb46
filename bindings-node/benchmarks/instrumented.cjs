// Hit path with the integrations on and off: `await getOrLoad` hits of a plain cache against
// one instrumented with OpenTelemetry (an SDK with in-memory exporters, spans and metrics on)
// and registered with prom-client, in interleaved rounds; the median over rounds of the
// mean ns per call. Uses bindings-node's dev dependencies:
//
//   cd bindings-node && node benchmarks/instrumented.cjs [--rounds N] [--calls N]
'use strict'
const { Cache } = require('..')
const client = require('prom-client')
const { MeterProvider, InMemoryMetricExporter, PeriodicExportingMetricReader, AggregationTemporality } =
  require('@opentelemetry/sdk-metrics')
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base')

const arg = (name, fallback) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}
const ROUNDS = arg('--rounds', 15)
const CALLS = arg('--calls', 200_000)

const off = new Cache({ ttl: 3_600_000 })
const on = new Cache({ ttl: 3_600_000 })
const reader = new PeriodicExportingMetricReader({
  exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
  exportIntervalMillis: 3_600_000,
})
require('../lib/opentelemetry.js').instrument(on, {
  meterProvider: new MeterProvider({ readers: [reader] }),
  tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new InMemorySpanExporter())] }),
})
require('../lib/prometheus.js').register(on, { registry: new client.Registry() })

const key = 'bench:v1:item:#42'
const value = { id: 42 }
const loader = async () => value

async function hits(cache) {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < CALLS; i++) await cache.getOrLoad(key, loader)
  return Number(process.hrtime.bigint() - t0) / CALLS
}

async function main() {
  await off.getOrLoad(key, loader)
  await on.getOrLoad(key, loader)
  const runs = { off: [], on: [] }
  for (let r = 0; r < ROUNDS; r++) {
    runs.off.push(await hits(off))
    runs.on.push(await hits(on))
  }
  const median = (xs) => xs.sort((a, b) => a - b)[xs.length >> 1]
  for (const name of ['off', 'on']) {
    console.log(`await getOrLoad(key, loader) hit, integrations ${name.padEnd(3)} ${median(runs[name]).toFixed(1)} ns`)
  }
}

main()
