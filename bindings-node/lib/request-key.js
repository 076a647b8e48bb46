'use strict'
// The default cache key of an HTTP request, shared by herdless/express and herdless/fastify:
// one namespace for every route (default `http`), so keys made from request input never
// become namespaces (each its own metric label and epoch record); the entity is the method
// and the path, the id the query in canonical order (sorted by name, then value, so
// `?b=2&a=1` and `?a=1&b=2` share an entry). A query over 256 bytes is kept as its SHA-256
// (the key stays within the engine's length limit). What else the answer depends on (the
// user, a header) goes in `vary`: `requestKey(req, { vary: { user: req.user.id } })`. The
// query's canonical form and which replies may be stored are the engine's rules
// (`herdless_redis::http`), shared with Python's Flask helper and Rust's tower layer.
const { buildKey, httpCanonicalQuery, httpKeeps } = require('..')

/**
 * The cache key of a request from its `method` and `url` (path and query, e.g.
 * `req.originalUrl`); `options.namespace` (default `http`), `options.vary` (named parts
 * the answer also depends on).
 */
function keyOf(method, url, options = {}) {
  const parsed = new URL(url, 'http://request.invalid')
  const query = httpCanonicalQuery(parsed.search.slice(1))
  // HEAD is answered by the GET route: one entry for both.
  const verb = method === 'HEAD' ? 'GET' : method
  const parts = { namespace: options.namespace || 'http', entity: `${verb} ${parsed.pathname}` }
  if (query) parts.id = query
  if (options.vary) parts.params = options.vary
  return buildKey(parts)
}

/**
 * Whether a reply with these `headers` (as Node's `res.getHeaders()`: names in any case, array
 * values for repeated headers) must never be stored for others, as the engine decides it for
 * every language (`httpKeeps`): it sets a cookie, its `cache-control` says `private`,
 * `no-store`, `no-cache` or a zero max-age, or it varies on `*` or on a request header that is
 * not in `vary` (the request headers whose values the key holds; none by default).
 */
function privateReply(headers, vary = []) {
  const pairs = []
  for (const [name, value] of Object.entries(headers || {})) {
    if (value === undefined) continue
    for (const v of Array.isArray(value) ? value : [value]) pairs.push([name, String(v)])
  }
  return !httpKeeps(true, pairs, vary).keep
}

module.exports = { keyOf, privateReply }
