//! Watching a cache: metrics, events, the stampede detector's alerts and hot keys, the load observer, the JS front and the internals the tests read.

use napi::bindgen_prelude::{Env, This, Unknown};
use napi::{JsValue, Result};
use napi_derive::napi;

use crate::errors::type_error;
use crate::js::{Js, Type};
use crate::metrics::{Metrics, snapshot};

use super::Cache;

impl Cache {
    fn listen<'env>(
        &self,
        env: &'env Env,
        this: This<'env>,
        event: Unknown<'env>,
        listener: Unknown<'env>,
        once: bool,
    ) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let name = crate::events::Name::parse(js, event.raw())?;
        self.inner
            .listeners
            .add(js, Some(name), listener.raw(), once)?;
        self.inner.listening_changed();
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), this.object.raw()) })
    }
}

#[napi]
impl Cache {
    /// Counters, histograms and sizes at this moment, per namespace and in total.
    #[napi]
    pub fn metrics(&self) -> Metrics {
        self.inner.fold_front();
        let mut m = snapshot(&self.inner.l1.metrics());
        m.total.events_dropped += self.inner.wake.events_dropped() as f64;
        m.redis = self
            .inner
            .tt
            .shared_metrics()
            .map(|r| crate::metrics::redis(&r));
        m
    }

    /// Calls `listener` with a `CacheEvent` each time `event` happens: `'evict'`,
    /// `'expire'` (expired with no refresh), `'loadError'` or `'failSafe'`. Never on the
    /// hit path, and never making the cache wait: a listener runs on the event loop after
    /// the fact, and events that pile up faster than the event loop takes them are dropped
    /// (counted in `metrics().total.eventsDropped`). A listener that throws is reported
    /// with `process.emitWarning`. Returns the cache, like `EventEmitter.on`; an unknown
    /// event name throws a `TypeError` (code `HERDLESS_INVALID_ARGUMENT`).
    #[napi(
        ts_args_type = "event: CacheEventName, listener: (event: CacheEvent) => void",
        ts_return_type = "this"
    )]
    pub fn on<'env>(
        &self,
        env: &'env Env,
        this: This<'env>,
        event: Unknown<'env>,
        listener: Unknown<'env>,
    ) -> Result<Unknown<'env>> {
        self.listen(env, this, event, listener, false)
    }

    /// `on`, for the next such event only.
    #[napi(
        ts_args_type = "event: CacheEventName, listener: (event: CacheEvent) => void",
        ts_return_type = "this"
    )]
    pub fn once<'env>(
        &self,
        env: &'env Env,
        this: This<'env>,
        event: Unknown<'env>,
        listener: Unknown<'env>,
    ) -> Result<Unknown<'env>> {
        self.listen(env, this, event, listener, true)
    }

    /// Removes the listener added last with `on(event, listener)` (or `once`); nothing when
    /// there is none. Returns the cache. With no listener left, the cache makes no events.
    #[napi(
        ts_args_type = "event: CacheEventName, listener: (event: CacheEvent) => void",
        ts_return_type = "this"
    )]
    pub fn off<'env>(
        &self,
        env: &'env Env,
        this: This<'env>,
        event: Unknown<'env>,
        listener: Unknown<'env>,
    ) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let name = crate::events::Name::parse(js, event.raw())?;
        self.inner.listeners.remove(js, name, listener.raw())?;
        self.inner.listening_changed();
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), this.object.raw()) })
    }

    /// The metrics in Prometheus text exposition format.
    #[napi]
    pub fn prometheus(&self) -> String {
        self.inner.fold_front();
        self.inner.tt.prometheus()
    }

    /// The stampede detector's findings, oldest first: what (`kind`, `cause`), where
    /// (`namespace`, `key`), since when, the evidence and the likely `cures`. Alerts stay
    /// listed for 10 minutes after their condition last held (`active`: it holds now).
    #[napi]
    pub fn alerts(&self) -> Vec<crate::detector::Alert> {
        self.inner.fold_front();
        crate::detector::alerts(&self.inner.l1.alerts())
    }

    /// The `n` (default 100) most accessed keys, most first (counts are sampled estimates).
    #[napi]
    pub fn hot_keys(&self, n: Option<u32>) -> Vec<crate::detector::HotKey> {
        self.inner.fold_front();
        crate::detector::hot_keys(self.inner.l1.hot_keys(n.unwrap_or(100) as usize))
    }

    /// The `n` (default 1000) hottest keys as JSON, for `importHotKeys` in the next
    /// instance.
    #[napi]
    pub fn export_hot_keys(&self, n: Option<u32>) -> String {
        self.inner.fold_front();
        self.inner.l1.export_hot_keys(n.unwrap_or(1000) as usize)
    }

    /// Reads what `exportHotKeys` wrote into this cache's tracker and returns the keys,
    /// hottest first, ready for `warm`. Throws a `TypeError` (code
    /// `HERDLESS_INVALID_ARGUMENT`) on anything else.
    #[napi]
    pub fn import_hot_keys(&self, env: &Env, json: String) -> Result<Vec<String>> {
        self.inner.fold_front();
        match self.inner.l1.import_hot_keys(&json) {
            Ok(keys) => Ok(keys.into_iter().map(|k| k.key).collect()),
            Err(e) => Err(type_error(Js(env.raw()), &e.to_string())),
        }
    }

    /// Sets (or, with null, removes) the observer of loader calls (`herdless/opentelemetry`):
    /// each load calls `observer(key, background, fn, bound)`, which runs the loader `fn`
    /// (with `bound`, `[this, ...args]`, when given) and returns its result. Not a stable API.
    #[napi(
        js_name = "_setLoadObserver",
        ts_args_type = "observer: ((key: string, background: boolean, fn: (...args: unknown[]) => unknown, bound?: unknown[]) => unknown) | null"
    )]
    pub fn set_load_observer(&self, env: &Env, observer: Option<Unknown<'_>>) -> Result<()> {
        let js = Js(env.raw());
        let observer = match observer.map(|o| o.raw()) {
            None => None,
            Some(o) => match js.type_of(o)? {
                Type::Function => Some(o),
                Type::Null | Type::Undefined => None,
                _ => {
                    let message = "_setLoadObserver: the observer must be a function or null";
                    return Err(type_error(js, message));
                }
            },
        };
        self.inner.set_observer(js, observer)
    }

    /// The JS front's handles (`lib/front.js`): `{ info, stash, map, hit, frontable }`, or
    /// null when the `front` option is off. Not a stable API.
    #[napi(
        js_name = "_front",
        ts_return_type = "{ info: Int32Array; stash: unknown[]; map: Map<string, { value: unknown; slot: number }>; hit: (slot: number) => boolean; frontable: (options: unknown, names?: string[]) => boolean } | null"
    )]
    pub fn front<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let v = match &self.inner.front {
            None => js.null()?,
            Some(f) => {
                let (info, stash, map) = f.handles(js)?;
                let o = js.object()?;
                js.set(o, "info", info)?;
                js.set(o, "stash", stash)?;
                js.set(o, "map", map)?;
                js.set(o, "hit", crate::cache::fast::front_hit(js, &self.inner)?)?;
                let frontable = crate::cache::fast::front_options(js, &self.inner)?;
                js.set(o, "frontable", frontable)?;
                o
            }
        };
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), v) })
    }

    /// Internal counts for leak tests (values held, calls pending, loads in flight). Not a
    /// stable API.
    #[napi(js_name = "_internals")]
    pub fn internals(&self, env: &Env) -> Result<Internals> {
        let js = Js(env.raw());
        self.inner.run_woken(js)?;
        Ok(Internals {
            live_values: self.inner.table.live() as f64,
            pending_calls: self.inner.calls() as f64,
            flights: herdless::driver::flights_in_progress(&self.inner.l1) as f64,
        })
    }
}

/// See `Cache._internals()`.
#[napi(object)]
pub struct Internals {
    /// JS values the engine holds (entries, in-flight results).
    pub live_values: f64,
    /// `getOrLoad` calls not answered or still loading.
    pub pending_calls: f64,
    /// Keys loading now.
    pub flights: f64,
}
