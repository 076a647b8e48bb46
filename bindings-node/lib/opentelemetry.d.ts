import type { Cache } from '../index'

/** Options of `instrument`. */
export interface InstrumentOptions {
  /** Default: the global MeterProvider of @opentelemetry/api. */
  meterProvider?: { getMeter(name: string, version?: string): any }
  /** Default: the global TracerProvider of @opentelemetry/api. */
  tracerProvider?: { getTracer(name: string, version?: string): any }
  /** Tells several caches apart: attribute `herdless.cache`. */
  name?: string
  /** A span (and a `herdless.load.duration` measurement) per loader call (default true). */
  spans?: boolean
  /** The key as the spans' `cache.key` (default true; keys may carry user data). */
  recordKeys?: boolean
}

/** What `instrument` set up. */
export interface Instrumentation {
  /** Stops the metrics and the spans of this cache. */
  uninstrument(): void
}

/**
 * Reports the cache's metrics through OpenTelemetry (observable instruments read at each
 * collection) and a `herdless.load` span per loader call; nothing on the hit path.
 */
export declare function instrument(cache: Cache, options?: InstrumentOptions): Instrumentation
