// A NestJS shop with herdless under CACHE_MANAGER (herdless/cache-manager), in plain JS (the
// decorators applied as functions). Run it: `REDIS_URL=redis://127.0.0.1:6379 node app.mjs`
// (PORT, default 3000; ORIGIN_URL: the catalog service, default a built-in slow one).
//
// - ProductsController injects CACHE_MANAGER and calls `wrap`: herdless's getOrLoad, so a
//   herd of requests on a cold product costs ONE origin call, across every process sharing
//   the Redis (cache-manager's own wrap coalesces within one process only).
// - PagesController uses SafeCacheInterceptor, @nestjs/cache-manager's CacheInterceptor with
//   herdless's rules for HTTP: keys from `requestKey` (herdless/express: one `http`
//   namespace, the query in canonical order, a long query hashed, so request input cannot
//   grow the key space or make namespaces), and a reply that is one client's
//   (`privateReply`: Set-Cookie, Cache-Control private / no-store) is never stored.
import 'reflect-metadata'
import {
  Controller,
  Get,
  Header,
  Inject,
  Injectable,
  Module,
  NotFoundException,
  BadRequestException,
  Param,
  Query,
  Res,
  UseInterceptors,
} from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { CACHE_KEY_METADATA, CACHE_MANAGER, CACHE_TTL_METADATA, CacheInterceptor, CacheTTL } from '@nestjs/cache-manager'
import { HEADERS_METADATA } from '@nestjs/common/constants.js'
import { of, tap } from 'rxjs'
import { createCache } from 'herdless/cache-manager'
import { privateReply, requestKey } from 'herdless/express'

/** The token of the catalog service (the slow origin). */
export const ORIGIN = Symbol('ORIGIN')

// Decorators as functions: `method(Class, 'name', [methodDecorators], [[param 0's], ...])`.
function method(cls, name, decorators, params = []) {
  const proto = cls.prototype
  params.forEach((decs, index) => decs.forEach((d) => d(proto, name, index)))
  const descriptor = Object.getOwnPropertyDescriptor(proto, name)
  Object.defineProperty(proto, name, Reflect.decorate(decorators, proto, name, descriptor))
}

/**
 * CacheInterceptor with herdless's HTTP rules: the key is `requestKey(req)` (or the route's
 * @CacheKey), GET only; the reply is stored only when it is 2xx and not private (its headers,
 * and the route's @Header ones, which Nest sets after the interceptors).
 */
export class SafeCacheInterceptor extends CacheInterceptor {
  trackBy(context) {
    const fixed = this.reflector.get(CACHE_KEY_METADATA, context.getHandler())
    if (fixed !== undefined) return typeof fixed === 'function' ? fixed(context) : fixed
    const req = context.switchToHttp().getRequest()
    return this.isRequestCacheable(context) ? requestKey(req) : undefined
  }

  async intercept(context, next) {
    const key = this.trackBy(context)
    if (!key) return next.handle()
    const res = context.switchToHttp().getResponse()
    const hit = await this.cacheManager.get(key)
    if (hit !== undefined && hit !== null) {
      res.setHeader('X-Cache', 'HIT')
      return of(hit)
    }
    res.setHeader('X-Cache', 'MISS')
    const ttl = this.reflector.get(CACHE_TTL_METADATA, context.getHandler()) ?? this.reflector.get(CACHE_TTL_METADATA, context.getClass())
    const routeHeaders = {}
    for (const { name, value } of this.reflector.get(HEADERS_METADATA, context.getHandler()) ?? []) {
      routeHeaders[name.toLowerCase()] = value
    }
    return next.handle().pipe(
      tap(async (body) => {
        const status = res.statusCode
        if (status < 200 || status >= 300 || privateReply({ ...res.getHeaders(), ...routeHeaders })) return
        await this.cacheManager.set(key, body, typeof ttl === 'function' ? await ttl(context) : ttl ?? undefined)
      })
    )
  }
}
Injectable()(SafeCacheInterceptor)

/** `/products/:id`: the injected CACHE_MANAGER's `wrap`, one origin call per cold product. */
export class ProductsController {
  constructor(cache, origin) {
    this.cache = cache
    this.origin = origin
  }

  async product(id) {
    const n = Number(id)
    if (!Number.isSafeInteger(n) || n < 0) throw new BadRequestException('a product id is a whole number')
    // null ("no such product") is cached too, so a flood of 404s does not reach the origin.
    const product = await this.cache.wrap(`product:${n}`, () => this.origin.get(`/products/${n}`), 60_000)
    if (product === null) throw new NotFoundException()
    return product
  }
}
Controller('products')(ProductsController)
Inject(CACHE_MANAGER)(ProductsController, undefined, 0)
Inject(ORIGIN)(ProductsController, undefined, 1)
method(ProductsController, 'product', [Get(':id')], [[Param('id')]])

/** `/pages/...`: answers cached by SafeCacheInterceptor, and the two it must never share. */
export class PagesController {
  constructor(origin) {
    this.origin = origin
  }

  catalog(query) {
    return this.origin.get(`/catalog?${new URLSearchParams(query)}`)
  }

  // Sets a cookie: this reply is one client's.
  async me(res) {
    const session = Math.random().toString(36).slice(2)
    res.cookie('session', session)
    return { ...(await this.origin.get('/me')), session }
  }

  // Cache-Control: private, through Nest's @Header.
  async account() {
    return this.origin.get('/account')
  }
}
Controller('pages')(PagesController)
Inject(ORIGIN)(PagesController, undefined, 0)
UseInterceptors(SafeCacheInterceptor)(PagesController)
CacheTTL(30_000)(PagesController)
method(PagesController, 'catalog', [Get('catalog')], [[Query()]])
method(PagesController, 'me', [Get('me')], [[Res({ passthrough: true })]])
method(PagesController, 'account', [Get('account'), Header('Cache-Control', 'private, max-age=60')])

/** `/metrics`: herdless's metrics (Prometheus text) of the cache under CACHE_MANAGER. */
export class MetricsController {
  constructor(cache) {
    this.cache = cache
  }

  metrics() {
    return this.cache.cache.prometheus()
  }
}
Controller('metrics')(MetricsController)
Inject(CACHE_MANAGER)(MetricsController, undefined, 0)
method(MetricsController, 'metrics', [Get(), Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')])

/** The catalog service at `url` (JSON over HTTP; 404 answers null). */
export function httpOrigin(url) {
  return {
    async get(path) {
      const r = await fetch(url + path)
      if (r.status === 404) return null
      if (!r.ok) throw new Error(`origin: ${r.status}`)
      return r.json()
    },
  }
}

/** A stand-in catalog service: ~200 ms per call. */
export function fakeOrigin() {
  return {
    async get(path) {
      await new Promise((r) => setTimeout(r, 200))
      const m = /^\/products\/(\d+)$/.exec(path)
      if (m) return Number(m[1]) === 404 ? null : { id: Number(m[1]), name: `Product ${m[1]}` }
      return { path, at: new Date().toISOString() }
    },
  }
}

/**
 * The Nest application: CACHE_MANAGER is herdless's cache-manager (its Redis tier at
 * `redis`, when given), ORIGIN the catalog service.
 */
export async function createApp({ redis, origin = fakeOrigin(), logger = false } = {}) {
  const cacheManager = createCache({ ttl: 60_000, grace: 30_000, namespace: 'shop', ...(redis ? { redis } : {}) })
  class AppModule {}
  Module({
    controllers: [ProductsController, PagesController, MetricsController],
    providers: [
      { provide: CACHE_MANAGER, useValue: cacheManager },
      { provide: ORIGIN, useValue: origin },
    ],
  })(AppModule)
  const app = await NestFactory.create(AppModule, { logger })
  app.enableShutdownHooks()
  const close = app.close.bind(app)
  app.close = async () => {
    await close()
    await cacheManager.disconnect()
  }
  return app
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const origin = process.env.ORIGIN_URL ? httpOrigin(process.env.ORIGIN_URL) : fakeOrigin()
  const app = await createApp({ redis: process.env.REDIS_URL, origin, logger: ['error', 'warn'] })
  const port = Number(process.env.PORT ?? 3000)
  await app.listen(port, '127.0.0.1')
  console.log(`listening on ${await app.getUrl()}`)
}
