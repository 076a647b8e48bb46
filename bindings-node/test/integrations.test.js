'use strict'
// The framework and monitoring integrations of the package (herdless/express,
// herdless/fastify, herdless/prometheus, herdless/opentelemetry), against the real
// frameworks and SDKs.
const test = require('node:test')
const assert = require('node:assert/strict')

const { Cache, ABSENT } = require('..')
const { listen, sleep } = require('./helpers.js')

test('express: concurrent requests for one key run the handler once', async () => {
  const express = require('express')
  const { cached, metrics } = require('herdless/express')
  const cache = new Cache({ ttl: 60_000 })
  let calls = 0
  const app = express()
  app.get(
    '/items/:id',
    cached(cache, { key: (req) => `items:v1:#${req.params.id}` }, async (req) => {
      calls++
      await sleep(50)
      return req.params.id === '404' ? ABSENT : { id: Number(req.params.id) }
    })
  )
  app.get('/boom', cached(cache, { key: () => 'boom:1' }, async () => Promise.reject(new Error('origin down'))))
  app.get('/metrics', metrics(cache))
  app.use((err, _req, res, _next) => res.status(502).json({ error: err.message }))
  const { server, url } = await listen(app)
  try {
    const answers = await Promise.all(Array.from({ length: 20 }, () => fetch(`${url}/items/7`)))
    assert.deepEqual([...new Set(answers.map((r) => r.status))], [200])
    assert.deepEqual(await answers[0].json(), { id: 7 })
    assert.equal(calls, 1)
    assert.equal((await fetch(`${url}/items/404`)).status, 404)
    assert.equal((await fetch(`${url}/items/404`)).status, 404)
    assert.equal(calls, 2) // the absence is cached
    const boom = await fetch(`${url}/boom`)
    assert.equal(boom.status, 502)
    assert.deepEqual(await boom.json(), { error: 'origin down' })
    const scrape = await fetch(`${url}/metrics`)
    assert.match(scrape.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
    assert.match(await scrape.text(), /^herdless_loads_total\{namespace="items"\} 2$/m)
  } finally {
    server.close()
  }
  assert.throws(() => cached({}, { key: () => 'k' }, () => 1), TypeError)
  assert.throws(() => cached(cache, { key: 'k' }, () => 1), /options.key/)
})

test('fastify: a route with config.herdless runs its handler once per key', async () => {
  const Fastify = require('fastify')
  const cache = new Cache({ ttl: 60_000 })
  const app = Fastify()
  await app.register(require('herdless/fastify'), { cache, metricsPath: '/metrics' })
  let calls = 0
  app.get(
    '/items/:id',
    { config: { herdless: { key: (request) => `items:v1:#${request.params.id}`, ttl: 5_000 } } },
    async (request) => {
      calls++
      await sleep(50)
      return request.params.id === '404' ? ABSENT : { id: Number(request.params.id), by: app.herdless === cache }
    }
  )
  app.get('/plain', async () => ({ plain: true }))
  const answers = await Promise.all(Array.from({ length: 20 }, () => app.inject('/items/7')))
  assert.deepEqual([...new Set(answers.map((r) => r.statusCode))], [200])
  assert.deepEqual(answers[0].json(), { id: 7, by: true })
  assert.equal(calls, 1)
  assert.equal((await app.inject('/items/404')).statusCode, 404)
  assert.deepEqual((await app.inject('/plain')).json(), { plain: true })
  const scrape = await app.inject('/metrics')
  assert.match(scrape.headers['content-type'], /^text\/plain; version=0\.0\.4/)
  assert.match(scrape.body, /^herdless_coalesced_waiters_total\{namespace="items"\} \d+$/m)
  await app.close()
  const bad = Fastify()
  await assert.rejects(bad.register(require('herdless/fastify'), {}).ready(), /options.cache/)
})

/** Every sample of an exposition as `name{sorted labels} value` strings. */
function samples(text) {
  const { parse } = require('../lib/exposition.js')
  return parse(text)
    .flatMap((f) => f.samples)
    .map((s) => {
      const labels = Object.keys(s.labels)
        .sort()
        .map((k) => `${k}=${JSON.stringify(s.labels[k])}`)
      return `${s.name}{${labels.join(',')}} ${s.value}`
    })
    .sort()
}

async function busyCache(name) {
  const cache = new Cache({ ttl: 60_000, redis: `memory://${name}` })
  await cache.getOrLoad('users:v1:#1', async () => 'Ada')
  await cache.getOrLoad('users:v1:#1', async () => 'never')
  await cache.getOrLoad('orders:v1:#1', async () => ({ total: 3 }))
  return cache
}

test('prom-client: the registry carries what prometheus() says, beside the service metrics', async () => {
  const client = require('prom-client')
  const registry = new client.Registry()
  const own = new client.Counter({ name: 'shop_requests_total', help: 'Own.', registers: [registry] })
  own.inc()
  const cache = await busyCache('prom-one')
  const names = require('herdless/prometheus').register(cache, { registry })
  assert.ok(names.includes('herdless_hits_total') && names.includes('herdless_redis_commits_total'))
  const scraped = await registry.metrics()
  assert.match(scraped, /^shop_requests_total 1$/m)
  const ours = samples(scraped).filter((s) => s.startsWith('herdless_'))
  assert.deepEqual(ours, samples(cache.prometheus()))
  assert.ok(ours.includes('herdless_loads_total{namespace="users"} 1'))
  // OpenMetrics output keeps the counters' names.
  registry.setContentType(client.Registry.OPENMETRICS_CONTENT_TYPE)
  assert.match(await registry.metrics(), /^herdless_loads_total\{namespace="users"\} 1$/m)
})

test('prom-client: several caches are told apart by a label', async () => {
  const client = require('prom-client')
  const registry = new client.Registry()
  const pages = await busyCache('prom-pages')
  const sessions = new Cache()
  await sessions.getOrLoad('sessions:abc', async () => 1)
  require('herdless/prometheus').register({ pages, sessions }, { registry })
  const got = samples(await registry.metrics())
  assert.ok(got.includes('herdless_loads_total{cache="pages",namespace="users"} 1'))
  assert.ok(got.includes('herdless_loads_total{cache="sessions",namespace="sessions"} 1'))
  assert.ok(got.includes('herdless_entries{cache="sessions"} 1'))
  assert.throws(() => require('herdless/prometheus').register({ a: {} }, { registry }), TypeError)
})

function otel() {
  const { MeterProvider, InMemoryMetricExporter, PeriodicExportingMetricReader, AggregationTemporality } =
    require('@opentelemetry/sdk-metrics')
  const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base')
  const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks')
  const api = require('@opentelemetry/api')
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 })
  const meterProvider = new MeterProvider({ readers: [reader] })
  const spans = new InMemorySpanExporter()
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] })
  const collect = async () => {
    const { resourceMetrics } = await reader.collect()
    const out = {}
    for (const sm of resourceMetrics.scopeMetrics) {
      for (const m of sm.metrics) {
        out[m.descriptor.name] = m.dataPoints.map((p) => [p.attributes, p.value])
      }
    }
    return out
  }
  return { api, meterProvider, tracerProvider, spans, collect }
}

test('opentelemetry: metrics are the engine counters, spans wrap loads only', async () => {
  const { api, meterProvider, tracerProvider, spans, collect } = otel()
  const { instrument } = require('herdless/opentelemetry')
  // In memory: the loader runs inside the caller's getOrLoad call, so in its async context.
  // (With a shared tier it runs when the fleet lock is won, from the addon's wake-up, where
  // the caller's AsyncLocalStorage context is not carried: the span is then a root span.)
  const cache = new Cache({ ttl: 60_000 })
  const handle = instrument(cache, { meterProvider, tracerProvider, name: 'pages' })
  const tracer = tracerProvider.getTracer('test')
  let inner
  await tracer.startActiveSpan('GET /users/1', async (request) => {
    const load = async () => {
      inner = api.trace.getActiveSpan()
      await sleep(30)
      return 'Ada'
    }
    const got = await Promise.all(Array.from({ length: 10 }, () => cache.getOrLoad('users:v1:#1', load)))
    assert.deepEqual(got, Array(10).fill('Ada'))
    assert.equal(await cache.getOrLoad('users:v1:#1', load), 'Ada') // a hit: no span
    request.end()
  })
  const finished = spans.getFinishedSpans()
  assert.deepEqual(finished.map((s) => s.name).sort(), ['GET /users/1', 'herdless.load'])
  const loadSpan = finished.find((s) => s.name === 'herdless.load')
  const requestSpan = finished.find((s) => s.name === 'GET /users/1')
  assert.equal(loadSpan.parentSpanContext.spanId, requestSpan.spanContext().spanId)
  assert.equal(inner.spanContext().spanId, loadSpan.spanContext().spanId)
  assert.deepEqual(loadSpan.attributes, {
    'herdless.cache': 'pages',
    'cache.key': 'users:v1:#1',
    'cache.operation': 'load',
    'cache.hit': false,
    'herdless.namespace': 'users',
  })
  const m = await collect()
  const users = { 'herdless.cache': 'pages', 'herdless.namespace': 'users' }
  const total = cache.metrics().namespaces.find((n) => n.namespace === 'users').counters
  assert.deepEqual(m['herdless.loads'], [[users, 1]])
  assert.deepEqual(m['herdless.hits'], [[users, total.hits]])
  assert.deepEqual(m['herdless.coalesced_waiters'], [[users, total.coalescedWaiters]])
  assert.deepEqual(m['herdless.entries'], [[{ 'herdless.cache': 'pages' }, 1]])
  const [[attrs, hist]] = m['herdless.load.duration']
  assert.deepEqual(attrs, users)
  assert.equal(hist.count, 1)
  assert.ok(hist.sum >= 0.025, `${hist.sum}`)
  handle.uninstrument()
  await cache.getOrLoad('users:v1:#2', async () => 'Grace')
  assert.equal(spans.getFinishedSpans().length, 2)
  // The callback is gone: the SDK keeps the last value, not the engine's 2 loads.
  assert.deepEqual((await collect())['herdless.loads'], [[users, 1]])

  const fleet = new Cache({ ttl: 60_000, redis: 'memory://otel-node' })
  instrument(fleet, { meterProvider, tracerProvider, name: 'fleet' })
  await fleet.getOrLoad('users:v1:#1', async () => 'Ada')
  const f = await collect()
  assert.deepEqual(f['herdless.redis.commits'], [[{ 'herdless.cache': 'fleet' }, 1]])
  assert.equal(spans.getFinishedSpans().length, 3)
})

test('opentelemetry: failures, refreshes and wrapped functions', async () => {
  const { meterProvider, tracerProvider, spans } = otel()
  const { instrument } = require('herdless/opentelemetry')
  const cache = new Cache({ ttl: 50, grace: 30_000, jitter: 0, beta: 0, namespace: 'shop' })
  instrument(cache, { meterProvider, tracerProvider, recordKeys: false })
  await assert.rejects(
    cache.getOrLoad('rows:1', async () => {
      throw new RangeError('no such row')
    }),
    RangeError
  )
  const [failed] = spans.getFinishedSpans()
  assert.equal(failed.status.code, 2) // ERROR
  assert.equal(failed.attributes['error.type'], 'RangeError')
  assert.equal(failed.attributes['cache.key'], undefined)
  assert.equal(failed.events[0].name, 'exception')
  let n = 0
  const load = async () => `v${++n}`
  assert.equal(await cache.getOrLoad('feed:home', load), 'v1')
  await sleep(80)
  assert.equal(await cache.getOrLoad('feed:home', load), 'v1') // stale; a refresh runs
  for (let i = 0; i < 100 && spans.getFinishedSpans().length < 3; i++) await sleep(10)
  assert.deepEqual(
    spans.getFinishedSpans().map((s) => s.attributes['cache.operation']),
    ['load', 'load', 'refresh']
  )
  const price = cache.wrap(async function price(id) {
    return id * 10
  })
  assert.equal(await price(3), 30)
  assert.equal(spans.getFinishedSpans().at(-1).attributes['herdless.namespace'], 'shop')
  assert.throws(() => instrument({}), TypeError)
  assert.throws(() => cache._setLoadObserver(42), TypeError)
})
