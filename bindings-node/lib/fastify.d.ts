import type { Cache } from '../index'

/**
 * The Fastify plugin: a route whose `config.herdless` is set runs its handler inside
 * `cache.getOrLoad(config.herdless.key(request))`, so concurrent requests for one key run it
 * once; a handler returning `ABSENT` answers 404. The handler returns the body, after
 * `reply.code(...)` and headers if it likes: the status and the headers it set (never
 * `set-cookie`) are cached with it, and only a 2xx reply (`cacheStatus`) is stored. It must
 * not send with `reply` (only the leading request's handler runs): one that does is refused
 * with an error coded `HERDLESS_REPLY_SENT` and nothing is cached.
 */
declare function herdless(
  fastify: any,
  options: herdless.HerdlessPluginOptions,
  done: (err?: Error) => void,
): void

declare namespace herdless {
  /** Options of the plugin. */
  export interface HerdlessPluginOptions {
    /** The cache the routes answer through (also `app.herdless`). */
    cache: Cache
    /** Serves `cache.prometheus()` at this path when given (e.g. `/metrics`). */
    metricsPath?: string
  }

  /** A route's `config.herdless`: how its body is cached. */
  export interface HerdlessRouteConfig<Request = any> {
    /**
     * The cache key of a request. Default: `requestKey(request)`, the method, the path and
     * the query in canonical order under namespace `http`.
     */
    key?: (request: Request) => string
    /** With the default key: its namespace (default `http`). */
    namespace?: string
    /** With the default key: what else the answer depends on (the user, a header). */
    vary?: (request: Request) => Record<string, string | number | boolean>
    /** Milliseconds these entries stay fresh, instead of the cache's `ttl`. */
    ttl?: number
    /**
     * Which status codes are stored (default: 2xx). A reply of another status, or one with
     * `set-cookie` or `cache-control: private | no-store`, reaches the requests that waited
     * for its handler call and is not stored.
     */
    cacheStatus?: (statusCode: number) => boolean
  }

  /** The default cache key of a request (see herdless/express's `requestKey`). */
  export function requestKey(
    request: { method: string; url: string },
    options?: { namespace?: string; vary?: Record<string, string | number | boolean> },
  ): string

  export { herdless, herdless as default }
}

export = herdless
