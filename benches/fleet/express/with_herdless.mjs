// The herdless fleet: the Node binding built from this tree (../../bindings-node), two tiers
// (this process's memory, then Redis), getOrLoad with the run's ttl.
import { createRequire } from 'node:module'
import { env, serve } from './catalog.mjs'

const { Cache } = createRequire(import.meta.url)('../../../bindings-node')
const cache = new Cache({ ttl: env.ttlMs, redis: env.redisUrl, redisPrefix: env.prefix })

serve((key, load) => cache.getOrLoad(key, load, { ttl: env.ttlMs }))
