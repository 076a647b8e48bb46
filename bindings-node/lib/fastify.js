'use strict'
// Fastify: a plugin that answers routes through `getOrLoad` and serves the metrics.
//
//   await app.register(require('herdless/fastify'), { cache, metricsPath: '/metrics' })
//   app.get('/products/:id', {
//     config: { herdless: { key: (request) => `products:v1:#${request.params.id}` } },
//   }, async (request) => db.product(request.params.id))
//
// A route with `config.herdless` runs its handler inside `cache.getOrLoad(key(request))`:
// concurrent requests for one key run it once, and with `grace` a stale body is sent at once
// while one refresh runs. The handler returns the body; returning `ABSENT` caches "not found"
// for `negativeTtl` and answers 404. Only the leading request's handler runs, so it must not
// use `reply` to send. The cache is `app.herdless` in every route.

function herdless(fastify, options, done) {
  const { cache, metricsPath } = options || {}
  if (!cache || typeof cache.getOrLoad !== 'function') {
    done(new TypeError('herdless/fastify: options.cache must be a herdless Cache'))
    return
  }
  fastify.decorate('herdless', cache)
  fastify.addHook('onRoute', (route) => {
    const conf = route.config && route.config.herdless
    if (!conf) return
    if (typeof conf.key !== 'function') {
      throw new TypeError(`herdless/fastify: config.herdless.key of ${route.url} must be a function of the request`)
    }
    const handler = route.handler
    const loadOptions = conf.ttl === undefined ? undefined : { ttl: conf.ttl }
    route.handler = async function herdlessRoute(request, reply) {
      const body = await cache.getOrLoad(conf.key(request), () => handler.call(this, request, reply), loadOptions)
      if (body === undefined) {
        reply.code(404)
        return { statusCode: 404, error: 'Not Found', message: 'Not Found' }
      }
      return body
    }
  })
  if (metricsPath) {
    fastify.get(metricsPath, async (_request, reply) => {
      reply.type('text/plain; version=0.0.4; charset=utf-8')
      return cache.prometheus()
    })
  }
  done()
}

// What fastify-plugin sets: the decorator and the hook reach the routes of the app that
// registers the plugin, not only those of its own encapsulated context.
herdless[Symbol.for('skip-override')] = true
herdless[Symbol.for('fastify.display-name')] = 'herdless'
herdless[Symbol.for('plugin-meta')] = { name: 'herdless', fastify: '>=4' }

module.exports = herdless
module.exports.default = herdless
module.exports.herdless = herdless
