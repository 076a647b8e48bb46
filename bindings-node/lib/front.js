'use strict'
// The front: repeated `get` / `getOrLoad` hits answered from a `Map` of recent answers,
// without copying the key into the engine. What may be kept, and for how long, is decided
// by the engine (src/front.rs): each answer has a slot there, and `hit(slot)` says whether
// the engine would give that answer now (no write since it was read, and its clock before
// the answer's deadline) and counts it as the engine's own hit. After a read this side
// reads `info[0]`: the slot the read filled (-1: none). The engine empties `map` itself
// when the write generation moves. A `getOrLoad` with options is served only when the
// engine's own check of them, `frontable(options)`, says that the engine would take its
// hit path for that call (valid options, no `signal`).

function installFront(cache) {
  const handles = cache._front()
  if (handles === null) return
  const { info, stash, hit, map, frontable } = handles
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

  // The options objects `frontable` passed twice, so that a hoisted options object is
  // checked by the engine's code twice, not at every hit. A remembered object with a
  // `signal` added since goes to the engine (which answers calls with a signal itself);
  // other changes to it are checked by the next call that reaches the engine (a miss).
  // `recent` holds the last few that passed once: an object literal written in the call is
  // new each time, and remembering it in the WeakMap cost more than its check.
  const passed = new WeakMap()
  const recent = [undefined, undefined, undefined, undefined]
  let next = 0

  function mayServe(options) {
    if (passed.get(options) === true) return options.signal === undefined
    // `names`: what the engine's check would list itself (own enumerable string keys).
    const names = typeof options === 'object' && options !== null ? Object.keys(options) : undefined
    if (!frontable(options, names)) return false
    if (recent[0] === options || recent[1] === options || recent[2] === options || recent[3] === options) {
      passed.set(options, true)
    } else {
      recent[next] = options
      next = (next + 1) & 3
    }
    return true
  }

  function getOrLoad(key, loader, options) {
    if (typeof loader === 'function') {
      const e = map.get(key)
      if (e !== undefined && (options === undefined || mayServe(options)) && hit(e.slot)) {
        return Promise.resolve(e.value)
      }
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
