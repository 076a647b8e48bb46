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
// while one refresh runs. The handler returns the body (it may set `reply.code(...)` and
// headers first); returning `ABSENT` caches "not found" for `negativeTtl` and answers 404.
// What is cached is the reply as the handler made it: its status, the headers it set (never
// `set-cookie`) and the body. Only a status `cacheStatus` accepts (2xx by default) is stored,
// and a reply carrying `set-cookie` or `cache-control: private | no-store` is never stored:
// the requests that waited for that one handler call get it (without the cookie), the next
// request runs the handler again. A 200 body with no headers of its own is stored as the body
// itself, so `cache.get(key)` reads it. Only the leading request's handler runs, so it must
// not send with `reply`: one that does is refused (HERDLESS_REPLY_SENT), nothing is cached.
// The cache is `app.herdless` in every route. Without `key`, the key is
// `requestKey(request)`: namespace `http`, the method and path, the query in canonical
// order, plus `vary(request)` (the user, a header: what else the answer depends on).

// The marker of a stored reply that is more than a 200 body (a status or headers).
const REPLY = '__herdlessReply'
const ABSENT = Symbol.for('herdless.absent')

function is2xx(status) {
  return status >= 200 && status < 300
}

// The headers the handler set or changed (the ones the cached reply carries), without
// set-cookie: a cookie belongs to one client.
function headersSetBy(before, after) {
  const own = {}
  for (const [name, value] of Object.entries(after)) {
    if (name === 'set-cookie' || before[name] === value) continue
    own[name] = value
  }
  return own
}

const { keyOf, privateReply } = require('./request-key.js')

/**
 * The default key of a request: namespace `options.namespace` (default `http`), the method
 * and path, the query in canonical order, and `options.vary` as named parts.
 */
function requestKey(request, options = {}) {
  return keyOf(request.method, request.url, options)
}

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
    if (conf.key !== undefined && typeof conf.key !== 'function') {
      throw new TypeError(`herdless/fastify: config.herdless.key of ${route.url} must be a function of the request`)
    }
    if (conf.vary !== undefined && typeof conf.vary !== 'function') {
      throw new TypeError(`herdless/fastify: config.herdless.vary of ${route.url} must be a function of the request`)
    }
    const keyFor =
      conf.key ||
      ((request) => requestKey(request, { namespace: conf.namespace, vary: conf.vary && conf.vary(request) }))
    const handler = route.handler
    const loadOptions = conf.ttl === undefined ? undefined : { ttl: conf.ttl }
    const cacheable = conf.cacheStatus === undefined ? is2xx : conf.cacheStatus
    if (typeof cacheable !== 'function') {
      throw new TypeError(`herdless/fastify: config.herdless.cacheStatus of ${route.url} must be a function of the status code`)
    }
    route.handler = async function herdlessRoute(request, reply) {
      const key = keyFor(request)
      // What the hooks set before the handler: every request gets those anyway. Taken here,
      // not in the loader, so a background refresh (run after this reply was sent with the
      // cached headers) still tells the handler's headers from the hooks'.
      const before = { ...reply.getHeaders() }
      const load = async (ctx) => {
        const sentBefore = reply.sent
        const body = await handler.call(this, request, reply)
        if (body === reply || (!sentBefore && reply.sent)) {
          ctx.noCache()
          const err = new Error(
            `herdless/fastify: the handler of ${route.url} sent the reply itself; a cached route returns its body`
          )
          err.code = 'HERDLESS_REPLY_SENT'
          throw err
        }
        if (body === undefined || body === ABSENT) return body // cached as not found
        const status = reply.statusCode
        const after = reply.getHeaders()
        if (!cacheable(status) || privateReply(after)) ctx.noCache()
        const headers = headersSetBy(before, after)
        const plain = status === 200 && Object.keys(headers).length === 0
        if (plain && !(body !== null && typeof body === 'object' && REPLY in body)) return body
        return { [REPLY]: 1, status, headers, body }
      }
      let stored
      try {
        stored = await cache.getOrLoad(key, load, loadOptions)
      } catch (err) {
        // The handler that sent by itself: its own reply is out; the requests that waited
        // for it get the error.
        if (err && err.code === 'HERDLESS_REPLY_SENT' && reply.sent) {
          request.log.error(err)
          return reply
        }
        throw err
      }
      if (stored === undefined) {
        reply.code(404)
        return { statusCode: 404, error: 'Not Found', message: 'Not Found' }
      }
      if (stored !== null && typeof stored === 'object' && stored[REPLY] === 1) {
        reply.code(stored.status)
        reply.headers(stored.headers)
        return stored.body
      }
      return stored
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
module.exports.requestKey = requestKey
