import type { Cache } from '../index'

/** Options of `register`. */
export interface RegisterOptions {
  /** The prom-client registry (default: prom-client's global `register`). */
  registry?: { registerMetric(metric: unknown): void }
  /** The label telling several caches apart (default `cache`). */
  label?: string
}

/**
 * Registers the metrics of a cache, or of several by name (`{ pages, sessions }`, each
 * series labelled `cache="pages"`...), with a prom-client registry: the families of
 * `cache.prometheus()`, read again at each scrape. Returns the registered metric names.
 */
export declare function register(target: Cache | Record<string, Cache>, options?: RegisterOptions): string[]
