import type { Cache } from '../index'

/** Options of `requestKey`. */
export interface RequestKeyOptions {
  /** The namespace of every such key (default `http`). */
  namespace?: string
  /** What else the answer depends on (e.g. `{ user: req.user.id }`), as named key parts. */
  vary?: Record<string, string | number | boolean>
}

/** Options of `cached`. */
export interface CachedRouteOptions<Req> {
  /**
   * The cache key of a request (e.g. from `buildKey`). Default: `requestKey(req)`, the
   * method, the path and the query in canonical order under namespace `http`.
   */
  key?: (req: Req) => string
  /** With the default key: its namespace (default `http`). */
  namespace?: string
  /** With the default key: what else the answer depends on (the user, a header). */
  vary?: (req: Req) => Record<string, string | number | boolean>
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
  options: CachedRouteOptions<Req> | undefined,
  handler: (req: Req) => unknown,
): Handler<Req, Res>

/** An Express handler answering the caches' `prometheus()` text (for `/metrics`). */
export declare function metrics<Req = any, Res = any>(...caches: Cache[]): Handler<Req, Res>

/**
 * The default cache key of a request: namespace `options.namespace` (default `http`), the
 * method and the path (HEAD as GET), the query sorted by name then value (a query over 256
 * bytes as its SHA-256), and `options.vary` as named parts. Keys made from request input
 * never become namespaces (nor metric labels).
 */
export declare function requestKey(req: { method: string; originalUrl?: string; url: string }, options?: RequestKeyOptions): string

/**
 * Whether a reply with these headers (as `res.getHeaders()` gives them) must never be stored
 * for others, as the engine decides it in every language (`httpKeeps`): it sets a cookie
 * (`set-cookie`), its `cache-control` says `private`, `no-store`, `no-cache` or a zero
 * max-age, or it `Vary`-s on `*` or on a request header not in `vary` (the request headers
 * whose values the key holds; none by default). herdless/fastify never stores such a reply;
 * use it where your own code decides what to store (a NestJS interceptor).
 */
export declare function privateReply(headers: Record<string, unknown>, vary?: string[]): boolean
