// The NestJS example over real HTTP: two processes of the app on two ports share one Redis
// (a private redis-server; none on PATH skips, with the reason, except under CI=true). A
// herd of 200 concurrent requests on a cold product, split across both, costs ONE call of
// the slow origin (a counting HTTP server in this process). Replies that are one client's
// (Set-Cookie, Cache-Control: private) are never served to others; request input cannot grow
// the namespaces.
import test from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { createServer } from 'node:http'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'

const haveRedis = spawnSync('redis-server', ['--version']).status === 0
const ci = process.env.CI === 'true'
const skip = !haveRedis && !ci && 'redis-server is not on PATH'
const APP = fileURLToPath(new URL('./app.mjs', import.meta.url))

function within(ms, promise, what) {
  let timer
  return Promise.race([
    promise,
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms) }),
  ]).finally(() => clearTimeout(timer))
}

// A process's first line matching `re` on stdout.
function line(child, re, what) {
  return within(30_000, new Promise((resolve, reject) => {
    let out = ''
    child.on('exit', (code) => reject(new Error(`${what} exited with ${code}: ${out}`)))
    child.stdout.on('data', (d) => {
      out += d
      const m = re.exec(out)
      if (m) resolve(m)
    })
  }), what)
}

test('two app processes over one Redis: a herd of 200 costs one origin call; private replies stay private', { skip, timeout: 120_000 }, async (t) => {
  assert.ok(haveRedis, 'redis-server is not installed, and CI=true requires this test to run')
  const children = []
  // The origin: counted, ~200 ms a call.
  const calls = new Map()
  const origin = createServer((req, res) => {
    const path = req.url.split('?')[0]
    calls.set(path, (calls.get(path) ?? 0) + 1)
    setTimeout(() => {
      const m = /^\/products\/(\d+)$/.exec(path)
      if (m && m[1] === '404') {
        res.writeHead(404).end()
        return
      }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify(m ? { id: Number(m[1]), name: `Product ${m[1]}` } : { path: req.url, n: calls.get(path) }))
    }, 200)
  })
  origin.listen(0, '127.0.0.1')
  await once(origin, 'listening')
  try {
    const redisPort = await new Promise((resolve, reject) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address()
        probe.close(() => resolve(port))
      }).on('error', reject)
    })
    const redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'inherit'] })
    children.push(redis)
    await line(redis, /Ready to accept connections/, 'redis-server')
    const env = { ...process.env, PORT: '0', REDIS_URL: `redis://127.0.0.1:${redisPort}`, ORIGIN_URL: `http://127.0.0.1:${origin.address().port}` }
    const urls = []
    for (let i = 0; i < 2; i++) {
      const app = spawn(process.execPath, [APP], { env, stdio: ['ignore', 'pipe', 'inherit'] })
      children.push(app)
      urls.push((await line(app, /listening on (http:\/\/\S+)/, `app process ${i + 1}`))[1].replace('[::1]', '127.0.0.1'))
    }

    // The herd: 200 concurrent requests on a cold product, split across the two processes.
    const herd = await Promise.all(Array.from({ length: 200 }, (_, i) => fetch(`${urls[i % 2]}/products/7`)))
    assert.deepEqual([...new Set(herd.map((r) => r.status))], [200])
    assert.deepEqual(await herd[0].json(), { id: 7, name: 'Product 7' })
    assert.deepEqual(await herd[199].json(), { id: 7, name: 'Product 7' })
    assert.equal(calls.get('/products/7'), 1, 'the whole herd cost one origin call')
    t.diagnostic(`herd: 200 requests over 2 processes, ${calls.get('/products/7')} origin call`)

    // "No such product" is cached too: 40 requests, one origin call.
    const missing = await Promise.all(Array.from({ length: 40 }, (_, i) => fetch(`${urls[i % 2]}/products/404`)))
    assert.deepEqual([...new Set(missing.map((r) => r.status))], [404])
    assert.equal(calls.get('/products/404'), 1)

    // CacheInterceptor (SafeCacheInterceptor): the query in canonical order is one entry, in
    // both processes (the entry is in Redis).
    const first = await (await fetch(`${urls[0]}/pages/catalog?b=2&a=1`)).json()
    const again = await fetch(`${urls[1]}/pages/catalog?a=1&b=2`)
    assert.equal(again.headers.get('x-cache'), 'HIT')
    assert.deepEqual(await again.json(), first)
    assert.equal(calls.get('/catalog'), 1)

    // A reply with Set-Cookie is never stored: each client gets its own call and cookie.
    const me1 = await fetch(`${urls[0]}/pages/me`)
    const me2 = await fetch(`${urls[0]}/pages/me`)
    assert.ok(me1.headers.get('set-cookie') && me2.headers.get('set-cookie'))
    assert.notEqual((await me1.json()).session, (await me2.json()).session)
    assert.equal(calls.get('/me'), 2)
    // Cache-Control: private (the route's @Header) is never stored either.
    const a1 = await fetch(`${urls[0]}/pages/account`)
    const a2 = await fetch(`${urls[1]}/pages/account`)
    assert.match(a1.headers.get('cache-control'), /private/)
    assert.equal(a2.headers.get('x-cache'), 'MISS')
    assert.equal(calls.get('/account'), 2)

    // Request input: a long query, odd paths and 50 distinct queries answer, and the keys stay
    // in the app's one namespace (no namespace, hence no metric label, per request).
    const long = await fetch(`${urls[0]}/pages/catalog?q=${'x'.repeat(4_000)}`)
    assert.equal(long.status, 200)
    for (const path of ['/products/-1', '/products/1e400', '/products/%00', '/pages/catalog?%ZZ=1']) {
      const r = await fetch(urls[1] + path)
      assert.ok(r.status < 500, `${path}: ${r.status}`)
    }
    await Promise.all(Array.from({ length: 50 }, (_, i) => fetch(`${urls[i % 2]}/pages/catalog?page=${i}&ns=${i}:x`)))
    for (const url of urls) {
      const metrics = await (await fetch(`${url}/metrics`)).text()
      const namespaces = new Set([...metrics.matchAll(/namespace="([^"]*)"/g)].map((m) => m[1]))
      assert.deepEqual([...namespaces], ['shop'])
    }
    // Both processes still serve.
    for (const url of urls) assert.equal((await fetch(`${url}/products/7`)).status, 200)
    assert.equal(calls.get('/products/7'), 1)
  } finally {
    for (const c of children.reverse()) c.kill()
    origin.close()
  }
})
