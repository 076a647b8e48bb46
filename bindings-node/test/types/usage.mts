// The ES module entry has the same types.
import herdless, { ABSENT, Cache, FleetLock, testing } from 'herdless'

const cache: Cache = new herdless.Cache({ ttl: 1000 })
const v: string | undefined = await cache.getOrLoad('esm:1', async (): Promise<string | typeof ABSENT> => ABSENT)
void v
const store: testing.MemoryStore = herdless.testing.memoryStore('esm')
store.setFault(null)
const lock: FleetLock | null = await cache.tryLock('esm:lock')
void (lock instanceof herdless.FleetLock)
