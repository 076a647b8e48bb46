'use strict'
// The Fastify example through Fastify's own test client (inject): a stampede reaches the
// origin once, /metrics shows it, and an OpenTelemetry SDK sees one load span.
const test = require('node:test')
const assert = require('node:assert/strict')
const api = require('@opentelemetry/api')
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks')
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base')
const { buildApp } = require('./app.js')

// The application's SDK, installed before the app is built (as a service's startup does).
const spans = new InMemorySpanExporter()
api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
api.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }))

test('a stampede on a product page reaches the origin once', async () => {
  const origin = {
    calls: 0,
    async product(id) {
      this.calls++
      await new Promise((r) => setTimeout(r, 100))
      return id === 404 ? null : { id, name: `Product ${id}` }
    },
  }
  const app = await buildApp(origin)
  const answers = await Promise.all(Array.from({ length: 50 }, () => app.inject('/products/7')))
  assert.deepEqual([...new Set(answers.map((r) => r.statusCode))], [200])
  assert.deepEqual(answers[0].json(), { id: 7, name: 'Product 7' })
  assert.equal(origin.calls, 1)
  assert.equal((await app.inject('/products/404')).statusCode, 404)
  assert.equal((await app.inject('/products/404')).statusCode, 404)
  assert.equal(origin.calls, 2)
  const scrape = (await app.inject('/metrics')).body
  assert.match(scrape, /^herdless_loads_total\{namespace="products"\} 2$/m)
  const loads = spans.getFinishedSpans().filter((s) => s.name === 'herdless.load')
  assert.deepEqual(
    loads.map((s) => s.attributes['cache.key']),
    ['products:v1:#7', 'products:v1:#404']
  )
  await app.close()
})
