//! Metrics, per namespace: counters and histograms of atomics, a snapshot API
//! ([`MetricsSnapshot`]) and Prometheus text exposition ([`MetricsSnapshot::to_prometheus`]).

mod histogram;
pub(crate) mod prometheus;

use alloc::string::String;
use alloc::vec::Vec;

pub(crate) use self::histogram::BUCKETS;
pub(crate) use self::histogram::Histogram;
pub use self::histogram::HistogramSnapshot;

/// At most this many namespaces are labels of the exposition (the most requested ones);
/// the others are summed under [`OTHER_NAMESPACE`]. Namespaces can come from request input
/// (a URL used as a key is its own namespace), and each label is a series per metric.
pub const MAX_LABELLED_NAMESPACES: usize = 100;

/// The `namespace` label of what the exposition sums: namespaces past
/// [`MAX_LABELLED_NAMESPACES`] and those whose name is not a plain word (letters, digits,
/// `_`, `-`, `.`; at most 64 bytes), which is what a URL or a token used as a key looks like.
pub const OTHER_NAMESPACE: &str = "(other)";

use crate::sync::{AtomicU64, CachePadded, Ordering};

/// Stripes of the counters touched on the hit path, so threads reading different shards do
/// not fight over one cache line.
const STRIPES: usize = 8;

/// A counter split over cache-line-padded stripes; the total is their sum.
#[derive(Default)]
pub(crate) struct Striped([CachePadded<AtomicU64>; STRIPES]);

impl Striped {
    #[inline]
    /// Adds one; returns the stripe's count before (the hot-key tracker samples on it).
    pub(crate) fn add(&self, stripe: usize) -> u64 {
        self.0[stripe % STRIPES].0.fetch_add(1, Ordering::Relaxed)
    }
    /// Adds `n`; returns the stripe's count before.
    pub(crate) fn add_n(&self, stripe: usize, n: u64) -> u64 {
        self.0[stripe % STRIPES].0.fetch_add(n, Ordering::Relaxed)
    }
    fn get(&self) -> u64 {
        self.0.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }
}

/// A counter off the hit path: one atomic.
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    #[inline]
    pub(crate) fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

macro_rules! counters {
    (
        striped { $($s:ident: $shelp:literal,)* }
        plain { $($p:ident: $phelp:literal,)* }
    ) => {
        /// The live counters of one namespace.
        #[derive(Default)]
        pub(crate) struct Counters {
            $(pub(crate) $s: Striped,)*
            $(pub(crate) $p: Counter,)*
        }

        impl Counters {
            /// Adds `other`'s counts to these (a retired namespace's, kept in the sum).
            fn absorb(&self, other: &Counters) {
                $(self.$s.0[0].0.fetch_add(other.$s.get(), Ordering::Relaxed);)*
                $(self.$p.add(other.$p.get());)*
            }

            fn snapshot(&self) -> CounterSnapshot {
                CounterSnapshot {
                    $($s: self.$s.get(),)*
                    $($p: self.$p.get(),)*
                }
            }
        }

        /// Counter values of one namespace at one moment.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct CounterSnapshot {
            $(#[doc = $shelp] pub $s: u64,)*
            $(#[doc = $phelp] pub $p: u64,)*
        }

        impl CounterSnapshot {
            /// Every counter as (name, help, value), in a stable order.
            pub fn fields(&self) -> [(&'static str, &'static str, u64); counters!(@count $($s)* $($p)*)] {
                [$((stringify!($s), $shelp, self.$s),)* $((stringify!($p), $phelp, self.$p),)*]
            }

            fn add(&mut self, other: &CounterSnapshot) {
                $(self.$s += other.$s;)*
                $(self.$p += other.$p;)*
            }
        }
    };
    (@count) => { 0 };
    (@count $head:ident $($tail:ident)*) => { 1 + counters!(@count $($tail)*) };
}

counters! {
    striped {
        hits: "Lookups answered by a fresh value.",
        negative_hits: "Lookups answered by a cached absence (negative caching).",
        stale_served: "Lookups answered by a stale value within grace while one refresh runs.",
    }
    plain {
        misses: "Lookups with nothing servable: the caller led a load or waited for one.",
        expired_misses: "Misses that found the key's entry expired (past ttl + grace).",
        cold_misses: "Misses that found neither an entry nor a load of the key.",
        failsafe_served: "Answers with stale data past grace because a load failed or timed out.",
        loads: "Loader calls started (origin requests).",
        load_errors: "Loader calls that failed (errors and panics).",
        load_timeouts: "Loads abandoned at their hard timeout.",
        abandoned_loads: "Loads whose leader went away without an answer; a waiter took over.",
        coalesced_waiters: "Callers that waited for another caller's load (stampedes prevented).",
        lock_acquired: "Loads led: the caller won the key's flight.",
        batch_loads: "Batch loader calls (get_or_load_many) that loaded keys of this namespace; each of their keys is also one of `loads`.",
        lock_contended: "Lookups that found the key's flight already taken.",
        wait_timeouts: "Waiters that gave up after wait_timeout.",
        early_refreshes: "XFetch refreshes started before expiry.",
        ahead_refreshes: "Refresh-ahead refreshes started at the configured share of the ttl.",
        refreshes: "Background refreshes started (stale-while-revalidate, XFetch and refresh-ahead).",
        not_modified: "Loads answered 'not modified': the previous value kept, its lifetime restarted.",
        backend_errors: "Errors of the shared tier (e.g. Redis).",
        evictions: "Entries evicted to stay within capacity.",
        admission_rejections: "New keys not stored because the admission filter (Admission::TinyLfu) found them less frequent than the entry they would have evicted; their callers were answered all the same.",
        retired_namespaces: "Namespace records retired to stay within max_namespaces (their entries became misses).",
        events_dropped: "Events the listener's queue could not take (full or busy).",
    }
}

/// The live metrics of one namespace.
#[derive(Default)]
pub(crate) struct NsMetrics {
    pub(crate) counters: Counters,
    pub(crate) load_duration: Histogram,
    pub(crate) lock_wait: Histogram,
}

impl NsMetrics {
    /// Keeps `other`'s counts in these (its histograms are not kept).
    pub(crate) fn absorb(&self, other: &NsMetrics) {
        self.counters.absorb(&other.counters);
    }

    pub(crate) fn snapshot(&self, namespace: &str) -> NamespaceMetrics {
        NamespaceMetrics {
            namespace: namespace.into(),
            counters: self.counters.snapshot(),
            load_duration: self.load_duration.snapshot(),
            lock_wait: self.lock_wait.snapshot(),
        }
    }
}

/// Metrics of one namespace at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NamespaceMetrics {
    /// The namespace: the key's text before its first `:`, or the whole key when it has
    /// none (such a key is its own namespace).
    pub namespace: String,
    /// Counters.
    pub counters: CounterSnapshot,
    /// Duration of loader calls, successful or not.
    pub load_duration: HistogramSnapshot,
    /// Time waiters spent waiting for another caller's load: from each waiter's arrival to
    /// the load's end (when it answered), or to the waiter's own end when the load failed
    /// or the waiter left first (its timeout, a fail-safe value).
    pub lock_wait: HistogramSnapshot,
}

/// All metrics of a cache at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsSnapshot {
    /// Per namespace, sorted by name.
    pub namespaces: Vec<NamespaceMetrics>,
    /// Entries held (values and cached absences).
    pub entries: u64,
    /// Their total weight (entries, unless a weigher is set).
    pub weight: u64,
    /// Loads running now.
    pub loads_in_flight: u64,
    /// Tag records held now (at most [`Builder::max_tags`](crate::Builder::max_tags)).
    pub tags: u64,
    /// Tags invalidated (hard: their entries became misses), one per tag of each call.
    pub tag_invalidations: u64,
    /// Tags expired (soft: their entries became stale), one per tag of each call.
    pub tag_expirations: u64,
    /// Tag records retired to stay within `max_tags` (their entries became misses).
    pub retired_tags: u64,
}

impl MetricsSnapshot {
    /// Counters summed over all namespaces.
    pub fn total(&self) -> CounterSnapshot {
        let mut t = CounterSnapshot::default();
        for ns in &self.namespaces {
            t.add(&ns.counters);
        }
        t
    }

    /// The metrics of one namespace, if it has any.
    pub fn namespace(&self, name: &str) -> Option<&NamespaceMetrics> {
        self.namespaces.iter().find(|n| n.namespace == name)
    }
}
