'use strict'
// A Redis Cluster as the shared tier, from Node: three local cluster nodes started here
// (redis-server --cluster-enabled yes, then redis-cli --cluster create). Caches given the
// nodes as an array and as one redis+cluster:// URL are one fleet: one loader call per key,
// writes and bumps reaching each other through sharded pub/sub, namespaces on several nodes.
// Without redis-server the test is skipped, with the reason, except under CI=true.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync } = require('node:child_process')
const { mkdtempSync, rmSync } = require('node:fs')
const net = require('node:net')
const { tmpdir } = require('node:os')
const { join } = require('node:path')
const { Cache } = require('herdless')
const { sleep, within } = require('./helpers.js')

const haveRedis = spawnSync('redis-server', ['--version']).status === 0 && spawnSync('redis-cli', ['--version']).status === 0
const ci = process.env.CI === 'true'
if (!haveRedis && !ci) console.warn('SKIPPED: redis-server or redis-cli not found on PATH; the Redis Cluster test did not run')

/** Whether `port` can be bound on loopback now. */
const bindable = (port) =>
  new Promise((resolve) => {
    const s = net.createServer()
    s.once('error', () => resolve(false))
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)))
  })

/** A free port whose cluster bus port (+10000) is free too. */
async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const s = net.createServer()
      s.on('error', reject)
      s.listen(0, '127.0.0.1', () => {
        const { port } = s.address()
        s.close(() => resolve(port))
      })
    })
    if (port < 50000 && (await bindable(port + 10000))) return port
  }
}

/** `redis-cli -p <port> <args>`: its output. */
const cli = (port, ...args) => spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' })

let nodes = []
let dir

test.before(async () => {
  if (!haveRedis) return
  dir = mkdtempSync(join(tmpdir(), 'herdless-cluster-'))
  const ports = []
  for (let i = 0; i < 3; i++) ports.push(await freePort())
  nodes = ports.map((port) => {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir,
      '--cluster-enabled', 'yes', '--cluster-node-timeout', '2000', '--cluster-config-file', `nodes-${port}.conf`]
    return { port, child: spawn('redis-server', args, { stdio: 'ignore' }) }
  })
  await within(10_000, (async () => {
    for (const { port } of nodes) while (cli(port, 'PING').stdout.trim() !== 'PONG') await sleep(20)
  })(), 'the cluster nodes')
  const created = spawnSync('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { encoding: 'utf8' })
  assert.equal(created.status, 0, `cluster create failed: ${created.stdout}${created.stderr}`)
  await within(20_000, (async () => {
    while (!nodes.every(({ port }) => /cluster_state:ok/.test(cli(port, 'CLUSTER', 'INFO').stdout))) await sleep(100)
  })(), 'cluster_state:ok')
})

test.after(() => {
  for (const { child } of nodes) child.kill('SIGKILL')
  if (dir) rmSync(dir, { recursive: true, force: true })
})

test('redis-server is there under CI=true', () => {
  assert.ok(haveRedis || !ci, 'redis-server/redis-cli are not installed, and CI=true requires the Redis Cluster test to run')
})

test('a three-node Redis Cluster: one loader call per key, writes and bumps reach the other caches', {
  skip: haveRedis ? false : 'redis-server or redis-cli is not on PATH',
  timeout: 60_000,
}, async () => {
  const prefix = `cl${process.pid}`
  const urls = nodes.map(({ port }) => `redis://127.0.0.1:${port}`)
  const a = new Cache({ redis: urls, redisPrefix: prefix })
  const b = new Cache({ redis: `redis+cluster://127.0.0.1:${nodes[0].port},127.0.0.1:${nodes[1].port}`, redisPrefix: prefix })
  // Namespaces hash to different slots, so to different nodes: every one is single-slot.
  const namespaces = ['users', 'orders', 'cart', 'geo', 'feed', 'ads']
  const slots = new Set(namespaces.map((ns) => cli(nodes[0].port, 'CLUSTER', 'KEYSLOT', `${prefix}:{${ns}}:v:${ns}:1`).stdout.trim()))
  assert.ok(slots.size > 1)
  let calls = 0
  const loader = async () => {
    calls++
    await sleep(100)
    return { loaded: true }
  }
  for (const ns of namespaces) {
    const key = `${ns}:1`
    const results = await within(15_000, Promise.all([
      ...Array.from({ length: 20 }, () => a.getOrLoad(key, loader)),
      ...Array.from({ length: 20 }, () => b.getOrLoad(key, loader)),
    ]), `the loads of ${key}`)
    for (const r of results) assert.deepEqual(r, { loaded: true })
  }
  assert.equal(calls, namespaces.length, 'one loader call per key for both caches')
  const [ra, rb] = [a.metrics().redis, b.metrics().redis]
  assert.equal(ra.commits + rb.commits, namespaces.length)
  assert.equal(ra.backendErrors + rb.backendErrors, 0)

  // A set in one cache drops the other's copy (a sharded notification); it then reads the write.
  assert.deepEqual(b.get('users:1'), { loaded: true })
  await a.set('users:1', 'written by a')
  await within(5_000, (async () => { while (b.get('users:1') !== undefined) await sleep(10) })(), 'the notification')
  assert.equal(await b.read('users:1'), 'written by a')
  // A bump moves the namespace on for both.
  assert.ok((await b.bump('orders')) >= 1)
  await within(5_000, (async () => { while (a.get('orders:1') !== undefined) await sleep(10) })(), 'the bump')
  assert.equal(await a.read('orders:1'), undefined)
  assert.equal(await a.getOrLoad('orders:1', async () => 'after the bump'), 'after the bump')
  assert.equal(await b.read('orders:1'), 'after the bump')
})
