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
