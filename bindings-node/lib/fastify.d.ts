import type { Cache } from '../index'

/**
 * The Fastify plugin: a route whose `config.herdless` is set runs its handler inside
 * `cache.getOrLoad(config.herdless.key(request))`, so concurrent requests for one key run it
 * once; a handler returning `ABSENT` answers 404. The handler returns the body and must not
 * send with `reply` (only the leading request's handler runs).
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
    /** The cache key of a request. */
    key: (request: Request) => string
    /** Milliseconds these entries stay fresh, instead of the cache's `ttl`. */
    ttl?: number
  }

  export { herdless, herdless as default }
}

export = herdless
