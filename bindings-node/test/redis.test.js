'use strict'
// The Redis tier, against a private redis-server started for these tests (skipped, with the
// reason, when redis-server is not on PATH): several caches and processes share one Redis
// and make one loader call per key between them.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync } = require('node:child_process')
const { Cache, ABSENT } = require('herdless')
const { freePort, sleep, startRedis, within } = require('./helpers.js')

const haveRedis = spawnSync('redis-server', ['--version']).status === 0
const skip = haveRedis ? false : 'redis-server is not on PATH'

let server
let url
let prefixes = 0
/** A fresh key prefix per test, so tests never see each other's keys. */
const prefix = () => `hlt${process.pid}x${++prefixes}`
const options = (extra = {}) => ({ redis: url, redisPrefix: extra.redisPrefix ?? prefix(), ...extra })

test.before(async () => {
  if (!haveRedis) return
  ;({ server, url } = await startRedis())
})

test.after(() => {
  if (server) server.kill('SIGKILL')
})

test('two caches on one Redis: one loader call, the same JSON value', { skip, timeout: 20_000 }, async () => {
  const p = prefix()
  const a = new Cache(options({ redisPrefix: p }))
  const b = new Cache(options({ redisPrefix: p }))
  let calls = 0
  const loader = async () => {
    calls++
    await sleep(200)
    return { id: 7, tags: ['x', 'y'], price: 9.5 }
  }
  const results = await within(
    10_000,
    Promise.all([
      ...Array.from({ length: 100 }, () => a.getOrLoad('shop:v1:item:#7', loader)),
      ...Array.from({ length: 100 }, () => b.getOrLoad('shop:v1:item:#7', loader)),
    ])
  )
  assert.equal(calls, 1)
  for (const r of results) assert.deepEqual(r, { id: 7, tags: ['x', 'y'], price: 9.5 })
  const ra = a.metrics().redis
  const rb = b.metrics().redis
  assert.equal(ra.fleetLocksAcquired + rb.fleetLocksAcquired, 1)
  assert.equal(ra.commits + rb.commits, 1)
  // A third cache reads the shared entry without loading.
  const c = new Cache(options({ redisPrefix: p }))
  assert.deepEqual(await c.getOrLoad('shop:v1:item:#7', loader), { id: 7, tags: ['x', 'y'], price: 9.5 })
  assert.equal(calls, 1)
  assert.equal(c.metrics().redis.l2Hits, 1)
})

test('node processes coalesce on one key across the fleet', { skip, timeout: 60_000 }, async () => {
  const p = prefix()
  const startAt = Date.now() + 1500
  const script = `
    const { Cache } = require(${JSON.stringify(require.resolve('herdless'))})
    const cache = new Cache({ redis: process.env.URL, redisPrefix: process.env.PREFIX })
    let calls = 0
    const loader = async () => { calls++; await new Promise((r) => setTimeout(r, 300)); return 'loaded by ' + process.pid }
    setTimeout(async () => {
      const rs = await Promise.all(Array.from({ length: 300 }, () => cache.getOrLoad('fleet:v1:hot', loader)))
      console.log(JSON.stringify({ calls, values: [...new Set(rs)] }))
    }, ${startAt} - Date.now())
  `
  const runs = Array.from({ length: 3 }, () =>
    new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ['-e', script], { env: { ...process.env, URL: url, PREFIX: p } })
      let out = ''
      child.stdout.on('data', (d) => (out += d))
      child.stderr.on('data', (d) => process.stderr.write(d))
      child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`exit ${code}: ${out}`))))
    })
  )
  const results = await within(30_000, Promise.all(runs), 'three processes')
  assert.equal(results.reduce((n, r) => n + r.calls, 0), 1, JSON.stringify(results))
  const values = new Set(results.flatMap((r) => r.values))
  assert.equal(values.size, 1, `every process answers the same value: ${[...values]}`)
})

// The other languages of the fleet, when this machine has them built (scripts/test.sh
// passes them): the Rust fleet worker binary of herdless-redis and a Python with the herdless
// wheel installed.
const rustWorker = process.env.HERDLESS_FLEET_WORKER
const python = process.env.HERDLESS_PYTHON
const missing = [
  !haveRedis && 'redis-server is not on PATH',
  !rustWorker && 'HERDLESS_FLEET_WORKER (the Rust fleet_worker binary) is not set',
  !python && 'HERDLESS_PYTHON (a Python with the herdless wheel) is not set',
].filter(Boolean)

/** Runs a process and resolves with its stdout (rejects on a non-zero exit). */
function run(cmd, args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env } })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => process.stderr.write(d))
    child.on('error', reject)
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} exit ${code}: ${out}`))))
  })
}

test('a Node, a Python and a Rust process coalesce on one key: one loader call among them', {
  skip: missing.length ? missing.join('; ') : false,
  timeout: 90_000,
}, async () => {
  const p = prefix()
  const key = 'fleet:v1:cross'
  const startAt = Date.now() + 3000
  const env = { URL: url, PREFIX: p, KEY: key, START_AT: String(startAt) }
  const node = `
    const { Cache } = require(${JSON.stringify(require.resolve('herdless'))})
    const cache = new Cache({ redis: process.env.URL, redisPrefix: process.env.PREFIX })
    let calls = 0
    const loader = async () => { calls++; await new Promise((r) => setTimeout(r, 400)); return 'loaded by node ' + process.pid }
    setTimeout(async () => {
      const rs = await Promise.all(Array.from({ length: 200 }, () => cache.getOrLoad(process.env.KEY, loader)))
      console.log(JSON.stringify({ calls, values: [...new Set(rs)] }))
    }, Number(process.env.START_AT) - Date.now())
  `
  const py = `
import json, os, threading, time
import herdless
cache = herdless.Cache(redis=os.environ['URL'], redis_prefix=os.environ['PREFIX'])
calls = 0
lock = threading.Lock()
def loader():
    global calls
    with lock:
        calls += 1
    time.sleep(0.4)
    return 'loaded by python %d' % os.getpid()
results = []
def worker():
    results.append(cache.get_or_load(os.environ['KEY'], loader))
time.sleep(max(0.0, int(os.environ['START_AT']) / 1000 - time.time()))
threads = [threading.Thread(target=worker) for _ in range(50)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({'calls': calls, 'values': sorted(set(results))}))
`
  const [nodeOut, pyOut, rustOut] = await within(
    60_000,
    Promise.all([
      run(process.execPath, ['-e', node], env),
      run(python, ['-c', py], env),
      run(rustWorker, [], {
        HL_URL: url,
        HL_PREFIX: p,
        HL_KEY: key,
        HL_START_AT_MS: String(startAt),
        HL_CALLERS: '200',
        HL_LOADER_MS: '400',
      }),
    ]),
    'the three processes'
  )
  const n = JSON.parse(nodeOut)
  const y = JSON.parse(pyOut)
  const r = /RESULT loader_calls=(\d+) ok=(\d+) err=(\d+)/.exec(rustOut)
  assert.ok(r, rustOut)
  const [rustCalls, rustOk, rustErr] = r.slice(1).map(Number)
  assert.equal(n.calls + y.calls + rustCalls, 1, `node ${n.calls}, python ${y.calls}, rust ${rustCalls}`)
  assert.equal(rustOk, 200)
  assert.equal(rustErr, 0)
  // Every process answers the one value, whichever language loaded it.
  assert.equal(n.values.length, 1)
  assert.deepEqual(y.values, n.values)
  assert.match(n.values[0], /^loaded by (node|python|\d+)/)
})

test('tags across four processes of two languages: each invalidation drops exactly its pages', {
  skip: !haveRedis ? 'redis-server is not on PATH' : !python ? 'HERDLESS_PYTHON (a Python with the herdless wheel) is not set' : false,
  timeout: 90_000,
}, async () => {
  const p = prefix()
  const env = { URL: url, PREFIX: p }
  // A product page carries its product, its seller and its category.
  const pages = {
    'page:a': ['product:1', 'seller:7', 'category:3'],
    'page:b': ['product:2', 'seller:7', 'category:4'],
    'page:c': ['product:3', 'seller:8', 'category:3'],
    'page:d': ['product:4', 'seller:8', 'category:4'],
  }
  const keys = Object.keys(pages)
  // This process (Node) writes them and keeps its own copies in memory.
  const cache = new Cache(options({ redisPrefix: p, ttl: 60_000 }))
  for (const [key, tags] of Object.entries(pages)) await cache.set(key, `html of ${key}`, { tags })
  const inMemory = () => keys.filter((k) => cache.get(k) !== undefined).join()
  assert.equal(inMemory(), 'page:a,page:b,page:c,page:d')
  const settles = (want, what) =>
    within(10_000, (async () => { while (inMemory() !== want) await sleep(10) })(), what)

  // Each other process reads every page (from Redis), invalidates one tag, reads again.
  const py = `
import json, os, herdless
cache = herdless.Cache(ttl=60, redis=os.environ['URL'], redis_prefix=os.environ['PREFIX'])
keys = ['page:a', 'page:b', 'page:c', 'page:d']
before = [k for k in keys if cache.get(k) is not None]
cache.invalidate_tag(os.environ['TAG'])
after = [k for k in keys if cache.get(k) is not None]
print(json.dumps({'before': before, 'after': after}))
`
  const node = `
    const { Cache } = require(${JSON.stringify(require.resolve('herdless'))})
    const cache = new Cache({ ttl: 60_000, redis: process.env.URL, redisPrefix: process.env.PREFIX })
    const keys = ${JSON.stringify(keys)}
    const present = async () => {
      const out = []
      for (const k of keys) if ((await cache.read(k)) !== undefined) out.push(k)
      return out
    }
    ;(async () => {
      const before = await present()
      await cache.invalidateTag(process.env.TAG)
      console.log(JSON.stringify({ before, after: await present() }))
    })()
  `
  const step = async (cmd, args, tag) =>
    JSON.parse(await within(30_000, run(cmd, args, { ...env, TAG: tag }), `${tag} in ${cmd}`))

  assert.deepEqual(await step(python, ['-c', py], 'seller:7'), {
    before: ['page:a', 'page:b', 'page:c', 'page:d'],
    after: ['page:c', 'page:d'],
  })
  await settles('page:c,page:d', 'the seller:7 notification')
  assert.deepEqual(await step(process.execPath, ['-e', node], 'category:3'), {
    before: ['page:c', 'page:d'],
    after: ['page:d'],
  })
  await settles('page:d', 'the category:3 notification')
  assert.deepEqual(await step(python, ['-c', py], 'product:4'), { before: ['page:d'], after: [] })
  await settles('', 'the product:4 notification')
  for (const k of keys) assert.equal(await cache.read(k), undefined, k)
})

test('a set, an invalidate and a bump in one cache reach the other caches', { skip, timeout: 20_000 }, async () => {
  const p = prefix()
  const a = new Cache(options({ redisPrefix: p }))
  const b = new Cache(options({ redisPrefix: p }))
  let calls = 0
  const loader = async () => `v${++calls}`
  assert.equal(await b.getOrLoad('users:v1:u:#1', loader), 'v1')
  assert.equal(b.get('users:v1:u:#1'), 'v1')

  await a.set('users:v1:u:#1', 'written by a')
  // The notification drops b's copy; b then reads Redis, not the loader.
  await within(5_000, (async () => { while (b.get('users:v1:u:#1') === 'v1') await sleep(10) })(), 'the notification')
  assert.equal(await b.getOrLoad('users:v1:u:#1', loader), 'written by a')

  assert.equal(await a.invalidate('users:v1:u:#1'), true)
  await within(5_000, (async () => { while (b.get('users:v1:u:#1') !== undefined) await sleep(10) })(), 'the invalidation')
  assert.equal(await b.getOrLoad('users:v1:u:#1', loader), 'v2')

  const epoch = await a.bump('users')
  assert.ok(epoch >= 1)
  await within(5_000, (async () => { while (b.get('users:v1:u:#1') !== undefined) await sleep(10) })(), 'the bump')
  assert.equal(await b.getOrLoad('users:v1:u:#1', loader), 'v3')
  assert.equal(calls, 3)
})

test('absences are shared; Buffer values pass through the buffer codec', { skip, timeout: 20_000 }, async () => {
  const p = prefix()
  const a = new Cache(options({ redisPrefix: p }))
  const b = new Cache(options({ redisPrefix: p }))
  assert.equal(await a.getOrLoad('n:v1:missing', async () => ABSENT), undefined)
  let called = false
  assert.equal(await b.getOrLoad('n:v1:missing', async () => ((called = true), 'x')), undefined)
  assert.equal(called, false)

  const q = prefix()
  const x = new Cache(options({ redisPrefix: q, codec: 'buffer' }))
  const y = new Cache(options({ redisPrefix: q, codec: 'buffer' }))
  const bytes = Buffer.from([0, 1, 2, 255, 254])
  assert.deepEqual(await x.getOrLoad('bin:v1:b', async () => bytes), bytes)
  const got = await y.getOrLoad('bin:v1:b', async () => Buffer.from('unused'))
  assert.ok(Buffer.isBuffer(got))
  assert.deepEqual([...got], [0, 1, 2, 255, 254])
})

test('a value the codec cannot share is served locally, with a warning', { skip, timeout: 20_000 }, async () => {
  const p = prefix()
  const a = new Cache(options({ redisPrefix: p }))
  const b = new Cache(options({ redisPrefix: p }))
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  try {
    const fn = () => 1
    assert.equal(await a.getOrLoad('f:v1:fn', async () => fn), fn)
    assert.equal(a.get('f:v1:fn'), fn)
    // b cannot read it from Redis: it loads its own.
    assert.equal(await b.getOrLoad('f:v1:fn', async () => 'b loaded'), 'b loaded')
    await sleep(10)
    assert.ok(warnings.some((w) => w.name === 'HerdlessWarning' && /f:v1:fn/.test(w.message)))
  } finally {
    process.off('warning', onWarning)
  }
})

test('a failed load releases the fleet lock: another cache loads', { skip, timeout: 20_000 }, async () => {
  const p = prefix()
  const a = new Cache(options({ redisPrefix: p }))
  const b = new Cache(options({ redisPrefix: p }))
  const boom = new Error('origin down')
  const failing = a.getOrLoad('e:v1:k', async () => {
    await sleep(150)
    throw boom
  })
  await sleep(30)
  const fromB = b.getOrLoad('e:v1:k', async () => 'b loaded')
  await assert.rejects(failing, (e) => e === boom)
  assert.equal(await within(10_000, fromB), 'b loaded')
})

test('with Redis down, loads run locally and the errors are counted', { skip, timeout: 30_000 }, async () => {
  const port = await freePort() // nothing listens there
  const cache = new Cache({ redis: `redis://127.0.0.1:${port}`, redisPrefix: prefix() })
  let calls = 0
  const values = await within(
    20_000,
    Promise.all(Array.from({ length: 50 }, () => cache.getOrLoad('down:v1:k', async () => `local ${++calls}`)))
  )
  assert.equal(calls, 1, 'still one load in this process')
  assert.deepEqual(new Set(values), new Set(['local 1']))
  assert.equal(cache.get('down:v1:k'), 'local 1')
  assert.equal(await cache.read('down:v1:k'), 'local 1', 'read answers from memory first')
  assert.equal(await cache.read('down:v1:other'), undefined, 'a miss, not an error')
  const m = cache.metrics()
  assert.ok(m.redis.backendErrors > 0)
  const before = m.namespaces.find((n) => n.namespace === 'down').counters.backendErrors
  assert.ok(before >= 2, `${before}: the failed lead and the failed read are counted in the namespace`)
  // A write that did not reach the fleet never looks like one that did: it rejects, and
  // this process drops its copy. So do invalidate and bump.
  await assert.rejects(cache.set('down:v1:k', 'set while down'), { name: 'Error', code: 'HERDLESS_BACKEND' })
  assert.equal(cache.get('down:v1:k'), undefined)
  await assert.rejects(cache.invalidate('down:v1:k'), { code: 'HERDLESS_BACKEND' })
  await assert.rejects(cache.bump('down'), { code: 'HERDLESS_BACKEND' })
  const after = cache.metrics().namespaces.find((n) => n.namespace === 'down').counters.backendErrors
  assert.equal(after, before + 3)
  assert.match(cache.prometheus(), /backend_errors/)
})
