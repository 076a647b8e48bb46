'use strict'
// OpenTelemetry metrics and load spans for a cache, through @opentelemetry/api:
//
//   const { instrument } = require('herdless/opentelemetry')
//   instrument(cache)                                   // the global providers
//   instrument(cache, { meterProvider, tracerProvider, name: 'pages' })
//
// Nothing is emitted until it is called (the application owns the SDK and its exporters),
// and it adds nothing to a hit: the metrics are observable instruments read from one
// `cache.metrics()` per collection, and the spans are made by an observer the engine calls
// only when a loader runs.
//
// Metrics (attribute `herdless.namespace`, and `herdless.cache` when `name` is given):
// `herdless.<counter>` for each counter (`herdless.hits`, `herdless.loads`,
// `herdless.coalesced_waiters`, ...: the engine's names, monotonic), `herdless.load.time`
// and `herdless.lock_wait.time` (seconds summed), the gauges `herdless.entries`,
// `herdless.weight`, `herdless.loads_in_flight` and `herdless.alerts_active`
// (`herdless.alert.kind`, `herdless.alert.cause`), with a shared tier each of its counters
// as `herdless.redis.<counter>`, and the histogram `herdless.load.duration` (seconds;
// `error.type` on failure) recorded as each load ends.
//
// Spans: one `herdless.load` span (kind INTERNAL) per loader call, the caller's active span
// as parent and itself active while the loader runs, with `cache.key` (unless
// `recordKeys: false`: keys may carry user data), `cache.operation` (`load`, or `refresh`
// for a background refresh), `cache.hit` (false) and `herdless.namespace`; a loader's error is
// recorded, with `error.type`. OpenTelemetry has no semantic conventions for caches yet:
// these are the names cache instrumentations commonly use.
const { version } = require('../package.json')

const snake = (s) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
const namespaceOf = (key) => {
  const i = key.indexOf(':')
  return i < 0 ? key : key.slice(0, i)
}

/**
 * Reports `cache`'s metrics through OpenTelemetry and, unless `options.spans` is false, a
 * span per loader call. Returns `{ uninstrument() }`, which stops both.
 */
function instrument(cache, options = {}) {
  if (!cache || typeof cache.metrics !== 'function' || typeof cache._setLoadObserver !== 'function') {
    throw new TypeError('herdless/opentelemetry: instrument() takes a herdless Cache')
  }
  const api = require('@opentelemetry/api')
  const meterProvider = options.meterProvider || api.metrics.getMeterProvider()
  const meter = meterProvider.getMeter('herdless', version)
  const base = options.name === undefined ? {} : { 'herdless.cache': String(options.name) }
  const first = cache.metrics()

  const counters = Object.keys(first.total).map((field) => ({
    field,
    instrument: meter.createObservableCounter(`herdless.${snake(field)}`, { unit: '1' }),
  }))
  const loadTime = meter.createObservableCounter('herdless.load.time', {
    unit: 's',
    description: 'Time spent in loader calls, summed.',
  })
  const lockWaitTime = meter.createObservableCounter('herdless.lock_wait.time', {
    unit: 's',
    description: "Time waiters waited for another caller's load, summed.",
  })
  const gauges = ['entries', 'weight', 'loadsInFlight'].map((field) => ({
    field,
    instrument: meter.createObservableGauge(`herdless.${snake(field)}`, { unit: '1' }),
  }))
  const alerts = meter.createObservableGauge('herdless.alerts_active', {
    unit: '1',
    description: 'Stampede alerts holding now.',
  })
  const redis = Object.keys(first.redis || {}).map((field) => ({
    field,
    instrument: meter.createObservableCounter(`herdless.redis.${snake(field)}`, { unit: '1' }),
  }))
  const observables = [
    ...counters.map((c) => c.instrument),
    loadTime,
    lockWaitTime,
    ...gauges.map((g) => g.instrument),
    alerts,
    ...redis.map((r) => r.instrument),
  ]
  const collect = (result) => {
    const m = cache.metrics()
    for (const ns of m.namespaces) {
      const attrs = { ...base, 'herdless.namespace': ns.namespace }
      for (const c of counters) result.observe(c.instrument, ns.counters[c.field], attrs)
      result.observe(loadTime, ns.loadDuration.sumMs / 1000, attrs)
      result.observe(lockWaitTime, ns.lockWait.sumMs / 1000, attrs)
    }
    for (const g of gauges) result.observe(g.instrument, m[g.field], base)
    const held = new Map()
    for (const a of cache.alerts()) {
      const k = JSON.stringify([a.namespace, a.kind, a.cause])
      held.set(k, (held.get(k) || 0) + (a.active ? 1 : 0))
    }
    for (const [k, n] of held) {
      const [namespace, kind, cause] = JSON.parse(k)
      result.observe(alerts, n, {
        ...base,
        'herdless.namespace': namespace,
        'herdless.alert.kind': kind,
        'herdless.alert.cause': cause,
      })
    }
    for (const r of redis) result.observe(r.instrument, (m.redis || {})[r.field] || 0, base)
  }
  meter.addBatchObservableCallback(collect, observables)

  let spans = options.spans !== false
  if (spans) {
    const tracerProvider = options.tracerProvider || api.trace.getTracerProvider()
    const tracer = tracerProvider.getTracer('herdless', version)
    const duration = meter.createHistogram('herdless.load.duration', {
      unit: 's',
      description: 'Duration of loader calls.',
    })
    cache._setLoadObserver(observer(api, tracer, duration, base, options.recordKeys !== false))
  }
  return {
    uninstrument() {
      meter.removeBatchObservableCallback(collect, observables)
      if (spans) cache._setLoadObserver(null)
      spans = false
    },
  }
}

function observer(api, tracer, duration, base, recordKeys) {
  return function herdlessLoad(key, background, fn, bound) {
    const namespace = namespaceOf(key)
    const attributes = {
      ...base,
      'cache.operation': background ? 'refresh' : 'load',
      'cache.hit': false,
      'herdless.namespace': namespace,
    }
    if (recordKeys) attributes['cache.key'] = key
    return tracer.startActiveSpan('herdless.load', { kind: api.SpanKind.INTERNAL, attributes }, (span) => {
      const started = performance.now()
      const end = (error) => {
        const measured = { ...base, 'herdless.namespace': namespace }
        if (error !== undefined) {
          const type = (error && error.constructor && error.constructor.name) || typeof error
          span.recordException(error instanceof Error ? error : String(error))
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: String(error && error.message) })
          span.setAttribute('error.type', type)
          measured['error.type'] = type
        }
        duration.record((performance.now() - started) / 1000, measured)
        span.end()
      }
      let result
      try {
        result = bound ? fn.apply(bound[0], bound.slice(1)) : fn()
      } catch (e) {
        end(e)
        throw e
      }
      if (result && typeof result.then === 'function') {
        return Promise.resolve(result).then(
          (v) => {
            end()
            return v
          },
          (e) => {
            end(e)
            throw e
          }
        )
      }
      end()
      return result
    })
  }
}

module.exports = { instrument }
