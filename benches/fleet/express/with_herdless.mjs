// The herdless fleet: the Node binding built from this tree (../../bindings-node), two tiers
// (this process's memory, then Redis), getOrLoad with the run's ttl.
//
// FLEET_HERDLESS_TTL=cache (the contender `herdless-default-ttl`) sets that ttl on the Cache
// and calls getOrLoad(key, load) without options, as examples/express does: only such calls
// are answered by the binding's JS front (lib/front.js); a call with an options object goes
// to the engine on every hit.
import { createRequire } from 'node:module'
import { env, serve } from './catalog.mjs'

const { Cache } = createRequire(import.meta.url)('../../../bindings-node')
const cache = new Cache({ ttl: env.ttlMs, redis: env.redisUrl, redisPrefix: env.prefix })
const options = { ttl: env.ttlMs }

serve(
  process.env.FLEET_HERDLESS_TTL === 'cache'
    ? (key, load) => cache.getOrLoad(key, load)
    : (key, load) => cache.getOrLoad(key, load, options)
)
