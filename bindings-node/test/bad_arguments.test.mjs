// Bad arguments at the call sites (the options of `new Cache(...)` are in options.test.js):
// wrong key types, huge keys, keys JavaScript cannot spell in UTF-8, loaders that are not
// functions, bad per-call durations and options, values the Redis codec cannot encode. Each fails with
// JavaScript's own error class (TypeError / RangeError) carrying a `code`, and nothing
// crashes the process: every case runs in a child Node first, so an abort or a segfault
// fails this test instead of killing the runner.
//
// Also here: bytes planted in Redis never run code. The JSON codec parses with JSON.parse
// (never eval, never a reviver), so JavaScript source under a key is a miss, and a
// `__proto__` key is plain data.
import test from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const require = createRequire(import.meta.url)
const { Cache } = require('herdless')
const { startRedis } = require('./helpers.js')

// name -> a JavaScript expression against `cache` (memory) or `rcache`/`rbuf` (Redis); it
// may return a promise. The child prints one JSON line per case.
const MEMORY = {
  'key number': "cache.getOrLoad(42, async () => 1)",
  'key null': "cache.getOrLoad(null, async () => 1)",
  'key undefined': "cache.getOrLoad(undefined, async () => 1)",
  'key object': "cache.getOrLoad({}, async () => 1)",
  'key array': "cache.getOrLoad(['k', 1], async () => 1)",
  'key symbol': "cache.getOrLoad(Symbol('k'), async () => 1)",
  'key bigint': "cache.set(10n, 1)",
  'key Buffer': "cache.set(Buffer.from('k:1'), 1)",
  'key String object': "cache.getOrLoad(new String('k:obj'), async () => 1)",
  'key empty': "cache.getOrLoad('', async () => 1)",
  'key 10 MB': "cache.getOrLoad('k:' + 'x'.repeat(10_000_000), async () => 1)",
  'key 10 MB get': "cache.get('k:' + 'x'.repeat(10_000_000))",
  'key 10 MB set': "cache.set('k:' + 'x'.repeat(10_000_000), 1)",
  'key 10 MB invalidate': "cache.invalidate('k:' + 'x'.repeat(10_000_000))",
  'key lone surrogate': "cache.set('k:\\ud800', 1)",
  'key lone surrogate get': "cache.get('k:\\udfff')",
  'loader string': "cache.getOrLoad('k:1', 'not a function')",
  'loader number': "cache.getOrLoad('k:2', 42)",
  'loader null': "cache.getOrLoad('k:3', null)",
  'loader missing': "cache.getOrLoad('k:4')",
  'loader sync value': "cache.getOrLoad('k:5', () => 5)",
  'loader sync throw': "cache.getOrLoad('k:6', () => { throw new TypeError('mine') })",
  'loader returns a thenable that never settles is bounded': "new Cache({ hardTimeout: 50 }).getOrLoad('k:7', () => ({ then() {} }))",
  'ttl negative': "cache.set('k:8', 1, { ttl: -1 })",
  'ttl NaN': "cache.getOrLoad('k:9', async () => 1, { ttl: NaN })",
  'ttl Infinity': "cache.set('k:10', 1, { ttl: Infinity })",
  'ttl 1e300': "cache.set('k:11', 1, { ttl: 1e300 })",
  'ttl string': "cache.getOrLoad('k:12', async () => 1, { ttl: '5' })",
  'option ttl 1e300': "new Cache({ ttl: 1e300 })",
  'option hardTimeout 1e300': "new Cache({ hardTimeout: 1e300 })",
  'ttl bigint': "cache.set('k:13', 1, { ttl: 5n })",
  'options not an object': "cache.set('k:14', 1, 'ttl')",
  'load options array': "cache.getOrLoad('k:15', async () => 1, [1])",
  'bump number': "cache.bump(3)",
  'bump empty': "cache.bump('')",
  'bump 10 MB': "cache.bump('n'.repeat(10_000_000))",
  'bump lone surrogate': "cache.bump('\\ud800')",
  'bump lone surrogate inside': "cache.bump('ns\\udfffx')",
  'getOrLoad unknown option': "cache.getOrLoad('k:17', async () => 1, { ttl: 5, tll: 5 })",
  'set unknown option': "cache.set('k:18', 1, { signal: null })",
  'wrap unknown option': "cache.wrap(async () => 1, { namespace: 'n', entity: 'e', ttls: 5 })",
  'warm unknown option': "cache.warm(['k:19'], async (k) => k, { concurency: 2 })",
  'memory ttl of 300 years is kept': "cache.set('k:20', 1, { ttl: 1e13 }).then(() => cache.get('k:20'))",
  'warm keys not an array': "cache.warm('k:1', async (k) => k)",
  'warm loader not a function': "cache.warm(['k:1'], 42)",
  'memory set bigint value': "cache.set('k:16', 10n).then(() => typeof cache.get('k:16'))",
  // Request input: ~40 KB of JSON that JSON.parse accepts used to overflow the stack.
  'key part nested 20,000 deep (buildKey)': "buildKey({ namespace: 'n', entity: 'e', id: JSON.parse('['.repeat(20000) + ']'.repeat(20000)) })",
  'key part nested 20,000 deep (wrap)': "cache.wrap(async (x) => 1, { namespace: 'n', entity: 'e' })(JSON.parse('['.repeat(20000) + ']'.repeat(20000)))",
  'key part nested 20,000 deep (wrap params)': "cache.wrap(async (q) => 1, { namespace: 'n', entity: 'e' })({ q: JSON.parse('['.repeat(20000) + ']'.repeat(20000)) })",
  'key part circular': "(() => { const a = []; a.push(a); return buildKey({ namespace: 'n', entity: 'e', id: a }) })()",
  'key part circular (wrap)': "(() => { const a = [1]; a.push(a); return cache.wrap(async (x) => 1, { namespace: 'n', entity: 'e' })(a) })()",
  'key part shared sub-arrays': "(() => { let x = [1]; for (let i = 0; i < 30; i++) x = [x, x]; return buildKey({ namespace: 'n', entity: 'e', id: x }) })()",
  'key part sparse array of length 2^32-1': "buildKey({ namespace: 'n', entity: 'e', id: new Array(2 ** 32 - 1) })",
  'key part nested 32 deep is fine': "buildKey({ namespace: 'n', entity: 'e', id: JSON.parse('['.repeat(32) + '1' + ']'.repeat(32)) })",
  'warm sparse array of length 2^32-1': "cache.warm(new Array(2 ** 32 - 1), async (k) => k)",
  'warm sparse array with a hole': "cache.warm(new Array(3), async (k) => k)",
  'lock key 10 MB': "cache.lock('k:' + 'x'.repeat(10_000_000))",
  'lock key lone surrogate': "cache.tryLock('k:\\ud800')",
  'lock timeout NaN': "cache.lock('k:l1', { timeout: NaN })",
  'lock timeout Infinity': "cache.lock('k:l2', { timeout: Infinity })",
  'lock timeout 1e300': "cache.lock('k:l3', { timeout: 1e300 })",
  'lock timeout string': "cache.lock('k:l4', { timeout: '5' })",
  'lock options array': "cache.lock('k:l5', [1])",
  'lock timeout of 300 years': "cache.lock('k:l6', { timeout: 1e13 }).then((l) => l.owned)",
}
const REDIS = {
  'redis set bigint': "rcache.set('r:1', 10n)",
  'redis set cyclic': "(() => { const a = []; a.push(a); return rcache.set('r:2', a) })()",
  'redis set function': "rcache.set('r:3', () => 1)",
  'redis set undefined': "rcache.set('r:4', undefined)",
  'redis buffer codec set string': "rbuf.set('r:5', 'not a buffer')",
  'redis set 10 MB key': "rcache.set('r:' + 'x'.repeat(10_000_000), 1)",
  'redis set 16 MB value': "rcache.set('r:6', 'x'.repeat(16_000_000))",
  'redis bump 10 MB': "rcache.bump('n'.repeat(10_000_000))",
  'redis set ttl of 300 years': "rcache.set('r:7', 1, { ttl: 1e13 })",
  'redis getOrLoad ttl of 300 years': "rcache.getOrLoad('r:8', async () => 1, { ttl: 1e13 })",
  'redis getOrLoad bigint': "rcache.getOrLoad('r:9', async () => 10n).then((v) => typeof v)",
}

const CHILD = `
const { Cache, buildKey } = require('herdless')
const [cases, url, prefix] = [JSON.parse(process.argv[1]), process.argv[2], process.argv[3]]
const cache = new Cache()
const rcache = url ? new Cache({ redis: url, redisPrefix: prefix }) : null
const rbuf = url ? new Cache({ redis: url, redisPrefix: prefix + 'b', codec: 'buffer' }) : null
const warnings = []
process.on('warning', (w) => warnings.push(w.message))
const show = (v) => { try { return String(typeof v === 'string' ? JSON.stringify(v) : v).slice(0, 80) } catch { return typeof v } }
// The engine's timers live outside the event loop: a handle keeps the loop alive while a
// case waits for one (e.g. the hard timeout of a loader that never settles).
setInterval(() => {}, 1000)
;(async () => {
  for (const [name, src] of Object.entries(cases)) {
    console.log(JSON.stringify({ start: name }))
    let out
    try {
      const v = await eval(src)
      await new Promise((r) => setImmediate(r))
      out = { name, ok: true, value: show(v), warned: warnings.splice(0).join(' | ') }
    } catch (e) {
      out = { name, ok: false, type: e && e.constructor && e.constructor.name, code: e && e.code, message: String(e && e.message).slice(0, 300) }
    }
    console.log(JSON.stringify(out))
  }
  process.exit(0)
})()
`

function runCases(cases, ...extra) {
  const r = spawnSync(process.execPath, ['-e', CHILD, JSON.stringify(cases), ...extra], {
    encoding: 'utf8',
    timeout: 120_000,
    maxBuffer: 1 << 26,
  })
  const out = {}
  let last
  for (const line of r.stdout.split('\n').filter(Boolean)) {
    const o = JSON.parse(line)
    if (o.start) last = o.start
    else out[o.name] = o
  }
  assert.equal(r.status, 0, `the process died (${r.status ?? r.signal}) in case ${last}:\n${r.stderr.slice(-2000)}`)
  assert.deepEqual(Object.keys(out).sort(), Object.keys(cases).sort())
  return out
}

function expect(results, name, type, code, message = '') {
  const r = results[name]
  assert.equal(r.ok, false, `${name}: expected ${type}, got ${JSON.stringify(r)}`)
  assert.equal(r.type, type, `${name}: ${JSON.stringify(r)}`)
  if (code !== undefined) assert.equal(r.code, code, `${name}: ${JSON.stringify(r)}`)
  assert.ok(r.message.toLowerCase().includes(message.toLowerCase()), `${name}: ${r.message} lacks ${message}`)
}

const memory = runCases(MEMORY)

test('keys of the wrong type are a TypeError with HERDLESS_INVALID_ARGUMENT', () => {
  for (const name of ['key number', 'key null', 'key undefined', 'key object', 'key array', 'key symbol', 'key bigint', 'key Buffer', 'key String object']) {
    expect(memory, name, 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'must be a string')
  }
  expect(memory, 'key empty', 'TypeError', 'HERDLESS_EMPTY_KEY')
})

test('huge keys are a RangeError with HERDLESS_KEY_TOO_LONG, from every call', () => {
  for (const name of ['key 10 MB', 'key 10 MB set', 'key 10 MB invalidate']) {
    expect(memory, name, 'RangeError', 'HERDLESS_KEY_TOO_LONG', '1024')
  }
  // `get` never throws for a string key: one that could never be stored is not there.
  assert.equal(memory['key 10 MB get'].value, 'undefined')
})

test('deep, circular, shared or sparse key parts are a clean error, never a crash', () => {
  for (const name of ['key part nested 20,000 deep (buildKey)', 'key part nested 20,000 deep (wrap)', 'key part nested 20,000 deep (wrap params)', 'key part circular', 'key part circular (wrap)']) {
    expect(memory, name, 'TypeError', 'HERDLESS_INVALID_KEY', 'nested more than 32 deep')
  }
  for (const name of ['key part shared sub-arrays', 'key part sparse array of length 2^32-1']) {
    expect(memory, name, 'TypeError', 'HERDLESS_INVALID_KEY', 'more than 65536 values')
  }
  assert.equal(memory['key part nested 32 deep is fine'].ok, true, JSON.stringify(memory['key part nested 32 deep is fine']))
  expect(memory, 'warm sparse array of length 2^32-1', 'RangeError', 'HERDLESS_INVALID_ARGUMENT', 'at most 16777216 keys')
  expect(memory, 'warm sparse array with a hole', 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'key 0 is not a string')
})

test('keys with lone surrogates are refused, never folded onto another key', () => {
  // UTF-8 cannot spell them; converting would map every lone surrogate to U+FFFD, so
  // 'k:\ud800' and 'k:\udfff' would be one key.
  expect(memory, 'key lone surrogate', 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'surrogate')
  expect(memory, 'key lone surrogate get', 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'surrogate')
})

test('loaders that are not functions are a TypeError; a function answers as it would alone', () => {
  for (const name of ['loader string', 'loader number', 'loader null', 'loader missing']) {
    expect(memory, name, 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'function')
  }
  assert.deepEqual(memory['loader sync value'].value, '5')
  expect(memory, 'loader sync throw', 'TypeError', undefined, 'mine')
  expect(memory, 'loader returns a thenable that never settles is bounded', 'Error', 'HERDLESS_LOAD_TIMEOUT')
})

test('bad per-call durations and options are a RangeError/TypeError with HERDLESS_INVALID_OPTION', () => {
  for (const name of ['ttl negative', 'ttl NaN', 'ttl Infinity', 'ttl 1e300', 'option ttl 1e300']) {
    expect(memory, name, 'RangeError', 'HERDLESS_INVALID_OPTION', 'ttl')
  }
  // Used to abort the process: a Rust panic converting 1e300 ms to a Duration.
  expect(memory, 'option hardTimeout 1e300', 'RangeError', 'HERDLESS_INVALID_OPTION', 'too large')
  for (const name of ['ttl string', 'ttl bigint', 'options not an object', 'load options array']) {
    expect(memory, name, 'TypeError', 'HERDLESS_INVALID_OPTION')
  }
})

test('unknown fields of per-call options are refused, naming the field', () => {
  expect(memory, 'getOrLoad unknown option', 'TypeError', 'HERDLESS_INVALID_OPTION', 'unknown getOrLoad option `tll`')
  expect(memory, 'set unknown option', 'TypeError', 'HERDLESS_INVALID_OPTION', 'unknown set option `signal`')
  expect(memory, 'wrap unknown option', 'TypeError', 'HERDLESS_INVALID_OPTION', 'unknown wrap option `ttls`')
  expect(memory, 'warm unknown option', 'TypeError', 'HERDLESS_INVALID_OPTION', 'unknown warm option `concurency`')
})

test('namespaces and warm arguments are checked', () => {
  expect(memory, 'bump number', 'TypeError', 'HERDLESS_INVALID_ARGUMENT')
  // As keys: a lone surrogate would bump the U+FFFD namespace instead.
  expect(memory, 'bump lone surrogate', 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'surrogate')
  expect(memory, 'bump lone surrogate inside', 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'surrogate')
  // Without a shared tier, nothing bounds a TTL but a Duration.
  assert.equal(memory['memory ttl of 300 years is kept'].value, '1')
  // An empty namespace is the namespace of keys without one: allowed, or refused with a code.
  const empty = memory['bump empty']
  assert.ok(empty.ok || /^HERDLESS_/.test(empty.code), JSON.stringify(empty))
  // Longer than any key: it holds no key, nothing is bumped or kept.
  assert.equal(memory['bump 10 MB'].value, '0', JSON.stringify(memory['bump 10 MB']))
  expect(memory, 'warm keys not an array', 'TypeError', undefined)
  expect(memory, 'warm loader not a function', 'TypeError', undefined)
  // In memory any value is kept as it is (no codec is involved).
  assert.equal(memory['memory set bigint value'].value, '"bigint"')
})

test('lock arguments are checked as the other calls check theirs', () => {
  expect(memory, 'lock key 10 MB', 'RangeError', 'HERDLESS_KEY_TOO_LONG', '1024')
  expect(memory, 'lock key lone surrogate', 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'surrogate')
  for (const name of ['lock timeout NaN', 'lock timeout Infinity', 'lock timeout 1e300']) {
    expect(memory, name, 'RangeError', 'HERDLESS_INVALID_OPTION', 'timeout')
  }
  for (const name of ['lock timeout string', 'lock options array']) {
    expect(memory, name, 'TypeError', 'HERDLESS_INVALID_OPTION')
  }
  // A long wait is no error (and the free lock is taken at once).
  assert.equal(memory['lock timeout of 300 years'].value, 'true')
})

// ---- Redis -------------------------------------------------------------------------------

const haveRedis = spawnSync('redis-server', ['--version']).status === 0
const skip = haveRedis ? false : 'redis-server is not on PATH'
let server
let port

test.before(async () => {
  if (!haveRedis) return
  ;({ server, port } = await startRedis())
})

test.after(() => {
  if (server) server.kill('SIGKILL')
})

/** One raw Redis command (RESP), for planting bytes; resolves with the reply's first line. */
function redis(...args) {
  return new Promise((resolve, reject) => {
    const parts = [Buffer.from(`*${args.length}\r\n`)]
    for (const a of args) {
      const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a))
      parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'))
    }
    const s = net.createConnection(port, '127.0.0.1', () => s.write(Buffer.concat(parts)))
    s.once('data', (d) => {
      resolve(d.toString().split('\r\n')[0])
      s.end()
    })
    s.on('error', reject)
  })
}

/** The Redis key of a value (PROTOCOL.md): <prefix>:{<namespace>}:v:<key>. */
const valueKey = (prefix, key) => `${prefix}:{${key.split(':')[0]}}:v:${key}`

/** A well-formed entry (PROTOCOL.md): magic, format 1, has-value, times, version 1, epoch 0. */
function entry(value) {
  const head = Buffer.alloc(52)
  head.write('hl', 0)
  head[2] = 1
  head[3] = 1
  const until = BigInt(Date.now() + 60_000)
  for (const [i, n] of [until, until, until + 60_000n, 0n, 1n, 0n].entries()) head.writeBigUInt64BE(n, 4 + 8 * i)
  return Buffer.concat([head, Buffer.from(value)])
}

test('values the codec cannot encode: set refuses them, a load serves them locally with a warning; nothing is written', { skip, timeout: 60_000 }, async () => {
  const prefix = `bad${process.pid}`
  const r = runCases(REDIS, `redis://127.0.0.1:${port}`, prefix)
  // A set would not reach the fleet: it is refused at once (the codec's reason in the
  // message), as in Rust and Python.
  expect(r, 'redis set bigint', 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'cannot be encoded by the cache\'s codec: JSON.stringify failed')
  expect(r, 'redis set cyclic', 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'circular')
  expect(r, 'redis set function', 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'JSON has no text for a function')
  expect(r, 'redis set undefined', 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'JSON has no text for undefined')
  expect(r, 'redis buffer codec set string', 'TypeError', 'HERDLESS_INVALID_ARGUMENT', 'Buffer or Uint8Array')
  // A loaded value is served in its process only, and the user is told.
  assert.equal(r['redis getOrLoad bigint'].value, '"bigint"', JSON.stringify(r['redis getOrLoad bigint']))
  assert.match(r['redis getOrLoad bigint'].warned, /cannot be encoded/, 'no warning')
  expect(r, 'redis set 10 MB key', 'RangeError', 'HERDLESS_KEY_TOO_LONG')
  // Over the Redis tier's entry limit (8 MiB): refused before Redis, with the reason.
  expect(r, 'redis set 16 MB value', 'Error', 'HERDLESS_BACKEND', 'max_entry_bytes')
  assert.equal(r['redis bump 10 MB'].value, '0', JSON.stringify(r['redis bump 10 MB']))
  // Longer than the tier can keep an entry (100 years).
  for (const name of ['redis set ttl of 300 years', 'redis getOrLoad ttl of 300 years']) {
    expect(r, name, 'RangeError', 'HERDLESS_INVALID_OPTION', 'longer than')
  }
  // The one key: the unshareable load's "load locally" mark on its lock (for one lease).
  assert.equal(await redis('DBSIZE'), ':1', 'nothing refused reached Redis')
  assert.equal(await redis('EXISTS', valueKey(prefix, 'r:9').replace(':v:', ':l:')), ':1')
  for (const key of ['r:1', 'r:2', 'r:3', 'r:6', 'r:7', 'r:8', 'r:9']) {
    assert.equal(await redis('EXISTS', valueKey(prefix, key)), ':0', `${key} reached Redis`)
  }
})

test('JavaScript planted in Redis is never run; __proto__ stays plain data', { skip, timeout: 20_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'herdless-eval-'))
  const marker = join(dir, 'pwned')
  try {
    const prefix = `ev${process.pid}`
    const cache = new Cache({ redis: `redis://127.0.0.1:${port}`, redisPrefix: prefix, jitter: 0, beta: 0 })
    const source = `(() => { require('fs').writeFileSync(${JSON.stringify(marker)}, 'x'); return 1 })()`
    await redis('SET', valueKey(prefix, 'e:raw'), source, 'PX', 60000)
    await redis('SET', valueKey(prefix, 'e:entry'), entry(source), 'PX', 60000)
    await redis('SET', valueKey(prefix, 'e:proto'), entry('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}'), 'PX', 60000)
    assert.equal(await cache.getOrLoad('e:raw', async () => 'loaded'), 'loaded')
    assert.equal(await cache.getOrLoad('e:entry', async () => 'loaded'), 'loaded')
    const v = await cache.getOrLoad('e:proto', async () => 'never')
    assert.equal(typeof v, 'object')
    assert.deepEqual(Object.keys(v).sort(), ['__proto__', 'constructor'])
    assert.equal({}.polluted, undefined, 'Object.prototype was polluted')
    assert.equal(v.polluted, undefined)
    assert.equal(existsSync(marker), false, 'bytes read from Redis ran code')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
