// The install smoke (ESM): keys and a load. Prints "esm users:v1:profile:#42 Ada".
import { Cache, buildKey } from 'herdless'
const cache = new Cache()
const key = buildKey({ namespace: 'users', entity: 'profile', id: 42 })
console.log(`esm ${key} ${await cache.getOrLoad(key, async () => 'Ada')}`)
