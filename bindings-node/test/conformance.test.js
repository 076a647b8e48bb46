'use strict'
// The Node runner of the conformance scenarios (conformance/*.json at the repository root;
// the format is in its README): each scenario is played on the in-memory tier
// (`memory://<name>`, faults through `testing.memoryStore`), when it lists `memcached` on a
// private memcached, and when it lists `redis`, on a private redis-server started here (faults: `down` kills it, `up` restarts it on the same
// port, `stall` is SIGSTOP and the next `up` SIGCONT). Rust (redis/tests/conformance.rs)
// and Python run the same files and must give the same outcome.
//
// CONFORMANCE=<name> plays one scenario. Without redis-server the Redis tier is skipped,
// with the reason, except under CI=true, where that fails.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync } = require('node:child_process')
const { mkdtempSync, readdirSync, readFileSync, rmSync } = require('node:fs')
const net = require('node:net')
const { tmpdir } = require('node:os')
const { join } = require('node:path')
const { ABSENT, Cache, testing } = require('herdless')
const { freePort, sleep, stopProcess } = require('./helpers.js')
const { Memcached, haveMemcached } = require('./memcached_support.js')

const dir = join(__dirname, '..', '..', 'conformance')
const scenarios = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => [f.slice(0, -'.json'.length), JSON.parse(readFileSync(join(dir, f), 'utf8'))])
  .filter(([name]) => !process.env.CONFORMANCE || process.env.CONFORMANCE === name)

const haveRedis = spawnSync('redis-server', ['--version']).status === 0
const ci = process.env.CI === 'true'
if (!haveRedis && !ci) console.warn('SKIPPED: redis-server not found on PATH; the Redis tier of the conformance scenarios did not run')

test('the scenarios are there', () => {
  if (!process.env.CONFORMANCE) assert.ok(scenarios.length >= 10, `${scenarios.length} scenarios in ${dir}`)
  assert.ok(haveRedis || !ci, 'redis-server is not installed, and CI=true requires the Redis tier to run')
  assert.ok(haveMemcached || !ci, 'memcached is not installed, and CI=true requires the memcached tier to run')
})

// ---- the scenario's own words -----------------------------------------------------------

/** `cache` of a scenario as `new Cache` options: jitter 0 and XFetch off, so lifetimes are exact. */
const OPTIONS = {
  ttl_ms: 'ttl',
  grace_ms: 'grace',
  negative_ttl_ms: 'negativeTtl',
  tti_ms: 'tti',
  wait_timeout_ms: 'waitTimeout',
  lease_ms: 'lease',
  max_stale_ms: 'maxStale',
  hard_timeout_ms: 'hardTimeout',
}

function cacheOptions(cfg = {}) {
  const options = { jitter: 0, beta: 0 }
  for (const [field, v] of Object.entries(cfg)) {
    assert.ok(OPTIONS[field], `unknown cache option ${field}`)
    if (v !== null) options[OPTIONS[field]] = v
  }
  return options
}

/** A scenario's value: `{"$unshareable": true}` is one JSON cannot encode (a BigInt in it). */
const valueOf = (v) => (v !== null && typeof v === 'object' && v.$unshareable ? { unshareable: 1n } : v)

/** The error a scenario's failing loader throws. */
class LoaderError extends Error {}

/** The kind of an error, as the scenarios name them. */
function kind(e) {
  if (e instanceof LoaderError) return 'load'
  return { HERDLESS_BACKEND: 'backend', HERDLESS_WAIT_TIMEOUT: 'wait_timeout', HERDLESS_LOAD_TIMEOUT: 'load_timeout', HERDLESS_NO_PREVIOUS: 'no_previous', HERDLESS_META_TOO_LONG: 'meta_too_long', HERDLESS_INVALID_TAG: 'invalid_tag', HERDLESS_TOO_MANY_TAGS: 'too_many_tags' }[e?.code] ?? 'other'
}

/** How `promise` ended, and when. */
const outcome = (promise) =>
  promise.then(
    (value) => ({ ok: true, value, at: performance.now() }),
    (error) => ({ ok: false, error, at: performance.now() })
  )

/** A context-aware loader's answer shaped by the step's `answer` (a null `value`: absent). */
function answer(ctx, step) {
  const a = step.answer ?? {}
  if (a.ttl_ms !== undefined) ctx.setTtl(a.ttl_ms)
  if (a.grace_ms !== undefined) ctx.setGrace(a.grace_ms)
  if (a.negative_ttl_ms !== undefined) ctx.setNegativeTtl(a.negative_ttl_ms)
  if (a.tti_ms !== undefined) ctx.setTti(a.tti_ms)
  if (a.meta !== undefined) ctx.meta = a.meta
  if (a.tags !== undefined) ctx.setTags(a.tags)
  if (a.no_cache) ctx.noCache()
  if (a.not_modified) return ctx.notModified()
  return step.value === null ? ABSENT : valueOf(step.value)
}

/** Checks what the step's loader was told against its `expect_context`. */
function checkContext(at, step, told) {
  const seen = told.filter((t) => t.at === step)
  assert.equal(seen.length, 1, `${at}: the loader ran ${seen.length} times`)
  const { reason, previous } = seen[0].ctx
  const want = step.expect_context
  const names = { earlyRefresh: 'early_refresh', refreshAhead: 'refresh_ahead' }
  if ('reason' in want) assert.equal(names[reason] ?? reason, want.reason, `${at}: reason`)
  if ('previous' in want) assert.deepEqual(previous?.value ?? null, want.previous, `${at}: previous`)
  if ('meta' in want) assert.equal(previous?.meta ?? null, want.meta, `${at}: meta`)
}

/** Checks an outcome against the step's `expect` / `expect_error` / `within_ms` / `after_ms`. */
function check(at, step, got, since) {
  const show = (e) => `${e?.code ?? ''} ${e?.message ?? e}`
  if ('expect_error' in step) {
    assert.ok(!got.ok, `${at}: expected an error, got ${JSON.stringify(got.value, (_, v) => (typeof v === 'bigint' ? `${v}n` : v))}`)
    assert.equal(kind(got.error), step.expect_error, `${at}: ${show(got.error)}`)
  } else {
    assert.ok(got.ok, `${at}: ${show(got.error)}`)
    if ('expect' in step) assert.deepEqual(got.value === undefined ? null : got.value, step.expect, at)
  }
  if (step.within_ms !== undefined) {
    const took = got.at - since
    assert.ok(took <= step.within_ms, `${at}: took ${took.toFixed(0)} ms`)
  }
  if (step.after_ms !== undefined) {
    const took = got.at - since
    assert.ok(took >= step.after_ms, `${at}: answered after ${took.toFixed(0)} ms`)
  }
}

/** `backend_errors` -> `backendErrors`. */
const camel = (field) => field.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase())

function expectCounter(at, field, want, got) {
  if (typeof want === 'number') return assert.equal(got, want, `${at}: ${field}`)
  const min = Number(/^>=(\d+)$/.exec(want)?.[1])
  assert.ok(Number.isInteger(min), `${at}: bad expectation ${want} for ${field}`)
  assert.ok(got >= min, `${at}: ${field} = ${got}, expected ${want}`)
}

// ---- the tiers ----------------------------------------------------------------------------

let stores = 0

class MemoryTier {
  constructor() {
    this.name = `conformance-${process.pid}-${++stores}`
    this.store = testing.memoryStore(this.name)
  }

  process(cfg) {
    return new Cache({ ...cacheOptions(cfg), redis: `memory://${this.name}` })
  }

  // `fault` of the whole tier, or with `ns` of that namespace's slot alone (its Cluster node).
  async fault(fault, ns) {
    const faults = { down: 'down', stall: 'stall', lose_notifications: 'lose_notifications', bus_down: 'bus_down', up: null }
    assert.ok(fault in faults, `unknown fault ${fault}`)
    this.store.setFault(faults[fault], ns)
  }

  async plant(step) {
    if (step.op === 'plant') this.store.plant(step.key, step.bytes)
    else if (step.op === 'plant_epoch') this.store.plantEpoch(step.ns, step.text)
    else this.store.plantLock(step.key, step.ms)
  }

  /** `plant_tag` (raw `text`, or with `wrong_type` a key of another type) and `evict_tag`. */
  async plantTag(step) {
    if (step.op === 'evict_tag') this.store.evictTag(step.tag)
    else if (step.wrong_type) this.store.plantTagWrongType(step.tag)
    else this.store.plantTag(step.tag, step.text)
  }

  /** `outside_delete` (the value deleted by a program that is not herdless) and `outside_flush` (`FLUSHDB`). */
  async outside(step) {
    if (step.op === 'outside_flush') this.store.flush()
    else this.store.deleteRaw(step.key)
  }

  resubscribe() {
    this.store.restartSubscriptions()
  }

  async close() {}
}

/** One Redis command over a fresh connection (RESP); resolves with the reply. */
function command(port, ...args) {
  return new Promise((resolve, reject) => {
    const parts = [`*${args.length}\r\n`]
    for (const a of args) parts.push(`$${Buffer.byteLength(String(a))}\r\n${a}\r\n`)
    const s = net.createConnection(port, '127.0.0.1', () => s.write(parts.join('')))
    let data = ''
    s.setTimeout(2000, () => s.destroy(new Error(`redis on ${port} did not answer ${args[0]}`)))
    s.on('data', (d) => {
      data += d
      const reply = parseReply(data)
      if (reply === undefined) return
      s.end()
      if (reply instanceof Error) reject(reply)
      else resolve(reply)
    })
    s.on('error', reject)
  })
}

/** A complete RESP reply of a simple type, or undefined while it is incomplete. */
function parseReply(data) {
  const end = data.indexOf('\r\n')
  if (end < 0) return undefined
  const [type, line] = [data[0], data.slice(1, end)]
  if (type === '+') return line
  if (type === '-') return new Error(line)
  if (type === ':') return Number(line)
  if (type === '$') {
    const n = Number(line)
    if (n < 0) return null
    const body = data.slice(end + 2)
    return Buffer.byteLength(body) >= n + 2 ? body.slice(0, n) : undefined
  }
  return new Error(`unexpected reply ${JSON.stringify(data)}`)
}

/** A private redis-server on `port`, killed, stopped and restarted by pid. */
class Server {
  constructor(port) {
    this.port = port
    this.dir = mkdtempSync(join(tmpdir(), 'herdless-conformance-'))
    this.child = null
    this.url = `redis://127.0.0.1:${port}`
  }

  async start() {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir]
    const child = spawn('redis-server', args, { stdio: 'ignore' })
    this.child = child
    child.exited = new Promise((resolve) => child.once('exit', resolve))
    const until = Date.now() + 10_000
    for (;;) {
      try {
        if ((await command(this.port, 'PING')) === 'PONG') return
      } catch {}
      assert.ok(Date.now() < until, `redis-server on ${this.port} did not start`)
      await sleep(20)
    }
  }

  async kill() {
    const child = this.child
    this.child = null
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await child.exited
    }
  }

  signal(sig) {
    this.child.kill(sig)
  }
}

let prefixes = 0

class RedisTier {
  static async start() {
    const server = new Server(await freePort())
    await server.start()
    return new RedisTier(server)
  }

  constructor(server) {
    this.server = server
    this.prefix = `c${process.pid}x${++prefixes}`
    this.stopped = false
  }

  process(cfg) {
    return new Cache({ ...cacheOptions(cfg), redis: this.server.url, redisPrefix: this.prefix })
  }

  // `bus`: the notice connections are down (`bus_down`).
  async fault(fault, ns, bus) {
    assert.ok(ns === undefined, "a namespace's fault is memory only (one server has one node)")
    const port = this.server.port
    const subscribing = ['psubscribe', 'ssubscribe', 'subscribe']
    // The notice connections are killed, and their resubscription refused until `up` (so the
    // gap lasts until then, however fast they reconnect).
    if (fault === 'bus_down') {
      await command(port, 'ACL', 'SETUSER', 'default', ...subscribing.map((c) => `-${c}`))
      await command(port, 'CLIENT', 'KILL', 'TYPE', 'pubsub')
    } else if (fault === 'up' && bus) await command(port, 'ACL', 'SETUSER', 'default', ...subscribing.map((c) => `+${c}`))
    else if (fault === 'down') await this.server.kill()
    else if (fault === 'stall') await stopProcess(this.server.child)
    else if (fault === 'up' && this.server.child) this.server.signal('SIGCONT')
    else if (fault === 'up') await this.server.start()
    else assert.fail(`fault ${fault} is not available on Redis`)
  }

  /** The names of PROTOCOL.md section 1: `<prefix>:{<tag>}:v:<key>`, `:l:<key>`, `:e`. */
  names(key) {
    const i = key.indexOf(':')
    const ns = i < 0 ? key : key.slice(0, i)
    const tag = ns === '' ? '%' : ns.replace(/%/g, '%25').replace(/\{/g, '%7B').replace(/\}/g, '%7D')
    const at = `${this.prefix}:{${tag}}`
    return { value: `${at}:v:${key}`, lock: `${at}:l:${key}`, epoch: `${at}:e` }
  }

  /** The name of an entry tag's record: `<prefix>:{t:<escaped tag>}:t`. */
  tagKey(tag) {
    return `${this.prefix}:{t:${tag.replace(/%/g, '%25').replace(/\{/g, '%7B').replace(/\}/g, '%7D')}}:t`
  }

  /** `plant_tag` (raw `text`, or with `wrong_type` a list) and `evict_tag` (the record deleted). */
  async plantTag(step) {
    const port = this.server.port
    const name = this.tagKey(step.tag)
    await command(port, 'DEL', name)
    if (step.wrong_type) await command(port, 'LPUSH', name, 'x')
    else if (step.op !== 'evict_tag') await command(port, 'SET', name, step.text)
  }

  async plant(step) {
    const port = this.server.port
    if (step.op === 'plant') return command(port, 'SET', this.names(step.key).value, step.bytes)
    if (step.op === 'plant_epoch') return command(port, 'SET', this.names(step.ns).epoch, step.text)
    const n = this.names(step.key)
    const epoch = (await command(port, 'GET', n.epoch)) ?? '0'
    return command(port, 'SET', n.lock, `${epoch}:${'0'.repeat(32)}`, 'PX', step.ms)
  }

  /** `outside_delete` (`DEL` of the value, by a program that is not herdless) and `outside_flush` (`FLUSHDB`). */
  async outside(step) {
    const port = this.server.port
    if (step.op === 'outside_flush') return command(port, 'FLUSHDB')
    return command(port, 'DEL', this.names(step.key).value)
  }

  resubscribe() {
    assert.fail('resubscribe is memory only')
  }

  async close() {
    if (this.server.child) this.server.signal('SIGCONT')
    await this.server.kill()
    rmSync(this.server.dir, { recursive: true, force: true })
  }
}

/** A private memcached: faults as Redis's; planted state by raw meta commands, same names. */
class MemcachedTier extends RedisTier {
  static async start() {
    return new MemcachedTier(await Memcached.start())
  }

  async fault(fault, ns, bus) {
    assert.ok(ns === undefined && !bus, 'memcached has one node and no bus')
    if (fault === 'down') await this.server.kill()
    else if (fault === 'stall') await stopProcess(this.server.child)
    else if (fault === 'up' && this.server.child) this.server.signal('SIGCONT')
    else if (fault === 'up') await this.server.start()
    else assert.fail(`fault ${fault} is not available on memcached`)
  }

  async plant(step) {
    if (step.op === 'plant') return this.server.put(this.names(step.key).value, step.bytes)
    if (step.op === 'plant_epoch') return this.server.put(this.names(step.ns).epoch, step.text)
    return this.server.plantLease(this.names(step.key).value, step.ms)
  }

  async close() {
    if (this.server.child) this.server.signal('SIGCONT')
    await this.server.kill()
  }
}

// ---- playing a scenario -------------------------------------------------------------------

/** Waits until the tier counter `counter` of every process passed its value in `before`. */
async function waitFor(procs, before, counter, what) {
  const until = Date.now() + 10_000
  for (const [i, p] of procs.entries()) {
    while (p.metrics().redis[counter] <= before[i]) {
      assert.ok(Date.now() < until, what)
      await sleep(5)
    }
  }
}

/** After the tier comes back, every process reaches it again (a probe write succeeds). */
async function waitUntilReachable(procs) {
  const until = Date.now() + 10_000
  for (const p of procs) {
    for (;;) {
      try {
        await p.set('conformance-probe:k', null)
        break
      } catch (e) {
        assert.ok(Date.now() < until, `the tier did not come back: ${e.message}`)
        await sleep(50)
      }
    }
  }
}

async function play(name, scenario, tier) {
  const procs = Array.from({ length: scenario.processes ?? 1 }, () => tier.process(scenario.cache))
  let loads = 0
  // How far a process has got: loads run, fleet locks asked for, tier errors.
  const progress = (p) => {
    const t = p.metrics().redis
    return `${loads}/${t ? t.fleetLocksAcquired + t.fleetLocksContended + t.backendErrors : 0}`
  }
  const call = (p, step) =>
    step.keys === undefined
      ? outcome(
        p.getOrLoad(step.key, step.answer === undefined && step.expect_context === undefined
          ? async () => {
            loads++
            await sleep(step.ms ?? 0)
            if (step.fail !== undefined) throw new LoaderError(step.fail)
            return valueOf(step.value)
          }
          : async (ctx) => {
            loads++
            told.push({ at: step, ctx: { reason: ctx.reason, previous: ctx.previous } })
            await sleep(step.ms ?? 0)
            if (step.fail !== undefined) throw new LoaderError(step.fail)
            return answer(ctx, step)
          })
      )
      : callMany(p, step)
  // A batch: the loader answers the keys it is asked for that `values` has (null: absent);
  // a failed batch's answer is its first failed key's error; absences read as null.
  const callMany = (p, step) =>
    outcome(
      p.getOrLoadMany(step.keys, async (asked) => {
        loads++
        await sleep(step.ms ?? 0)
        if (step.fail !== undefined) throw new LoaderError(step.fail)
        const values = step.values ?? {}
        return new Map(asked.filter((k) => k in values).map((k) => [k, values[k] === null ? ABSENT : valueOf(values[k])]))
      }).then(
        (got) => got.map((v) => (v === undefined ? null : v)),
        (e) => { throw e.code === 'HERDLESS_BATCH' ? e.values.find((v) => v instanceof Error) : e }
      )
    )
  // What each context-aware loader was told (load_context), checked by `expect_context`.
  const told = []
  const running = new Map()
  // While the bus is down: each process's `noticesLost` when it went down.
  let bus = null
  try {
    for (const [i, step] of scenario.steps.entries()) {
      const at = `${name} step ${i}: ${JSON.stringify(step)}`
      const p = procs[step.p ?? 0]
      const started = performance.now()
      switch (step.op) {
        case 'get_or_load':
        case 'get_or_load_many':
          check(at, step, await call(p, step), started)
          if (step.expect_context !== undefined) checkContext(at, step, told)
          break
        case 'load':
        case 'load_many':
        {
          const before = progress(p)
          running.set(step.id, { started, calls: Array.from({ length: step.callers ?? 1 }, () => call(p, step)) })
          // Let the calls reach the fleet before the next step: one of them loads, or asked the
          // fleet for a lock (a loaded machine can take longer than any fixed pause); then a
          // moment for the step's other callers.
          const until = Date.now() + 2000
          while (progress(p) === before && Date.now() < until) await sleep(2)
          await sleep(20)
          break
        }
        case 'await': {
          const load = running.get(step.id)
          assert.ok(load, `${at}: no load ${step.id}`)
          running.delete(step.id)
          for (const got of await Promise.all(load.calls)) check(at, step, got, load.started)
          break
        }
        case 'get':
          check(at, step, await outcome(p.read(step.key)), started)
          break
        case 'set':
          check(at, step, await outcome(p.set(step.key, valueOf(step.value), step.tags === undefined ? undefined : { tags: step.tags })), started)
          break
        case 'invalidate_tag': {
          const soft = { soft: step.soft ?? false }
          for (let i = 0; i < (step.repeat ?? 1); i++) {
            const call = step.tags !== undefined ? p.invalidateTags(step.tags, soft) : p.invalidateTag(step.tag, soft)
            check(at, step, await outcome(call), started)
          }
          break
        }
        case 'invalidate':
          check(at, step, await outcome(p.invalidate(step.key)), started)
          break
        case 'bump':
          check(at, step, await outcome(p.bump(step.ns)), started)
          break
        case 'sleep':
          await sleep(step.ms)
          break
        case 'fault': {
          const drops = procs.map((q) => q.metrics().redis.subscriptionDrops)
          await tier.fault(step.fault, step.ns, bus !== null)
          if (step.fault === 'bus_down') {
            // Every process saw its subscription drop before the scenario goes on.
            await waitFor(procs, drops, 'subscriptionDrops', 'the bus drop was not seen')
            bus = procs.map((q) => q.metrics().redis.noticesLost)
          }
          if (step.fault === 'up') {
            await waitUntilReachable(procs)
            if (bus !== null) {
              // Every subscription was confirmed again (and the gap counted lost).
              await waitFor(procs, bus, 'noticesLost', 'the bus was not repaired')
              bus = null
            }
          }
          break
        }
        case 'resubscribe':
          tier.resubscribe()
          break
        case 'plant':
        case 'plant_epoch':
        case 'plant_lock':
          await tier.plant(step)
          break
        case 'plant_tag':
        case 'evict_tag':
          await tier.plantTag(step)
          break
        case 'outside_delete':
        case 'outside_flush':
          await tier.outside(step)
          break
        case 'expect_loads':
          assert.equal(loads, step.n, `${at}: loads`)
          break
        case 'expect_metrics': {
          const m = p.metrics()
          const counters = m.namespaces.find((n) => n.namespace === step.ns)?.counters
          for (const [field, want] of Object.entries(step.l1 ?? {})) {
            assert.ok(camel(field) in m.total, `${at}: no L1 counter ${field}`)
            expectCounter(at, `l1 ${field}`, want, counters?.[camel(field)] ?? 0)
          }
          for (const [field, want] of Object.entries(step.tier ?? {})) {
            assert.equal(typeof m.redis?.[camel(field)], 'number', `${at}: no tier counter ${field}`)
            expectCounter(at, `tier ${field}`, want, m.redis[camel(field)])
          }
          break
        }
        default:
          assert.fail(`${at}: unknown op ${step.op}`)
      }
    }
  } finally {
    // Every call ends (each is bounded by a timeout) before the tier goes away.
    await Promise.all([...running.values()].flatMap((l) => l.calls))
    await tier.close()
  }
}

// The optional features of the format (conformance/README.md, `requires`) this runner plays.
const SUPPORTED = new Set(['load_context', 'tags', 'tti', 'outside_writes'])

for (const [name, scenario] of scenarios) {
  const missing = (scenario.requires ?? []).filter((f) => !SUPPORTED.has(f))
  const unsupported = missing.length ? `this runner does not support ${missing.join(', ')} yet` : false
  test(`${name} (memory)`, { skip: unsupported, timeout: 60_000 }, () => play(name, scenario, new MemoryTier()))
  if ((scenario.tiers ?? []).includes('redis')) {
    const skip = unsupported || (haveRedis ? false : 'redis-server is not on PATH')
    test(`${name} (redis)`, { skip, timeout: 60_000 }, async () => play(name, scenario, await RedisTier.start()))
  }
  if ((scenario.tiers ?? []).includes('memcached')) {
    const skip = unsupported || (haveMemcached ? false : 'memcached is not on PATH')
    test(`${name} (memcached)`, { skip, timeout: 60_000 }, async () => play(name, scenario, await MemcachedTier.start()))
  }
}
