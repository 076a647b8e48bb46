'use strict'
// Express: a route whose response body is one `getOrLoad`, and a `/metrics` handler.
//
//   const { cached, metrics } = require('herdless/express')
//   app.get('/products/:id', cached(cache, { key: (req) => `products:v1:#${req.params.id}` },
//     async (req) => db.product(req.params.id)))
//   app.get('/search', cached(cache, { vary: (req) => ({ user: req.user.id }) }, search))
//
// Without `key`, the key is `requestKey(req)`: one namespace (`http`) for every route, the
// method and path, the query in canonical order, plus `vary(req)` (say what else the answer
// depends on: the user, a header). Keys from request input never become namespaces.
//   app.get('/metrics', metrics(cache))
//
// Concurrent requests for one key run the handler once (single-flight); with `grace` a stale
// body is sent at once while one refresh runs. The handler returns the body (sent with
// `res.json`); returning `ABSENT` caches "not found" for `negativeTtl` and answers 404. Only
// the leading request's handler runs, so it must not write to `res` itself. Every error (the
// key function's, the handler's, a body JSON cannot encode, the send's) goes to `next(err)`:
// a body that cannot be sent fails its load, so it is never cached.

const { keyOf, privateReply } = require('./request-key.js')

/**
 * The default key of a request: namespace `options.namespace` (default `http`), the method
 * and path, the query in canonical order, and `options.vary` (what else the answer depends
 * on, e.g. `{ user: req.user.id }`) as named parts. See lib/request-key.js.
 */
function requestKey(req, options = {}) {
  return keyOf(req.method, req.originalUrl || req.url, options)
}

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
  options = options || {}
  if (options.key !== undefined && typeof options.key !== 'function') {
    throw new TypeError('herdless/express: options.key of cached() must be a function of the request')
  }
  if (options.vary !== undefined && typeof options.vary !== 'function') {
    throw new TypeError('herdless/express: options.vary of cached() must be a function of the request')
  }
  const keyFor =
    options.key ||
    ((req) => requestKey(req, { namespace: options.namespace, vary: options.vary && options.vary(req) }))
  if (typeof handler !== 'function') {
    throw new TypeError('herdless/express: cached() needs a handler, a function of the request')
  }
  const loadOptions = options.ttl === undefined ? undefined : { ttl: options.ttl }
  return function herdlessCached(req, res, next) {
    let key
    try {
      key = keyFor(req)
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

module.exports = { cached, metrics, privateReply, requestKey }
