'use strict'
// A Cache dropped without ceremony gives its memory and its Redis connections back (issue
// 33 item 5): each cache tells V8 of the native memory it holds (napi external memory), so
// V8 collects dropped caches under pressure instead of seeing small objects and waiting.
// Before: 1,000 Redis-tier caches made and dropped held 2,001 Redis clients and 200 MB;
// 10,000 in-memory caches 254 MB. Each case runs in a child process.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync, execFileSync } = require('node:child_process')
const path = require('node:path')
const { freePort, within } = require('./helpers.js')

const haveRedis = spawnSync('redis-server', ['--version']).status === 0
const ci = process.env.CI === 'true'
const ADDON = JSON.stringify(path.join(__dirname, '..'))

function child(code, ...args) {
  return JSON.parse(execFileSync(process.execPath, ['-e', code, ...args], { timeout: 120_000 }).toString())
}

test('10,000 in-memory caches made and dropped: V8 collects them (no explicit GC)', () => {
  const out = child(`
    const { Cache } = require(${ADDON})
    ;(async () => {
      for (let i = 0; i < 10000; i++) {
        new Cache()
        if (i % 100 === 99) await new Promise((r) => setImmediate(r))
      }
      await new Promise((r) => setTimeout(r, 100))
      console.log(JSON.stringify({ rssMB: process.memoryUsage().rss / 1048576 }))
    })()
  `)
  // 116 MB here after (a ~43 MB process included), 254 MB and growing before.
  assert.ok(out.rssMB < 180, `${out.rssMB.toFixed(0)} MB`)
})

test('1,000 Redis-tier caches made and dropped give their connections back', { skip: !haveRedis && !ci && 'redis-server is not on PATH' }, async () => {
  assert.ok(haveRedis, 'redis-server is not installed, and CI=true requires the Redis tests to run')
  const port = await freePort()
  const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  try {
    await within(10_000, new Promise((resolve, reject) => {
      server.on('exit', (code) => reject(new Error(`redis-server exited with ${code}`)))
      server.stdout.on('data', (d) => { if (/Ready to accept connections/.test(String(d))) resolve() })
    }), 'redis-server start')
    const url = `redis://127.0.0.1:${port}`
    const out = child(`
      const { Cache } = require(${ADDON})
      const { execFileSync } = require('node:child_process')
      ;(async () => {
        for (let i = 0; i < 1000; i++) {
          const c = new Cache({ redis: process.argv[1], redisPrefix: 'life' })
          await c.getOrLoad('a:' + i, async () => i)
          if (i % 50 === 49) await new Promise((r) => setImmediate(r))
        }
        await new Promise((r) => setTimeout(r, 500))
        const info = execFileSync('redis-cli', ['-u', process.argv[1], 'info', 'clients']).toString()
        console.log(JSON.stringify({ clients: Number(info.match(/connected_clients:(\\d+)/)[1]), rssMB: process.memoryUsage().rss / 1048576 }))
        process.exit(0)
      })()
    `, url)
    // 69 here after (the caches not yet collected, and redis-cli), 2,001 before.
    console.log(`redis clients: ${out.clients}, ${out.rssMB.toFixed(0)} MB`)
    assert.ok(out.clients < 400, `${out.clients} Redis clients`)
  } finally {
    server.kill()
  }
})
