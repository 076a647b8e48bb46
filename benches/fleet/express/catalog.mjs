// The Express app of every Express fleet of benches/fleet: one product page read through a
// cache from PostgreSQL. The contenders (with_*.mjs) differ only in the `cached(key, load)`
// function they hand to `serve`; the origin, the route and the answer are these.
//
// Configured by the driver (./run) through the environment:
//   PORT, PG_URL, REDIS_URL (redis://host:port/db), FLEET_PREFIX (this run's Redis key
//   prefix), TTL_MS, ORIGIN_SLEEP_MS (latency the query adds, as a real one would have).
import express from 'express'
import pg from 'pg'

export const env = {
  port: Number(process.env.PORT),
  redisUrl: process.env.REDIS_URL,
  prefix: process.env.FLEET_PREFIX,
  ttlMs: Number(process.env.TTL_MS),
}

// The origin: a real query over a pool (the same size in every worker of every contender).
const pool = new pg.Pool({ connectionString: process.env.PG_URL, max: 10 })
const sleepSeconds = Number(process.env.ORIGIN_SLEEP_MS) / 1000
let queries = 0
export async function product(id) {
  queries++
  const { rows } = await pool.query(
    'SELECT id, name, price::float8 AS price, description FROM fleet_products, pg_sleep($2) WHERE id = $1',
    [id, sleepSeconds]
  )
  return rows[0] ?? null
}

/** Serves the fleet's routes with `cached(key, load)`, the contender's cache call. */
export function serve(cached) {
  const app = express()
  app.set('etag', false) // an ETag hash per answer is the same cost for all: left out
  app.get('/products/:id', async (req, res) => {
    const id = Number(req.params.id)
    const found = await cached(`products:${id}`, () => product(id))
    if (found == null) res.status(404).json({ error: 'no such product' })
    else res.json(found)
  })
  // Read by the driver after the CPU times were taken: how often the cache reached the origin.
  app.get('/_origin', (_req, res) => res.json({ queries }))
  app.listen(env.port, '127.0.0.1')
  // The driver stops workers with SIGTERM; exiting normally lets --cpu-prof write its profile.
  process.on('SIGTERM', () => process.exit(0))
}
