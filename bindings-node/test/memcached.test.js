'use strict'
// The memcached tier (`new Cache({ redis: 'memcached://host:port' })`), against a private
// memcached started for these tests (skipped, with the reason, when memcached is not on
// PATH; failed under CI=true): processes share one load per key, and no process keeps a
// copy another process's write or delete could leave behind.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const { Cache } = require('herdless')
const { sleep, slowLoader, within } = require('./helpers.js')
const { Memcached, haveMemcached } = require('./memcached_support.js')

if (!haveMemcached && process.env.CI === 'true') {
  throw new Error('memcached is not installed, and CI=true requires the memcached tests to run')
}
const skip = haveMemcached ? false : 'memcached is not on PATH'

let server
let url

test.before(async () => {
  if (!haveMemcached) return
  server = await Memcached.start()
  url = server.url
})

test.after(() => {
  if (server) return server.kill()
})

/** Runs `script` in a node process with `env`; its last stdout line, parsed. */
function node(script, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script], { env: { ...process.env, ...env } })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => process.stderr.write(d))
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop())) : reject(new Error(`exit ${code}: ${out}`))
    )
  })
}

test('three processes make one loader call and see a delete at once', { skip, timeout: 60_000 }, async () => {
  const startAt = Date.now() + 1500
  const then = startAt + 2500
  const script = `
    const { Cache } = require(${JSON.stringify(require.resolve('herdless'))})
    const cache = new Cache({ redis: process.env.URL })
    let calls = 0
    const loader = async () => { calls++; await new Promise((r) => setTimeout(r, 300)); return 'loaded' }
    setTimeout(async () => {
      const rs = await Promise.all(Array.from({ length: 200 }, () => cache.getOrLoad('users:v1:42', loader)))
      setTimeout(async () => {
        const after = await cache.read('users:v1:42')
        console.log(JSON.stringify({ calls, values: [...new Set(rs)], after: after ?? null }))
      }, ${then} - Date.now())
    }, ${startAt} - Date.now())
  `
  const workers = [node(script, { URL: url }), node(script, { URL: url })]
  const here = new Cache({ redis: url })
  const loader = slowLoader(300, 'loaded')
  await sleep(startAt - Date.now())
  const mine = await within(10_000, Promise.all(Array.from({ length: 200 }, () => here.getOrLoad('users:v1:42', loader))))
  await sleep(then - 1000 - Date.now())
  assert.equal(await here.invalidate('users:v1:42'), true)
  const reports = await within(20_000, Promise.all(workers))
  assert.equal(loader.calls + reports.reduce((n, r) => n + r.calls, 0), 1, JSON.stringify(reports))
  assert.deepEqual([...new Set(mine)], ['loaded'])
  for (const r of reports) {
    assert.deepEqual(r.values, ['loaded'])
    assert.equal(r.after, null, 'a copy outlived the delete')
  }
})

test('no copy is kept: every write is what the next read sees', { skip, timeout: 20_000 }, async () => {
  const a = new Cache({ redis: url })
  const b = new Cache({ redis: url })
  await a.set('k', { id: 1 })
  assert.deepEqual(await b.read('k'), { id: 1 })
  assert.equal(b.get('k'), undefined, 'nothing kept in memory')
  await b.set('k', { id: 2 })
  assert.deepEqual(await a.read('k'), { id: 2 })
  await a.bump('k')
  assert.equal(await b.read('k'), undefined)
  assert.equal(a.metrics().total.hits, 0)
})

test('tags are refused; a stopped server still serves loads, and writes reject', { skip, timeout: 20_000 }, async () => {
  const own = await Memcached.start()
  const c = new Cache({ redis: own.url })
  await assert.rejects(c.set('t', 'v', { tags: ['a'] }), /tags/)
  await own.kill()
  await sleep(100)
  assert.equal(await c.getOrLoad('x', async () => 'local'), 'local')
  await assert.rejects(c.set('x', 'w'), (e) => e.code === 'HERDLESS_BACKEND')
})

test('a memcached address is checked', { skip }, () => {
  for (const bad of ['memcached://', 'memcached://nohostport']) {
    assert.throws(() => new Cache({ redis: bad }), /memcached/)
  }
  assert.throws(() => new Cache({ redis: 'redis://127.0.0.1:6379', memcached: '127.0.0.1:11211' }), /not both/)
  assert.throws(() => new Cache({ memcached: 11211 }), TypeError)
})

test('the memcached option names the same tier', { skip, timeout: 20_000 }, async () => {
  const hostPort = url.slice('memcached://'.length)
  const a = new Cache({ memcached: hostPort })
  const b = new Cache({ memcached: [hostPort] })
  await a.set('opt:k', 'v')
  assert.equal(await b.read('opt:k'), 'v')
  assert.equal(await new Cache({ redis: url }).read('opt:k'), 'v')
})
