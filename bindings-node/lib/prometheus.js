'use strict'
// herdless's metrics on a prom-client registry, beside the service's own:
//
//   const client = require('prom-client')
//   require('herdless/prometheus').register(cache)                  // client.register
//   require('herdless/prometheus').register({ pages, sessions }, { registry })
//
// Each family of `cache.prometheus()` becomes one metric of the registry, read again at each
// scrape (one `prometheus()` call per scrape for all of them), so the series, names, help and
// types are exactly the text exposition's in every language. Several caches share the
// families, each series labelled `cache="<name>"`.
const { parse } = require('./exposition.js')

function caches(target) {
  const isCache = (c) => c && typeof c.prometheus === 'function'
  if (isCache(target)) return [[null, target]]
  if (target && typeof target === 'object' && Object.values(target).every(isCache) && Object.keys(target).length) {
    return Object.entries(target)
  }
  throw new TypeError('register() takes a herdless Cache or an object of named caches')
}

/**
 * Registers the metrics of `target` (a cache, or `{ name: cache }`) with `options.registry`
 * (default: prom-client's global `register`); `options.label` (default `cache`) names the
 * label telling several caches apart. Returns the registered metric names.
 */
function register(target, options = {}) {
  const list = caches(target)
  const registry = options.registry || require('prom-client').register
  const label = options.label || 'cache'
  // Every metric of one scrape reads the same parse: prom-client asks them all in one turn.
  let scrape = null
  const read = () => {
    if (!scrape) {
      scrape = new Map()
      for (const [name, cache] of list) {
        for (const f of parse(cache.prometheus())) {
          let merged = scrape.get(f.name)
          if (!merged) scrape.set(f.name, (merged = { ...f, samples: [] }))
          for (const s of f.samples) {
            merged.samples.push(name === null ? s : { ...s, labels: { ...s.labels, [label]: name } })
          }
        }
      }
      queueMicrotask(() => {
        scrape = null
      })
    }
    return scrape
  }
  const names = []
  for (const f of read().values()) {
    const family = f.name
    registry.registerMetric({
      name: family,
      help: f.help,
      type: f.type,
      aggregator: 'sum',
      reset() {},
      get() {
        const now = read().get(family) || { help: f.help, type: f.type, samples: [] }
        return {
          // prom-client renames a counter for OpenMetrics (without `_total`) on this object.
          name: this.name,
          help: now.help,
          type: now.type,
          aggregator: 'sum',
          // A counter's samples keep the family's name, so prom-client's OpenMetrics output
          // adds `_total` to the name it strips; a histogram's name their series.
          values: now.samples.map((s) =>
            s.name === family ? { labels: s.labels, value: s.value } : { metricName: s.name, labels: s.labels, value: s.value }
          ),
        }
      },
    })
    names.push(family)
  }
  return names
}

module.exports = { register }
