'use strict'
// cache.lock / tryLock / isLocked / withLock and FleetLock: the engine's lock on a key
// (lease, extension, release by token and failure policy are the engine's: PROTOCOL.md,
// "Locks held outside a load"; redis/tests/lock.rs checks them in Rust). Here: how Node
// drives it, on the in-memory tier and on a private redis-server (two Cache objects stand
// for two processes; one test uses two real processes).
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync } = require('node:child_process')
const { Cache, FleetLock } = require('herdless')
const { freePort, sleep, startRedis, within } = require('./helpers.js')

/** Runs `script` (CommonJS, with `Cache` in scope) in a child Node process. */
function node(script, options = {}) {
  const prelude = `const { Cache } = require(${JSON.stringify(require.resolve('herdless'))});\n`
  return spawn(process.execPath, ['-e', prelude + script], { stdio: ['ignore', 'pipe', 'inherit'], ...options })
}

/** The first line `child` prints. */
function firstLine(child) {
  return new Promise((resolve, reject) => {
    let text = ''
    child.stdout.on('data', (d) => {
      text += d
      if (text.includes('\n')) resolve(text.split('\n')[0])
    })
    child.on('exit', (code) => reject(new Error(`the child exited with ${code} before printing`)))
  })
}

test('callers of one cache exclude each other; the answers of a held lock', async () => {
  const cache = new Cache()
  let inside = 0
  let most = 0
  const work = async () => {
    for (let i = 0; i < 5; i++) {
      const lock = await cache.lock('jobs:v1:one')
      inside++
      most = Math.max(most, inside)
      await sleep(1)
      inside--
      assert.equal(await lock.release(), true)
    }
  }
  await within(20_000, Promise.all(Array.from({ length: 8 }, work)))
  assert.equal(most, 1)

  const lock = await cache.lock('jobs:v1:one')
  assert.ok(lock instanceof FleetLock)
  assert.equal(lock.key, 'jobs:v1:one')
  assert.equal(lock.owned, true)
  assert.equal(lock.lost, false)
  assert.equal(await cache.tryLock('jobs:v1:one'), null)
  assert.equal(await cache.isLocked('jobs:v1:one'), true)
  assert.equal(await cache.isLocked('jobs:v1:other'), false)
  assert.equal(await lock.release(), true)
  assert.equal(lock.owned, false)
  await assert.rejects(lock.release(), { name: 'Error', code: 'HERDLESS_NOT_HELD' })
  // Released: free again, at once.
  const again = await cache.tryLock('jobs:v1:one')
  assert.ok(again && again.owned)
  await again.release()
  assert.equal(cache._internals().pendingCalls, 0)
  assert.throws(() => new FleetLock(), 'only a cache makes one')
})

test('timeout: rejects with HERDLESS_LOCK_TIMEOUT, without blocking the event loop', async () => {
  const cache = new Cache()
  const held = await cache.lock('t:v1:k')
  let ticks = 0
  const timer = setInterval(() => ticks++, 5)
  const started = Date.now()
  const err = await cache.lock('t:v1:k', { timeout: 150 }).catch((e) => e)
  clearInterval(timer)
  assert.equal(err.code, 'HERDLESS_LOCK_TIMEOUT')
  assert.equal(err.waitedMs, 150)
  assert.match(err.message, /"t:v1:k" was still held after 150 ms/)
  assert.ok(Date.now() - started >= 140)
  assert.ok(ticks >= 5, `${ticks}: the event loop ran while the lock call waited`)
  await assert.rejects(cache.lock('t:v1:k', { timeout: 0 }), { code: 'HERDLESS_LOCK_TIMEOUT', waitedMs: 0 })
  // A wait that outlasts the holder: resolved by the release.
  const waiter = cache.lock('t:v1:k', { timeout: 10_000 })
  await sleep(20)
  await held.release()
  const next = await within(5_000, waiter)
  assert.equal(next.owned, true)
  await next.release()
  assert.equal(cache._internals().pendingCalls, 0)
})

test('abort: rejects with the reason and stops asking', async () => {
  const cache = new Cache()
  const held = await cache.lock('a:v1:k')
  const controller = new AbortController()
  const waiting = cache.lock('a:v1:k', { signal: controller.signal })
  await sleep(20)
  const reason = new Error('user left')
  controller.abort(reason)
  await assert.rejects(waiting, (e) => e === reason)
  assert.equal(cache._internals().pendingCalls, 0, 'the wait left the driver')
  // It does not take the lock later behind the caller's back.
  await held.release()
  await sleep(20)
  assert.equal(await cache.isLocked('a:v1:k'), false)
  // An already aborted signal: not even asked.
  const gone = AbortSignal.abort(new Error('gone'))
  await assert.rejects(cache.lock('a:v1:k', { signal: gone }), { message: 'gone' })
  assert.equal(await cache.isLocked('a:v1:k'), false)
})

test('withLock and Symbol.asyncDispose release the lock', async () => {
  const cache = new Cache()
  assert.equal(await cache.withLock('w:v1:k', async (lock) => (assert.equal(lock.owned, true), 7)), 7)
  assert.equal(await cache.isLocked('w:v1:k'), false)
  const boom = new Error('boom')
  await assert.rejects(
    cache.withLock('w:v1:k', async () => {
      throw boom
    }),
    (e) => e === boom
  )
  assert.equal(await cache.isLocked('w:v1:k'), false, 'released after a throw')
  const held = await cache.lock('w:v1:k')
  await assert.rejects(cache.withLock('w:v1:k', () => 1, { timeout: 20 }), { code: 'HERDLESS_LOCK_TIMEOUT' })
  await held.release()
  // `await using lock = await cache.lock(key)` calls this at the end of the block.
  const lock = await cache.lock('w:v1:k')
  await lock[Symbol.asyncDispose]()
  assert.equal(await cache.isLocked('w:v1:k'), false)
  await lock[Symbol.asyncDispose]() // released already: harmless
})

test('bad arguments and a closed cache reject', async () => {
  const cache = new Cache({ maxKeyLen: 8 })
  await assert.rejects(cache.lock(7), { name: 'TypeError', code: 'HERDLESS_INVALID_ARGUMENT' })
  await assert.rejects(cache.lock(''), { code: 'HERDLESS_EMPTY_KEY' })
  await assert.rejects(cache.lock('k'.repeat(9)), { name: 'RangeError', code: 'HERDLESS_KEY_TOO_LONG' })
  await assert.rejects(cache.lock('k', { timeoutMs: 5 }), { name: 'TypeError', code: 'HERDLESS_INVALID_OPTION' })
  await assert.rejects(cache.lock('k', { timeout: -1 }), { name: 'RangeError', code: 'HERDLESS_INVALID_OPTION' })
  await assert.rejects(cache.lock('k', { signal: 'no' }), { code: 'HERDLESS_INVALID_OPTION' })
  await assert.rejects(cache.tryLock(null), { code: 'HERDLESS_INVALID_ARGUMENT' })
  await assert.rejects(cache.isLocked(''), { code: 'HERDLESS_EMPTY_KEY' })
  const held = await cache.lock('k')
  const waiting = cache.lock('k')
  await sleep(20)
  cache.close()
  await assert.rejects(within(5_000, waiting), { code: 'HERDLESS_CLOSED' }, 'a wait in flight is answered')
  // The engine's tier is gone: the release fails (the lock ran out with the cache).
  await assert.rejects(held.release(), { name: 'Error' })
  await assert.rejects(cache.lock('k'), { code: 'HERDLESS_CLOSED' })
  await assert.rejects(cache.tryLock('k'), { code: 'HERDLESS_CLOSED' })
  await assert.rejects(cache.isLocked('k'), { code: 'HERDLESS_CLOSED' })
})

test('a pending lock wait keeps the process alive; a held lock alone does not', { timeout: 20_000 }, () => {
  const script = `
    const cache = new Cache()
    cache.lock('p:v1:k').then(() => cache.lock('p:v1:k', { timeout: 300 }))
      .catch((e) => console.log(e.code))
  `
  const r = spawnSync(process.execPath, ['-e', `const { Cache } = require(${JSON.stringify(require.resolve('herdless'))});` + script], {
    encoding: 'utf8',
    timeout: 15_000,
  })
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), 'HERDLESS_LOCK_TIMEOUT')
})

test('a lock collected unreleased is released in the background', { timeout: 20_000 }, async () => {
  require('node:v8').setFlagsFromString('--expose-gc')
  const gc = require('node:vm').runInNewContext('gc')
  const cache = new Cache()
  await (async () => {
    await cache.lock('g:v1:k') // dropped at once
  })()
  let free = false
  for (let i = 0; i < 100 && !free; i++) {
    gc()
    await sleep(10)
    free = !(await cache.isLocked('g:v1:k'))
  }
  assert.ok(free, 'the lost object released its lock')
})

// The Redis tier, on a private redis-server.
const haveRedis = spawnSync('redis-server', ['--version']).status === 0
const skip = haveRedis ? false : 'redis-server is not on PATH'
let server
let url
let prefixes = 0
const prefix = () => `hll${process.pid}x${++prefixes}`

test.before(async () => {
  if (!haveRedis) return
  ;({ server, url } = await startRedis())
})

test.after(() => {
  if (server) server.kill('SIGKILL')
})

/** Two caches on one Redis and one prefix: two processes of a fleet. */
function pair(extra = {}) {
  const redisPrefix = prefix()
  return [new Cache({ redis: url, redisPrefix, ...extra }), new Cache({ redis: url, redisPrefix, ...extra })]
}

test('Redis: two caches exclude each other; release wakes the other', { skip, timeout: 30_000 }, async () => {
  const [a, b] = pair()
  const held = await a.lock('r:v1:k')
  assert.equal(await b.tryLock('r:v1:k'), null)
  assert.equal(await b.isLocked('r:v1:k'), true)
  await assert.rejects(b.lock('r:v1:k', { timeout: 100 }), { code: 'HERDLESS_LOCK_TIMEOUT' })
  const waiting = b.lock('r:v1:k')
  let got = false
  waiting.then(() => (got = true))
  await sleep(100)
  assert.equal(got, false, 'not while a holds it')
  const released = Date.now()
  assert.equal(await held.release(), true)
  const mine = await within(5_000, waiting)
  assert.ok(Date.now() - released < 1_000, 'woken by the release, not by a timer')
  assert.equal(mine.owned, true)
  assert.equal(await a.tryLock('r:v1:k'), null)
  await mine.release()
  const back = await a.tryLock('r:v1:k')
  assert.ok(back)
  await back.release()
  // Aborted while waiting on Redis: rejected, and nothing taken behind the caller's back.
  const again = await a.lock('r:v1:k')
  const controller = new AbortController()
  const aborted = b.lock('r:v1:k', { signal: controller.signal })
  await sleep(50)
  controller.abort(new Error('left'))
  await assert.rejects(aborted, { message: 'left' })
  await again.release()
  await sleep(50)
  assert.equal(await a.isLocked('r:v1:k'), false)
  a.close()
  b.close()
})

test('Redis: a load of the key waits while the lock is held', { skip, timeout: 30_000 }, async () => {
  const [a, b] = pair()
  const held = await a.lock('l:v1:k')
  let loadedAt = 0
  const loading = b.getOrLoad('l:v1:k', async () => {
    loadedAt = Date.now()
    return 'loaded'
  })
  await sleep(300)
  assert.equal(loadedAt, 0, 'the loader did not run while the lock was held')
  const released = Date.now()
  await held.release()
  assert.equal(await within(10_000, loading), 'loaded')
  assert.ok(loadedAt >= released)
  a.close()
  b.close()
})

test('Redis: a set of the key breaks the lock (lost), and its release says so', { skip, timeout: 30_000 }, async () => {
  const [a, b] = pair({ lease: 300 })
  const lock = await a.lock('s:v1:k')
  await b.set('s:v1:k', 'written')
  for (let i = 0; i < 100 && !lock.lost; i++) await sleep(20)
  assert.equal(lock.lost, true, 'an extension found it gone')
  assert.equal(lock.owned, false)
  const other = await within(5_000, b.lock('s:v1:k'))
  assert.equal(await lock.release(), false)
  assert.equal(await other.release(), true)
  a.close()
  b.close()
})

test('Redis: a holder closed without release frees the key within one lease', { skip, timeout: 30_000 }, async () => {
  const [a, b] = pair({ lease: 500 })
  await a.lock('c:v1:k') // kept by nobody: closed with the cache
  a.close()
  const started = Date.now()
  const mine = await within(5_000, b.lock('c:v1:k'))
  assert.ok(Date.now() - started < 1_500, `${Date.now() - started} ms`)
  await mine.release()
  b.close()
})

test('Redis: two processes exclude each other; a killed holder frees the key within one lease', { skip, timeout: 30_000 }, async () => {
  const redisPrefix = prefix()
  const child = node(`
    const cache = new Cache({ redis: ${JSON.stringify(url)}, redisPrefix: ${JSON.stringify(redisPrefix)}, lease: 1000 })
    cache.lock('k:v1:k').then(() => { console.log('held'); setInterval(() => {}, 1000) })
  `)
  try {
    assert.equal(await within(15_000, firstLine(child)), 'held')
    const here = new Cache({ redis: url, redisPrefix, lease: 1000 })
    await sleep(2_200) // more than two leases: the live holder extends it
    assert.equal(await here.tryLock('k:v1:k'), null)
    child.kill('SIGKILL')
    const started = Date.now()
    const mine = await within(10_000, here.lock('k:v1:k'))
    assert.ok(Date.now() - started < 2_500, `${Date.now() - started} ms`)
    await mine.release()
    here.close()
  } finally {
    child.kill('SIGKILL')
  }
})

test('Redis unreachable: a lock is an error (HERDLESS_BACKEND), never a lock that looks held', { skip, timeout: 30_000 }, async () => {
  const port = await freePort() // nothing listens there
  const cache = new Cache({ redis: `redis://127.0.0.1:${port}`, redisPrefix: prefix() })
  await within(20_000, assert.rejects(cache.lock('u:v1:k', { timeout: 1_000 }), { name: 'Error', code: 'HERDLESS_BACKEND' }))
  await within(20_000, assert.rejects(cache.tryLock('u:v1:k'), { code: 'HERDLESS_BACKEND' }))
  await within(20_000, assert.rejects(cache.isLocked('u:v1:k'), { code: 'HERDLESS_BACKEND' }))
  cache.close()
})
