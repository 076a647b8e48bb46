'use strict'
// The loader's context (issue #20): a loader that declares a parameter is told the key, why
// it loads, the value it may replace, and gets an AbortSignal; it answers lifetimes,
// metadata, "not modified" and "no cache".

const test = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const { Cache, ABSENT } = require('herdless')
const { sleep, within } = require('./helpers.js')

test('a loader with no parameter gets no argument', async () => {
  const cache = new Cache()
  let args
  const v = await cache.getOrLoad('k', (...a) => {
    args = a
    return 1
  })
  assert.equal(v, 1)
  assert.deepEqual(args, [])
})

test('the context tells the key, the reason and the previous value', async () => {
  const cache = new Cache({ ttl: 50, grace: 60_000 })
  const seen = []
  const load = async (ctx) => {
    seen.push({ key: ctx.key, reason: ctx.reason, previous: ctx.previous })
    assert.ok(ctx.signal instanceof AbortSignal)
    assert.equal(ctx.signal.aborted, false)
    ctx.meta = `v${seen.length}`
    return seen.length
  }
  assert.equal(await cache.getOrLoad('user:1', load), 1)
  assert.equal(seen[0].key, 'user:1')
  assert.equal(seen[0].reason, 'first')
  assert.equal(seen[0].previous, undefined)
  await sleep(80)
  // Stale within grace: served while the refresh runs with the previous value.
  assert.equal(await cache.getOrLoad('user:1', load), 1)
  await within(2000, (async () => {
    while (seen.length < 2) await sleep(5)
  })())
  assert.equal(seen[1].reason, 'refresh')
  assert.equal(seen[1].previous.value, 1)
  assert.equal(seen[1].previous.meta, 'v1')
  assert.ok(seen[1].previous.age >= 50, `age ${seen[1].previous.age} ms`)
})

test('setTtl gives each entry its own lifetime (1 s vs 1 h)', async () => {
  const cache = new Cache({ ttl: 60_000, jitter: 0 })
  let loads = 0
  const load = (ctx) => {
    loads++
    ctx.setTtl(ctx.key === 'short' ? 1000 : 3_600_000)
    return ctx.key
  }
  await cache.getOrLoad('short', load)
  await cache.getOrLoad('long', load)
  // freshUntilMs - ageMs: when each was stored plus its ttl, on the same clock.
  const short = cache.peek('short')
  const long = cache.peek('long')
  const lifetime = long.freshUntilMs - short.freshUntilMs
  assert.ok(Math.abs(lifetime - (3_600_000 - 1000)) < 100, `difference ${lifetime} ms`)
  assert.equal(short.state, 'fresh')
  await sleep(1100)
  assert.equal(cache.peek('short'), undefined)
  assert.equal(cache.peek('long').state, 'fresh')
  assert.equal(loads, 2)
})

test('a bad setTtl throws a typed error in the loader', async () => {
  const cache = new Cache()
  const errors = []
  await cache.getOrLoad('k', (ctx) => {
    // 1e-7 ms is under a nanosecond: it became the cache's own ttl before (issue 33 item 12).
    for (const bad of [0, -1, 'x', Infinity, 1e-7]) {
      try {
        ctx.setTtl(bad)
      } catch (e) {
        errors.push(e.code)
      }
    }
    return 1
  })
  assert.deepEqual(errors, Array(5).fill('HERDLESS_INVALID_ARGUMENT'))
})

test('noCache answers the callers and stores nothing', async () => {
  const cache = new Cache()
  let loads = 0
  const load = (ctx) => {
    loads++
    ctx.noCache()
    return 'fresh'
  }
  assert.equal(await cache.getOrLoad('k', load), 'fresh')
  assert.equal(await cache.getOrLoad('k', load), 'fresh')
  assert.equal(loads, 2)
  assert.equal(cache.get('k'), undefined)
})

test('notModified with no previous value rejects with HERDLESS_NO_PREVIOUS', async () => {
  const cache = new Cache()
  await assert.rejects(
    cache.getOrLoad('k', (ctx) => ctx.notModified()),
    { code: 'HERDLESS_NO_PREVIOUS' },
  )
})

test('a meta longer than 256 bytes rejects with HERDLESS_META_TOO_LONG', async () => {
  const cache = new Cache()
  await assert.rejects(
    cache.getOrLoad('k', (ctx) => {
      ctx.meta = 'x'.repeat(257)
      return 1
    }),
    { code: 'HERDLESS_META_TOO_LONG' },
  )
  assert.equal(cache.get('k'), undefined)
})

test('ABSENT with setNegativeTtl is a cached absence', async () => {
  const cache = new Cache()
  let loads = 0
  const load = (ctx) => {
    loads++
    ctx.setNegativeTtl(60_000)
    return ABSENT
  }
  assert.equal(await cache.getOrLoad('gone', load), undefined)
  assert.equal(await cache.getOrLoad('gone', load), undefined)
  assert.equal(loads, 1)
})

/** A local HTTP server answering 304 to a matching If-None-Match. */
async function etagServer() {
  const body = 'x'.repeat(10_000)
  const stats = { requests: 0, bytes: 0, notModified: 0 }
  const server = http.createServer((req, res) => {
    stats.requests++
    if (req.headers['if-none-match'] === '"v1"') {
      stats.notModified++
      res.writeHead(304, { etag: '"v1"' })
      return res.end()
    }
    stats.bytes += body.length
    res.writeHead(200, { etag: '"v1"', 'content-type': 'text/plain' })
    res.end(body)
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { server, stats, url: `http://127.0.0.1:${server.address().port}/` }
}

test('notModified against a real HTTP server: a 304 keeps the previous body', async () => {
  const { server, stats, url } = await etagServer()
  try {
    // A ttl long enough that the revalidated entry is still fresh at the last read.
    const cache = new Cache({ ttl: 300, grace: 60_000, jitter: 0 })
    let loads = 0
    const load = async (ctx) => {
      loads++
      const headers = {}
      if (ctx.previous?.meta) headers['if-none-match'] = ctx.previous.meta
      const res = await fetch(url, { headers, signal: ctx.signal })
      if (res.status === 304) return ctx.notModified()
      ctx.meta = res.headers.get('etag')
      return await res.text()
    }
    const first = await cache.getOrLoad('page', load)
    assert.equal(first.length, 10_000)
    await sleep(350)
    // Stale: served, refreshed in the background with If-None-Match.
    assert.equal((await cache.getOrLoad('page', load)).length, 10_000)
    await within(3000, (async () => {
      while (stats.notModified < 1 || cache.peek('page')?.state !== 'fresh') await sleep(5)
    })())
    assert.equal((await cache.getOrLoad('page', load)).length, 10_000)
    assert.equal(loads, 2)
    assert.equal(stats.requests, 2)
    assert.equal(stats.bytes, 10_000, 'the body crossed the wire once')
  } finally {
    server.close()
  }
})

test('fetch with ctx.signal aborts when every caller aborted; nothing is stored', async () => {
  let closed = 0
  const server = http.createServer((req) => {
    // Never answers: the load only ends by abort.
    req.socket.on('close', () => closed++)
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${server.address().port}/`
  try {
    const cache = new Cache()
    let aborted
    const loaderDone = new Promise((resolve) => {
      aborted = resolve
    })
    const load = async (ctx) => {
      try {
        return await fetch(url, { signal: ctx.signal })
      } catch (e) {
        aborted(e)
        throw e
      }
    }
    const a = new AbortController()
    const b = new AbortController()
    const p1 = cache.getOrLoad('slow', load, { signal: a.signal })
    const p2 = cache.getOrLoad('slow', load, { signal: b.signal })
    await sleep(50)
    a.abort()
    await assert.rejects(p1)
    await sleep(50)
    assert.equal(closed, 0, 'one caller still waits: the load goes on')
    b.abort()
    await assert.rejects(p2)
    const e = await within(2000, loaderDone, 'the loader abort')
    assert.equal(e.name, 'AbortError')
    await within(2000, (async () => {
      while (closed < 1) await sleep(5)
    })(), 'the connection close')
    assert.equal(cache.get('slow'), undefined)
  } finally {
    server.close()
  }
})

test('a cancelled load never stores its value', async () => {
  const cache = new Cache()
  let release
  const gate = new Promise((resolve) => {
    release = resolve
  })
  let signal
  const c = new AbortController()
  const p = cache.getOrLoad('k', async (ctx) => {
    signal = ctx.signal
    await gate
    return 'late'
  }, { signal: c.signal })
  await sleep(10)
  c.abort()
  await assert.rejects(p)
  await within(2000, (async () => {
    while (!signal.aborted) await sleep(5)
  })(), 'the signal abort')
  release()
  await sleep(20)
  assert.equal(cache.get('k'), undefined)
})

test('a write supersedes a running load: its signal aborts', async () => {
  const cache = new Cache()
  let signal
  let release
  const gate = new Promise((resolve) => {
    release = resolve
  })
  const p = cache.getOrLoad('k', async (ctx) => {
    signal = ctx.signal
    await gate
    return 'old'
  })
  await sleep(10)
  await cache.set('k', 'new')
  await within(2000, (async () => {
    while (!signal.aborted) await sleep(5)
  })(), 'the signal abort')
  release()
  await p
  assert.equal(cache.get('k'), 'new')
})

test('the hard timeout aborts the signal', async () => {
  const cache = new Cache({ hardTimeout: 100 })
  let signal
  const p = cache.getOrLoad('k', (ctx) => {
    signal = ctx.signal
    // A real loader's I/O keeps the process alive; this one's is a long timer.
    return new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, 10_000, 'too late')
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer)
        reject(ctx.signal.reason)
      })
    })
  })
  await assert.rejects(p, { code: 'HERDLESS_LOAD_TIMEOUT' })
  await within(2000, (async () => {
    while (!signal.aborted) await sleep(5)
  })(), 'the signal abort')
  assert.equal(cache.get('k'), undefined)
})

test('an observer sees a context loader called with its context', async () => {
  const cache = new Cache()
  const seen = []
  cache._setLoadObserver((key, background, fn, bound) => {
    seen.push(key)
    return bound === undefined ? fn() : fn.apply(bound[0], bound.slice(1))
  })
  assert.equal(await cache.getOrLoad('obs', (ctx) => ctx.key.toUpperCase()), 'OBS')
  assert.deepEqual(seen, ['obs'])
})

test('refreshAhead refreshes a fresh entry in the background, reason refreshAhead', async () => {
  const cache = new Cache({ ttl: 400, jitter: 0, beta: 0, refreshAhead: 0.5 })
  const reasons = []
  let n = 0
  const load = (ctx) => {
    reasons.push(ctx.reason)
    return ++n
  }
  assert.equal(await cache.getOrLoad('k', load), 1)
  assert.equal(await cache.getOrLoad('k', load), 1)
  assert.deepEqual(reasons, ['first'])
  await sleep(250)
  // Fresh, past half its ttl: served at once, refreshed behind it.
  assert.equal(await cache.getOrLoad('k', load), 1)
  await within(2000, (async () => {
    while (cache.get('k') !== 2) await sleep(5)
  })(), 'the refresh ahead')
  assert.deepEqual(reasons, ['first', 'refreshAhead'])
})

test('a refreshAhead outside (0, 1) is refused', () => {
  for (const bad of [0, 1, 1.5]) {
    assert.throws(() => new Cache({ refreshAhead: bad }), { code: 'HERDLESS_INVALID_OPTION' })
  }
})
