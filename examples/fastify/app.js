'use strict'
// A Fastify catalog whose product pages are cached by herdless, with its metrics at /metrics
// and OpenTelemetry metrics and load spans through the application's providers. Run it:
// `node app.js` (port 3000).
const Fastify = require('fastify')
const { Cache, ABSENT } = require('herdless')
const { instrument } = require('herdless/opentelemetry')

/** The app, over `origin` (the slow database: `origin.product(id)`). */
async function buildApp(origin) {
  const cache = new Cache({ ttl: 60_000, grace: 30_000 })
  instrument(cache) // nothing is emitted until the application installs an OpenTelemetry SDK
  const app = Fastify()
  await app.register(require('herdless/fastify'), { cache, metricsPath: '/metrics' })
  app.get(
    '/products/:id',
    { config: { herdless: { key: (request) => `products:v1:#${Number(request.params.id)}` } } },
    async (request) => (await origin.product(Number(request.params.id))) ?? ABSENT
  )
  return app
}

module.exports = { buildApp }

if (require.main === module) {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
  const origin = { product: async (id) => (await sleep(200), id === 404 ? null : { id, name: `Product ${id}` }) }
  buildApp(origin).then((app) => app.listen({ port: 3000 }))
}
