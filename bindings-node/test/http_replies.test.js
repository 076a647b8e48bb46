'use strict'
// What the web integrations cache and send, over real HTTP (issue 33, items 13 and 14): an
// error anywhere in the Express middleware reaches next(err) and the process lives; the
// Fastify plugin caches the status and the handler's headers with the body, stores only 2xx
// replies, never stores or shares a Set-Cookie, and refuses a handler that sends by itself.
const test = require('node:test')
const assert = require('node:assert/strict')

const { Cache } = require('..')
const { listen: listenExpress } = require('./helpers.js')

async function listenFastify(app) {
  await app.listen({ port: 0, host: '127.0.0.1' })
  return `http://127.0.0.1:${app.server.address().port}`
}

test('express: a body res.json cannot encode answers 500 through next(err) and is not cached', async () => {
  const express = require('express')
  const { cached } = require('herdless/express')
  const cache = new Cache({ ttl: 60_000 })
  let calls = 0
  const app = express()
  app.get(
    '/big',
    cached(cache, { key: () => 'big:1' }, async () => {
      calls++
      return { n: 10n ** 20n }
    })
  )
  app.get('/badkey', cached(cache, { key: () => { throw new Error('no key') } }, async () => 1))
  const errors = []
  app.use((err, _req, res, _next) => {
    errors.push(err.message)
    res.status(500).json({ error: 'internal' })
  })
  const { server, url } = await listenExpress(app)
  try {
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${url}/big`)
      assert.equal(r.status, 500)
      assert.deepEqual(await r.json(), { error: 'internal' })
    }
    // Not cached: each request runs the handler again, as without herdless.
    assert.equal(calls, 3)
    assert.equal(cache.get('big:1'), undefined)
    assert.equal((await fetch(`${url}/badkey`)).status, 500)
    assert.equal(errors.length, 4)
    assert.match(errors[0], /BigInt/)
    assert.equal(errors[3], 'no key')
  } finally {
    server.close()
  }
})

test('express: an error thrown by the send itself reaches next(err)', async () => {
  const express = require('express')
  const { cached } = require('herdless/express')
  const cache = new Cache({ ttl: 60_000 })
  const app = express()
  // A replacer that throws only when res.json calls it (the load's own check passes it).
  let armed = false
  app.set('json replacer', (k, v) => {
    if (armed && k === 'x') throw new Error('replacer failed')
    return v
  })
  app.get('/x', cached(cache, { key: () => 'x:1' }, async () => ({ x: 1 })))
  app.use((err, _req, res, _next) => res.status(500).json({ error: err.message }))
  const { server, url } = await listenExpress(app)
  try {
    assert.equal((await fetch(`${url}/x`)).status, 200)
    armed = true
    const r = await fetch(`${url}/x`)
    armed = false
    assert.equal(r.status, 500)
    assert.equal((await fetch(`${url}/x`)).status, 200)
  } finally {
    server.close()
  }
})

test('fastify: a 503 is answered with its status and not cached; a 2xx is cached with its status and headers', async () => {
  const Fastify = require('fastify')
  const cache = new Cache({ ttl: 60_000 })
  const app = Fastify()
  await app.register(require('herdless/fastify'), { cache })
  let down = true
  let calls = 0
  app.get('/status', { config: { herdless: { key: () => 'status:1' } } }, async (_request, reply) => {
    calls++
    if (down) {
      reply.code(503)
      return { error: 'origin down' }
    }
    reply.code(201).header('x-origin', 'db').type('application/json; charset=utf-8')
    return { ok: true }
  })
  const url = await listenFastify(app)
  try {
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${url}/status`)
      assert.equal(r.status, 503)
      assert.deepEqual(await r.json(), { error: 'origin down' })
    }
    assert.equal(calls, 3, 'a 503 is never replayed from the cache')
    down = false
    const first = await fetch(`${url}/status`)
    assert.equal(first.status, 201)
    const again = await fetch(`${url}/status`)
    assert.equal(again.status, 201)
    assert.equal(again.headers.get('x-origin'), 'db')
    assert.deepEqual(await again.json(), { ok: true })
    assert.equal(calls, 4, 'the 201 is cached')
  } finally {
    await app.close()
  }
})

test('fastify: cacheStatus chooses what is stored', async () => {
  const Fastify = require('fastify')
  const cache = new Cache({ ttl: 60_000 })
  const app = Fastify()
  await app.register(require('herdless/fastify'), { cache })
  let calls = 0
  const cacheStatus = (s) => s === 200 || s === 410
  app.get('/gone', { config: { herdless: { key: () => 'gone:1', cacheStatus } } }, async (_q, reply) => {
    calls++
    reply.code(410)
    return { gone: true }
  })
  const url = await listenFastify(app)
  try {
    assert.equal((await fetch(`${url}/gone`)).status, 410)
    assert.equal((await fetch(`${url}/gone`)).status, 410)
    assert.equal(calls, 1)
  } finally {
    await app.close()
  }
  const bad = Fastify()
  await bad.register(require('herdless/fastify'), { cache })
  assert.throws(
    () => bad.get('/x', { config: { herdless: { key: () => 'x', cacheStatus: 200 } } }, async () => 1),
    /cacheStatus/
  )
})

test('fastify: a reply with Set-Cookie is never stored nor does its cookie reach another request', async () => {
  const Fastify = require('fastify')
  const cache = new Cache({ ttl: 60_000 })
  const app = Fastify()
  await app.register(require('herdless/fastify'), { cache })
  let calls = 0
  app.get('/public', { config: { herdless: { key: () => 'public:1' } } }, async (request, reply) => {
    calls++
    await new Promise((r) => setTimeout(r, 100))
    reply.header('set-cookie', `sessionid=${request.headers['x-user']}`)
    reply.header('x-page', 'public')
    return { page: 'public' }
  })
  const url = await listenFastify(app)
  try {
    // Alice leads; Bob's request arrives while her handler runs and waits for it.
    const alice = fetch(`${url}/public`, { headers: { 'x-user': 'alice' } })
    await new Promise((r) => setTimeout(r, 30))
    const bob = fetch(`${url}/public`, { headers: { 'x-user': 'bob' } })
    const [a, b] = await Promise.all([alice, bob])
    assert.equal(a.headers.get('set-cookie'), 'sessionid=alice')
    assert.equal(b.status, 200)
    assert.equal(b.headers.get('set-cookie'), null, "alice's cookie never reaches bob")
    assert.equal(b.headers.get('x-page'), 'public')
    assert.deepEqual(await b.json(), { page: 'public' })
    assert.equal(calls, 1, 'bob waited for the one handler call')
    const carol = await fetch(`${url}/public`, { headers: { 'x-user': 'carol' } })
    assert.equal(carol.headers.get('set-cookie'), 'sessionid=carol')
    assert.equal(calls, 2, 'a reply with a cookie is not stored')
    assert.equal(cache.get('public:1'), undefined)
  } finally {
    await app.close()
  }
})

test('fastify: a handler that sends by itself is refused, nothing is cached', async () => {
  const Fastify = require('fastify')
  const cache = new Cache({ ttl: 60_000 })
  const app = Fastify({ logger: false })
  await app.register(require('herdless/fastify'), { cache })
  let calls = 0
  app.get('/self', { config: { herdless: { key: () => 'self:1' } } }, async (_request, reply) => {
    calls++
    return reply.send({ sent: 'by itself' })
  })
  const url = await listenFastify(app)
  try {
    const first = await fetch(`${url}/self`)
    assert.equal(first.status, 200)
    assert.deepEqual(await first.json(), { sent: 'by itself' })
    const second = await fetch(`${url}/self`)
    assert.notEqual(second.status, 404, 'never a cached undefined served as 404')
    assert.equal(calls, 2, 'nothing was cached')
    assert.equal(cache.get('self:1'), undefined)
  } finally {
    await app.close()
  }
})

test('fastify: a plain 200 body is stored as the body itself; grace refreshes keep the headers', async () => {
  const Fastify = require('fastify')
  const cache = new Cache({ ttl: 100, grace: 60_000 })
  const app = Fastify()
  await app.register(require('herdless/fastify'), { cache })
  let calls = 0
  app.get('/plain', { config: { herdless: { key: () => 'plain:1' } } }, async () => ({ n: ++calls }))
  app.get('/typed', { config: { herdless: { key: () => 'typed:1' } } }, async (_q, reply) => {
    reply.header('x-version', 'v1')
    return { typed: ++calls }
  })
  const url = await listenFastify(app)
  try {
    assert.deepEqual(await (await fetch(`${url}/plain`)).json(), { n: 1 })
    assert.deepEqual(cache.get('plain:1'), { n: 1 })
    await fetch(`${url}/typed`)
    await new Promise((r) => setTimeout(r, 150))
    const stale = await fetch(`${url}/typed`) // stale: answered at once, one refresh runs
    assert.equal(stale.headers.get('x-version'), 'v1')
    await new Promise((r) => setTimeout(r, 50))
    const fresh = await fetch(`${url}/typed`)
    assert.equal(fresh.headers.get('x-version'), 'v1')
    assert.equal((await fresh.json()).typed, 3, 'the refresh ran and was stored')
  } finally {
    await app.close()
  }
})

test('express: the default key keeps request input out of namespaces and metric labels', async () => {
  const express = require('express')
  const { cached, metrics, requestKey } = require('herdless/express')
  const cache = new Cache({ ttl: 60_000 })
  let calls = 0
  const app = express()
  app.get('/search', cached(cache, { vary: (req) => ({ user: String(req.headers['x-user'] || 'anon') }) }, async (req) => {
    calls++
    return { q: req.query.q || null }
  }))
  app.get('/metrics', metrics(cache))
  const { server, url } = await listenExpress(app)
  try {
    for (let i = 0; i < 300; i++) {
      assert.equal((await fetch(`${url}/search?q=${i}&reset_token=SECRET-abc${i}`)).status, 200)
    }
    assert.equal(calls, 300)
    // The query in canonical order: one entry for both spellings.
    await fetch(`${url}/search?b=2&a=1`)
    await fetch(`${url}/search?a=1&b=2`)
    assert.equal(calls, 301)
    // vary: another user, another entry.
    await fetch(`${url}/search?a=1&b=2`, { headers: { 'x-user': 'bob' } })
    assert.equal(calls, 302)
    const text = await (await fetch(`${url}/metrics`)).text()
    assert.doesNotMatch(text, /SECRET/)
    const labels = new Set([...text.matchAll(/namespace="([^"]*)"/g)].map((m) => m[1]))
    assert.deepEqual([...labels], ['http'])
    assert.deepEqual(cache.metrics().namespaces.map((n) => n.namespace), ['http'])
  } finally {
    server.close()
  }
  assert.equal(
    requestKey({ method: 'HEAD', originalUrl: '/a?y=2&x=1', url: '/a' }),
    requestKey({ method: 'GET', originalUrl: '/a?x=1&y=2', url: '/a' })
  )
})

test('fastify: the default key is the method, the path and the canonical query under namespace http', async () => {
  const Fastify = require('fastify')
  const cache = new Cache({ ttl: 60_000 })
  const app = Fastify()
  await app.register(require('herdless/fastify'), { cache, metricsPath: '/metrics' })
  let calls = 0
  app.get('/items', { config: { herdless: {} } }, async (request) => ({ n: ++calls, q: request.query }))
  const url = await listenFastify(app)
  try {
    await fetch(`${url}/items?token=SECRET-1&z=1`)
    await fetch(`${url}/items?z=1&token=SECRET-1`)
    assert.equal(calls, 1)
    const text = await (await fetch(`${url}/metrics`)).text()
    assert.doesNotMatch(text, /SECRET/)
    assert.match(text, /herdless_loads_total\{namespace="http"\} 1/)
  } finally {
    await app.close()
  }
})
