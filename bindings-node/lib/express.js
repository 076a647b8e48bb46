'use strict'
// Express: a route whose response body is one `getOrLoad`, and a `/metrics` handler.
//
//   const { cached, metrics } = require('herdless/express')
//   app.get('/products/:id', cached(cache, { key: (req) => `products:v1:#${req.params.id}` },
//     async (req) => db.product(req.params.id)))
//   app.get('/metrics', metrics(cache))
//
// Concurrent requests for one key run the handler once (single-flight); with `grace` a stale
// body is sent at once while one refresh runs. The handler returns the body (sent with
// `res.json`); returning `ABSENT` caches "not found" for `negativeTtl` and answers 404. Only
// the leading request's handler runs, so it must not write to `res` itself. Every error (the
// key function's, the handler's, a body JSON cannot encode, the send's) goes to `next(err)`:
// a body that cannot be sent fails its load, so it is never cached.

function checkCache(cache) {
  if (!cache || typeof cache.getOrLoad !== 'function') {
    throw new TypeError('herdless/express: the first argument must be a herdless Cache')
  }
}

/**
 * An Express handler answering `handler(req)`'s body through `cache.getOrLoad` under
 * `options.key(req)`; `options.ttl` (ms) replaces the cache's TTL for these entries.
 */
function cached(cache, options, handler) {
  checkCache(cache)
  if (!options || typeof options.key !== 'function') {
    throw new TypeError('herdless/express: cached() needs options.key, a function of the request')
  }
  if (typeof handler !== 'function') {
    throw new TypeError('herdless/express: cached() needs a handler, a function of the request')
  }
  const loadOptions = options.ttl === undefined ? undefined : { ttl: options.ttl }
  return function herdlessCached(req, res, next) {
    let key
    try {
      key = options.key(req)
    } catch (e) {
      next(e)
      return
    }
    const load = async () => {
      const body = await handler(req)
      // Encoded once here, with the app's own settings, so a body res.json would throw on
      // (a BigInt, a cycle) rejects the load instead of being cached and failing every hit.
      if (body !== undefined) JSON.stringify(body, req.app && req.app.get('json replacer'))
      return body
    }
    cache
      .getOrLoad(key, load, loadOptions)
      .then((body) => (body === undefined ? res.sendStatus(404) : res.json(body)))
      .catch(next)
  }
}

/** An Express handler answering `cache.prometheus()` (several caches: concatenated). */
function metrics(...caches) {
  caches.forEach(checkCache)
  return function herdlessMetrics(_req, res) {
    res.set('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
    res.send(caches.map((c) => c.prometheus()).join(''))
  }
}

module.exports = { cached, metrics }
