'use strict'
// An Express catalog whose product pages are cached by herdless, with herdless's metrics on
// the app's prom-client registry. Run it: `node app.js` (port 3000).
const express = require('express')
const client = require('prom-client')
const { Cache, ABSENT } = require('herdless')
const { cached } = require('herdless/express')

/** The app, over `origin` (the slow database: `origin.product(id)`). */
function createApp(origin) {
  // Fresh 60 s, then served stale for 30 s while one refresh runs.
  const cache = new Cache({ ttl: 60_000, grace: 30_000 })
  const registry = new client.Registry()
  const requests = new client.Counter({ name: 'shop_requests_total', help: 'Requests.', registers: [registry] })
  require('herdless/prometheus').register(cache, { registry })

  const app = express()
  app.use((_req, _res, next) => {
    requests.inc()
    next()
  })
  // One origin call however many requests miss at once; ABSENT caches "no such product"
  // (a 404) for negativeTtl.
  app.get(
    '/products/:id',
    cached(cache, { key: (req) => `products:v1:#${Number(req.params.id)}` }, async (req) =>
      (await origin.product(Number(req.params.id))) ?? ABSENT
    )
  )
  app.get('/metrics', async (_req, res) => {
    res.set('Content-Type', registry.contentType)
    res.send(await registry.metrics())
  })
  return app
}

module.exports = { createApp }

if (require.main === module) {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
  const origin = { product: async (id) => (await sleep(200), id === 404 ? null : { id, name: `Product ${id}` }) }
  createApp(origin).listen(3000, () => console.log('http://localhost:3000/products/7'))
}
