'use strict'
// The default cache key of an HTTP request, shared by herdless/express and herdless/fastify:
// one namespace for every route (default `http`), so keys made from request input never
// become namespaces (each its own metric label and epoch record); the entity is the method
// and the path, the id the query in canonical order (sorted by name, then value, so
// `?b=2&a=1` and `?a=1&b=2` share an entry). A query over 256 bytes is kept as its SHA-256
// (the key stays within the engine's length limit). What else the answer depends on (the
// user, a header) goes in `vary`: `requestKey(req, { vary: { user: req.user.id } })`.
const crypto = require('node:crypto')
const { buildKey } = require('..')

const LONG_QUERY = 256

/**
 * The cache key of a request from its `method` and `url` (path and query, e.g.
 * `req.originalUrl`); `options.namespace` (default `http`), `options.vary` (named parts
 * the answer also depends on).
 */
function keyOf(method, url, options = {}) {
  const parsed = new URL(url, 'http://request.invalid')
  const params = [...parsed.searchParams].sort(([a, x], [b, y]) =>
    a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0
  )
  let query = new URLSearchParams(params).toString()
  if (Buffer.byteLength(query) > LONG_QUERY) {
    query = 'sha256-' + crypto.createHash('sha256').update(query).digest('base64url')
  }
  // HEAD is answered by the GET route: one entry for both.
  const verb = method === 'HEAD' ? 'GET' : method
  const parts = { namespace: options.namespace || 'http', entity: `${verb} ${parsed.pathname}` }
  if (query) parts.id = query
  if (options.vary) parts.params = options.vary
  return buildKey(parts)
}

/**
 * Whether a reply with these `headers` (lower-case names, as Node's `res.getHeaders()`) is one
 * client's alone and must never be stored for others: it sets a cookie, or its
 * `cache-control` says `private` or `no-store`.
 */
function privateReply(headers) {
  if (headers['set-cookie'] !== undefined) return true
  const control = String(headers['cache-control'] || '').toLowerCase()
  return /(^|[\s,])(private|no-store)([\s,=]|$)/.test(control)
}

module.exports = { keyOf, privateReply }
