'use strict'
// The front: repeated `get` / `getOrLoad` hits answered from a `Map` of recent answers,
// without copying the key into the engine. What may be kept, and for how long, is decided
// by the engine (src/front.rs): each answer has a slot there, and `hit(slot)` says whether
// the engine would give that answer now (no write since it was read, and its clock before
// the answer's deadline) and counts it as the engine's own hit. After a read this side
// reads `info[0]`: the slot the read filled (-1: none). The engine empties `map` itself
// when the write generation moves.

function installFront(cache) {
  const handles = cache._front()
  if (handles === null) return
  const { info, stash, hit, map } = handles
  const nativeGet = cache.get
  const nativeGetOrLoad = cache.getOrLoad
  // The key each slot holds, to forget it when the engine reuses the slot.
  const slotKeys = []

  function after(key, value) {
    const slot = info[0]
    if (slot < 0) return
    info[0] = -1
    const old = slotKeys[slot]
    if (old !== undefined) {
      const e = map.get(old)
      if (e !== undefined && e.slot === slot) map.delete(old)
    }
    slotKeys[slot] = key
    map.set(key, { value, slot })
  }

  function get(key) {
    const e = map.get(key)
    if (e !== undefined && hit(e.slot)) return e.value
    const v = nativeGet(key)
    if (info[0] >= 0) after(key, v)
    return v
  }

  function getOrLoad(key, loader, options) {
    if (options === undefined && typeof loader === 'function') {
      const e = map.get(key)
      if (e !== undefined && hit(e.slot)) return Promise.resolve(e.value)
    }
    const p = nativeGetOrLoad(key, loader, options)
    if (info[0] >= 0) {
      after(key, stash[0])
      stash[0] = undefined
    }
    return p
  }

  for (const [name, value] of [['get', get], ['getOrLoad', getOrLoad]]) {
    Object.defineProperty(cache, name, { value, writable: true, configurable: true, enumerable: false })
  }
}

module.exports = { installFront }
