'use strict'
// The defaults index.d.ts states for the options the engine decides ("(default N)") are the
// engine's: defaults() reads them from it (herdless::Builder, DetectorOptions,
// DEFAULT_WARM_CONCURRENCY), so a doc that drifts from the engine fails here.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Cache, defaults } = require('herdless')

const dts = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8')

/** The doc comment of each field of `interface name` in index.d.ts. */
function fieldDocs(name) {
  const start = dts.indexOf(`export interface ${name} {`)
  assert.ok(start >= 0, `interface ${name} in index.d.ts`)
  const body = dts.slice(start, dts.indexOf('\n}\n', start))
  const docs = new Map()
  for (const m of body.matchAll(/\/\*\*([\s\S]*?)\*\/\s*(\w+)\??:/g)) {
    docs.set(m[2], m[1].replace(/\n\s*\*/g, ' '))
  }
  return docs
}

/** The number a doc states as its default ("(default 5000)", "(...; default 0: off)"). */
function statedDefault(doc) {
  const m = doc.match(/\bdefault (-?\d[\d_]*(?:\.\d+)?)\b/)
  return m ? Number(m[1].replace(/_/g, '')) : undefined
}

test('defaults() are the engine\'s, in Node units', () => {
  const d = defaults()
  assert.equal(d.ttl, 60_000)
  assert.equal(d.maxNamespaces, 4096)
  assert.equal(d.warmConcurrency, 4)
  assert.notEqual(defaults(), defaults(), 'a new object each call')
  for (const [k, v] of Object.entries({ ...d, ...d.detector })) {
    if (k !== 'detector') assert.equal(typeof v, 'number', k)
  }
})

test('every "(default N)" of an engine-decided option in index.d.ts is the engine\'s', () => {
  const d = defaults()
  const checked = new Set()
  const check = (iface, field, want, what) => {
    const doc = fieldDocs(iface).get(field)
    assert.ok(doc, `${iface}.${field} is documented`)
    assert.equal(statedDefault(doc), want, `${iface}.${field}: the doc says "${doc.trim()}", the engine's default is ${want}`)
    checked.add(what)
  }
  for (const [key, want] of Object.entries(d)) {
    if (key === 'detector' || key === 'warmConcurrency') continue
    check('CacheOptions', key, want, key)
  }
  for (const [key, want] of Object.entries(d.detector)) {
    check('DetectorOptions', key, want, `detector.${key}`)
  }
  check('CacheOptions', 'detectorTick', d.detector.tick, 'detectorTick')
  check('WarmOptions', 'concurrency', d.warmConcurrency, 'warmConcurrency')
  assert.ok(checked.size >= Object.keys(d).length - 1 + Object.keys(d.detector).length)
})

test('a cache built without options runs on those defaults', async () => {
  const d = defaults()
  const cache = new Cache()
  // The longest key accepted is maxKeyLen bytes.
  assert.equal(await cache.getOrLoad('k'.repeat(d.maxKeyLen), async () => 1), 1)
  await assert.rejects(cache.getOrLoad('k'.repeat(d.maxKeyLen + 1), async () => 1), { code: 'HERDLESS_KEY_TOO_LONG', max: d.maxKeyLen })
  cache.close()
})
