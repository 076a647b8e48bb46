import type { Cache } from '../index'

/** Options of `cached`. */
export interface CachedRouteOptions<Req> {
  /** The cache key of a request (e.g. from `buildKey`). */
  key: (req: Req) => string
  /** Milliseconds these entries stay fresh, instead of the cache's `ttl`. */
  ttl?: number
}

/** An Express handler: `(req, res, next)`. */
export type Handler<Req = any, Res = any> = (req: Req, res: Res, next: (err?: unknown) => void) => void

/**
 * An Express handler answering `handler(req)`'s body (sent with `res.json`) through
 * `cache.getOrLoad(options.key(req))`: concurrent requests for one key run the handler once.
 * A body of `ABSENT` (cached for `negativeTtl`) answers 404. The handler must not write to
 * `res` (only the leading request's handler runs).
 */
export declare function cached<Req = any, Res = any>(
  cache: Cache,
  options: CachedRouteOptions<Req>,
  handler: (req: Req) => unknown,
): Handler<Req, Res>

/** An Express handler answering the caches' `prometheus()` text (for `/metrics`). */
export declare function metrics<Req = any, Res = any>(...caches: Cache[]): Handler<Req, Res>
