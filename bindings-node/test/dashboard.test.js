'use strict'
// The Grafana dashboard (docs/grafana/herdless.json) queries only metrics the Node exporters
// really emit: prometheus() and the prom-client registration, scraped from a cache that
// served traffic (the Rust and Python suites check theirs the same way).
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const { Cache } = require('..')

function queries(node) {
  if (Array.isArray(node)) return node.flatMap(queries)
  if (node && typeof node === 'object') {
    return Object.entries(node).flatMap(([k, v]) =>
      (k === 'expr' || k === 'definition') && typeof v === 'string' ? [v] : queries(v)
    )
  }
  return []
}

function emitted(scrape) {
  const names = new Set()
  for (const line of scrape.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line)
    if (type) {
      names.add(type[1])
      if (type[2] === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(type[1] + s)
    } else if (line && !line.startsWith('#')) {
      names.add(line.split(/[{ ]/)[0])
    }
  }
  return names
}

test('every dashboard query names a metric the Node exporters emit', async () => {
  const dashboard = JSON.parse(fs.readFileSync(path.join(__dirname, '../../docs/grafana/herdless.json'), 'utf8'))
  const exprs = queries(dashboard)
  assert.ok(exprs.length >= 20)
  const cache = new Cache({ ttl: 60_000, redis: 'memory://dashboard' })
  for (let i = 0; i < 3; i++) await cache.getOrLoad('users:v1:#1', async () => 'Ada')
  const client = require('prom-client')
  const registry = new client.Registry()
  require('herdless/prometheus').register(cache, { registry })
  for (const scrape of [cache.prometheus(), await registry.metrics()]) {
    const names = emitted(scrape)
    for (const expr of exprs) {
      const used = expr.match(/\bherdless_[a-z0-9_]+/g) || []
      assert.ok(used.length, `a query names no herdless metric: ${expr}`)
      const missing = used.filter((n) => !names.has(n))
      assert.deepEqual(missing, [], `not emitted by Node (${expr})`)
    }
  }
})
