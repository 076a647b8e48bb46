// The install smoke (CommonJS): single flight, isolated copies, ABSENT. Prints
// "cjs true 1 undefined <arch>".
const { Cache, ABSENT } = require('herdless')
const cache = new Cache({ ttl: 1000 })
let calls = 0
const load = async () => { calls++; await new Promise((r) => setTimeout(r, 20)); return { ok: true } }
Promise.all([cache.getOrLoad('a:1', load), cache.getOrLoad('a:1', load), cache.getOrLoad('b:1', async () => ABSENT)])
  .then(([x, y, z]) => console.log(`cjs ${x !== y && x.ok && y.ok} ${calls} ${z} ${process.arch}`))
