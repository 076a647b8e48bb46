// Type checks of the integrations' declarations (lib/*.d.ts), as a TypeScript user imports
// them (run by `tsc --noEmit -p test/types`; never run).
import { Cache, ABSENT } from 'herdless'
import { cached, metrics } from 'herdless/express'
import herdlessPlugin = require('herdless/fastify')
import { register } from 'herdless/prometheus'
import { instrument } from 'herdless/opentelemetry'
import type { Instrumentation } from 'herdless/opentelemetry'

const cache = new Cache({ ttl: 60_000 })

interface Req {
  params: { id: string }
}
const route = cached<Req>(cache, { key: (req) => `items:v1:#${req.params.id}`, ttl: 1_000 }, async (req) =>
  req.params.id === '0' ? ABSENT : { id: Number(req.params.id) }
)
route({ params: { id: '1' } }, {}, () => undefined)
metrics(cache, new Cache())
// @ts-expect-error: the key is a function of the request
cached(cache, { key: 'items:1' }, async () => 1)

herdlessPlugin({}, { cache, metricsPath: '/metrics' }, (err?: Error) => void err)
// @ts-expect-error: the plugin needs a cache
herdlessPlugin({}, { metricsPath: '/metrics' }, () => undefined)

const names: string[] = register({ pages: cache }, { registry: { registerMetric() {} }, label: 'cache' })
void names

const handle: Instrumentation = instrument(cache, { name: 'pages', recordKeys: false })
handle.uninstrument()
// @ts-expect-error: spans is a boolean
instrument(cache, { spans: 'yes' })

// herdless/keyv and herdless/cache-manager
import { KeyvHerdless } from 'herdless/keyv'
import { createCache } from 'herdless/cache-manager'
const adapter = new KeyvHerdless(cache, { namespace: 'sessions' })
const owned = new KeyvHerdless({ ttl: 1_000, redis: 'redis://127.0.0.1:6379', keyv: 5 })
const stored: Promise<boolean> = adapter.set('a', '1', Date.now() + 1_000)
void stored
void owned.capabilities.expires
// @ts-expect-error: keyv is 5 or 6
new KeyvHerdless({ keyv: 4 })
const cm = createCache({ ttl: 60_000, refreshThreshold: 10_000, namespace: 'shop' })
const price: Promise<number> = cm.wrap('price:7', async () => 42, 1_000)
const raw: Promise<{ value: string; expires: number | undefined }> = cm.wrap('r', () => 'x', { raw: true })
void price
void raw
cm.on('set', () => undefined)
const same: KeyvHerdless = cm.stores[0]
void same
// @ts-expect-error: mget takes an array
cm.mget('a', 'b')
