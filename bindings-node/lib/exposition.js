'use strict'
// Reads the Prometheus text that `cache.prometheus()` writes (the engine decides every name,
// help text, type and label) into families, for the integrations that re-expose it
// (prom-client) — so no metric is named twice.

function unescape(s) {
  return s.replace(/\\(["\\n])/g, (_, c) => (c === 'n' ? '\n' : c))
}

/**
 * The families of an exposition: `[{ name, help, type, samples: [{ name, labels, value }] }]`,
 * in order. A histogram's `_bucket`, `_sum` and `_count` samples belong to its family.
 */
function parse(text) {
  const families = []
  const byName = new Map()
  let current = null
  const family = (name) => {
    let f = byName.get(name)
    if (!f) {
      f = { name, help: '', type: 'untyped', samples: [] }
      byName.set(name, f)
      families.push(f)
    }
    return f
  }
  for (const line of text.split('\n')) {
    if (!line) continue
    let m
    if ((m = /^# HELP (\S+) (.*)$/.exec(line))) {
      current = family(m[1])
      current.help = m[2].replace(/\\(\\|n)/g, (_, c) => (c === 'n' ? '\n' : c))
    } else if ((m = /^# TYPE (\S+) (\S+)$/.exec(line))) {
      current = family(m[1])
      current.type = m[2]
    } else if (line.startsWith('#')) {
      continue
    } else if ((m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line))) {
      const labels = {}
      for (const l of (m[2] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[l[1]] = unescape(l[2])
      }
      const owner = current && m[1].startsWith(current.name) ? current : family(m[1])
      owner.samples.push({ name: m[1], labels, value: Number(m[3]) })
    }
  }
  return families
}

module.exports = { parse }
