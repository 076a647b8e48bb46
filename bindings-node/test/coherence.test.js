'use strict'
// Coherence of a process that only reads (issue 28): a cache on a Redis tier whose only
// calls are `read` (and the synchronous `get` of what `read` kept) must hear of another
// cache's deletes, writes and bumps of it, as one that wrote does. Against a private
// redis-server (skipped, with the reason, when redis-server is not on PATH).
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const { Cache } = require('herdless')
const { sleep, startRedis, within } = require('./helpers.js')

const haveRedis = spawnSync('redis-server', ['--version']).status === 0
const skip = haveRedis ? false : 'redis-server is not on PATH'

let server
let url
let prefixes = 0
/** Two caches on a prefix of their own, with a long TTL (a missed notice would show). */
const pair = () => {
  const redisPrefix = `coh${process.pid}x${++prefixes}`
  const options = { redis: url, redisPrefix, ttl: 60_000, jitter: 0, beta: 0 }
  return [new Cache(options), new Cache(options)]
}
/** Polls until `done()` holds, failing after 5 s: a bound, not a speed. */
const until = (done, what) =>
  within(5_000, (async () => { while (!done()) await sleep(10) })(), what)

test.before(async () => {
  if (!haveRedis) return
  ;({ server, url } = await startRedis())
})

test.after(() => {
  if (server) server.kill('SIGKILL')
})

test('a cache that only reads hears of a delete', { skip, timeout: 20_000 }, async () => {
  const [a, b] = pair()
  await a.set('session:alice', 'alice')
  assert.equal(await b.read('session:alice'), 'alice')
  assert.equal(b.get('session:alice'), 'alice', 'b keeps the copy it read')
  assert.equal(await a.invalidate('session:alice'), true)
  await until(() => b.get('session:alice') === undefined, 'b to drop the deleted session')
  assert.equal(await b.read('session:alice'), undefined)
})

test('a cache that only reads hears of a write and of a bump', { skip, timeout: 20_000 }, async () => {
  const [a, b] = pair()
  await a.set('acct:1', 'free')
  assert.equal(await b.read('acct:1'), 'free')
  await a.set('acct:1', 'pro')
  await until(() => b.get('acct:1') !== 'free', 'b to drop the old value')
  assert.equal(await b.read('acct:1'), 'pro')

  const [c, d] = pair()
  await c.set('page:1', 'old')
  assert.equal(await d.read('page:1'), 'old')
  await c.bump('page')
  await until(() => d.get('page:1') === undefined, 'd to see the bump')
})

test("caches of one process see each other's changes at once", { skip, timeout: 30_000 }, async () => {
  // Two caches of one process over one Redis: a change through one reaches the other before
  // the call resolves, not one pub/sub delivery later.
  const [a, b] = pair()
  for (let i = 0; i < 100; i++) {
    await a.set('cfg:flags', i)
    assert.equal(await b.read('cfg:flags'), i, 'a write, at once')
    await a.invalidate('cfg:flags')
    assert.equal(await b.read('cfg:flags'), undefined, 'a delete, at once')
    await a.set('cfg:flags', 'w')
    assert.equal(await b.read('cfg:flags'), 'w')
    await a.bump('cfg')
    assert.equal(await b.read('cfg:flags'), undefined, 'a bump, at once')
    await a.set('page:1', 'p', { tags: ['product:1'] })
    assert.equal(await b.read('page:1'), 'p')
    await a.invalidateTag('product:1')
    assert.equal(await b.read('page:1'), undefined, 'a tag, at once')
  }
})
