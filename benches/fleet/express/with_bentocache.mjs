// The bentocache fleet, as its documentation sets up a multi-tier store for several
// instances: memory L1, Redis L2, and the Redis bus that keeps the L1s coherent; getOrSet
// with the run's ttl (its stampede protection is on by default).
import { BentoCache, bentostore } from 'bentocache'
import { memoryDriver } from 'bentocache/drivers/memory'
import { redisBusDriver, redisDriver } from 'bentocache/drivers/redis'
import { env, serve } from './catalog.mjs'

const url = new URL(env.redisUrl)
const connection = { host: url.hostname, port: Number(url.port), db: Number(url.pathname.slice(1) || 0) }
const bento = new BentoCache({
  default: 'fleet',
  prefix: env.prefix,
  stores: {
    fleet: bentostore()
      // maxItems as herdless's default capacity (10,000), over bentocache's default of
      // 1,000: the key mix must fit both L1s alike.
      .useL1Layer(memoryDriver({ maxSize: '10mb', maxItems: 10_000 }))
      .useL2Layer(redisDriver({ connection }))
      .useBus(redisBusDriver({ connection })),
  },
})

serve((key, load) => bento.getOrSet({ key, factory: load, ttl: env.ttlMs }))
