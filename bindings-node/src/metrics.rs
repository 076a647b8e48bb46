//! `cache.metrics()`: the engine's snapshot as a plain object, in camelCase and
//! milliseconds.

use herdless::{CounterSnapshot, HistogramSnapshot};
use herdless::{MetricsSnapshot, NamespaceMetrics};
use napi_derive::napi;

/// Counters of one namespace (or of all).
#[napi(object, object_from_js = false)]
pub struct Counters {
    /// Lookups answered by a fresh value.
    pub hits: f64,
    /// Lookups answered by a cached absence (negative caching).
    pub negative_hits: f64,
    /// Lookups answered by a stale value within grace while one refresh runs.
    pub stale_served: f64,
    /// Lookups with nothing servable: the caller led a load or waited for one.
    pub misses: f64,
    /// Misses that found the key's entry expired (past ttl + grace).
    pub expired_misses: f64,
    /// Misses that found neither an entry nor a load of the key.
    pub cold_misses: f64,
    /// Answers with stale data past grace because a load failed or timed out.
    pub failsafe_served: f64,
    /// Loader calls started (origin requests).
    pub loads: f64,
    /// Loader calls that failed.
    pub load_errors: f64,
    /// Loads abandoned at their hard timeout.
    pub load_timeouts: f64,
    /// Loads whose leader went away without an answer; a waiter took over.
    pub abandoned_loads: f64,
    /// Callers that waited for another caller's load (stampedes prevented).
    pub coalesced_waiters: f64,
    /// Loads led: the caller won the key's flight.
    pub lock_acquired: f64,
    /// Batch loader calls (`getOrLoadMany`) that loaded keys of this namespace; each of
    /// their keys is also one of `loads`.
    pub batch_loads: f64,
    /// Lookups that found the key's flight already taken.
    pub lock_contended: f64,
    /// Waiters that gave up after `waitTimeout`.
    pub wait_timeouts: f64,
    /// XFetch refreshes started before expiry.
    pub early_refreshes: f64,
    /// Background refreshes started (stale-while-revalidate and XFetch).
    pub refreshes: f64,
    /// Loads answered "not modified" (`ctx.notModified()`): the previous value kept, its
    /// lifetime restarted.
    pub not_modified: f64,
    /// Errors of the shared tier.
    pub backend_errors: f64,
    /// Entries evicted to stay within capacity.
    pub evictions: f64,
    /// New keys not kept because the admission filter (`admission: true`) found them less
    /// frequent than the entry they would have evicted; their callers were answered.
    pub admission_rejections: f64,
    /// Events (`cache.on`) dropped because listeners fell behind: the engine's queue was
    /// full, or (in `total` only) the way to the event loop was.
    pub events_dropped: f64,
}

/// A latency histogram.
#[napi(object, object_from_js = false, use_nullable = true)]
pub struct Histogram {
    /// Number of observations.
    pub count: f64,
    /// Sum of all observations, in milliseconds.
    pub sum_ms: f64,
    /// Upper bounds of the buckets in milliseconds (a last, unbounded bucket follows).
    pub bounds_ms: Vec<f64>,
    /// Observations per bucket (not cumulative), one more than `boundsMs`.
    pub counts: Vec<f64>,
    /// Median estimate (a bucket's upper bound) in milliseconds; null when empty.
    pub p50_ms: Option<f64>,
    /// 99th percentile estimate in milliseconds; null when empty.
    pub p99_ms: Option<f64>,
}

/// Metrics of one namespace.
#[napi(object, object_from_js = false)]
pub struct NamespaceStats {
    /// The namespace (a key's text before its first ':').
    pub namespace: String,
    /// Its counters.
    pub counters: Counters,
    /// Duration of loader calls.
    pub load_duration: Histogram,
    /// Time waiters spent waiting for another caller's load.
    pub lock_wait: Histogram,
}

/// Counters of the shared tier (this process's view of the fleet).
#[napi(object, object_from_js = false)]
pub struct RedisCounters {
    /// Reads answered by a fresh entry in Redis.
    pub l2_hits: f64,
    /// Reads that found only an entry within grace in Redis.
    pub l2_stale: f64,
    /// Reads that found nothing servable in Redis.
    pub l2_misses: f64,
    /// Unreadable shared state found (a miss; repaired where the protocol says how): bytes
    /// that are no entry, value bytes the codec cannot decode, a corrupt epoch.
    pub corrupt_entries: f64,
    /// Loaded values the codec could not encode: served in their process only.
    pub unshareable_values: f64,
    /// Redis operations that failed or timed out.
    pub backend_errors: f64,
    /// Fleet locks won: this process loaded for the fleet.
    pub fleet_locks_acquired: f64,
    /// Lock attempts that found another process loading.
    pub fleet_locks_contended: f64,
    /// Round trips of batch loads' lock requests (one pipeline per Cluster slot group).
    pub batch_round_trips: f64,
    /// Lease extensions while a loader ran.
    pub lease_extensions: f64,
    /// Leases found lost.
    pub leases_lost: f64,
    /// Locks handed back at the hard timeout while their loader still ran.
    pub leases_cut: f64,
    /// Entries written to Redis.
    pub commits: f64,
    /// Reads of entries with a time-to-idle told to Redis to keep them for the fleet (at
    /// most one per quarter of the tti per key and process).
    pub idle_touches: f64,
    /// Commits refused: the lease was lost or the namespace bumped meanwhile.
    pub superseded_commits: f64,
    /// Notifications received from other processes.
    pub notices: f64,
    /// Times notifications may have been lost.
    pub notices_lost: f64,
    /// Times the subscription connection was seen to drop.
    pub subscription_drops: f64,
    /// Copies dropped because the server reported a change of their value key that no
    /// notice announced: a write from outside herdless, an expiry or an eviction.
    pub outside_invalidations: f64,
    /// Times the server refused key tracking (writes from outside herdless then not
    /// followed).
    pub tracking_refused: f64,
    /// Waits for another process's load.
    pub fleet_waits: f64,
    /// Re-checks of a waited key without a notification.
    pub fleet_wait_rechecks: f64,
    /// Waits for another process's load that ended at `waitTimeout`.
    pub fleet_wait_timeouts: f64,
    /// Tags invalidated or expired by this process for the fleet.
    pub tag_invalidations: f64,
    /// Round trips that read tags' records (a tagged entry whose tags were not known
    /// recently enough, or a writer's use of its tags before its commit).
    pub tag_fetches: f64,
    /// Loads not published because one of their tags was invalidated after the load began.
    pub tag_rejected_commits: f64,
    /// Tagged entries read as removed because a tag's record was gone (evicted, expired),
    /// not a record, or made again since they were written.
    pub tag_records_lost: f64,
}

/// The shared tier's counters as JS sees them.
pub(crate) fn redis(m: &herdless_redis::RedisMetrics) -> RedisCounters {
    RedisCounters {
        l2_hits: m.l2_hits as f64,
        l2_stale: m.l2_stale as f64,
        l2_misses: m.l2_misses as f64,
        corrupt_entries: m.corrupt_entries as f64,
        unshareable_values: m.unshareable_values as f64,
        backend_errors: m.backend_errors as f64,
        fleet_locks_acquired: m.fleet_locks_acquired as f64,
        fleet_locks_contended: m.fleet_locks_contended as f64,
        batch_round_trips: m.batch_round_trips as f64,
        lease_extensions: m.lease_extensions as f64,
        leases_lost: m.leases_lost as f64,
        leases_cut: m.leases_cut as f64,
        commits: m.commits as f64,
        idle_touches: m.idle_touches as f64,
        superseded_commits: m.superseded_commits as f64,
        notices: m.notices as f64,
        notices_lost: m.notices_lost as f64,
        subscription_drops: m.subscription_drops as f64,
        outside_invalidations: m.outside_invalidations as f64,
        tracking_refused: m.tracking_refused as f64,
        fleet_waits: m.fleet_waits as f64,
        fleet_wait_rechecks: m.fleet_wait_rechecks as f64,
        fleet_wait_timeouts: m.fleet_wait_timeouts as f64,
        tag_invalidations: m.tag_invalidations as f64,
        tag_fetches: m.tag_fetches as f64,
        tag_rejected_commits: m.tag_rejected_commits as f64,
        tag_records_lost: m.tag_records_lost as f64,
    }
}

/// What `cache.metrics()` returns.
#[napi(object, object_from_js = false)]
pub struct Metrics {
    /// Counters summed over all namespaces.
    pub total: Counters,
    /// Per namespace, sorted by name.
    pub namespaces: Vec<NamespaceStats>,
    /// Entries held (values and cached absences).
    pub entries: f64,
    /// Their total weight (entries, unless a weigher is set).
    pub weight: f64,
    /// Loads running now.
    pub loads_in_flight: f64,
    /// Tag records held now (one per tag in use, bounded like namespaces).
    pub tags: f64,
    /// Tags invalidated (`invalidateTag`: their entries became misses), one per tag of
    /// each call.
    pub tag_invalidations: f64,
    /// Tags expired (`invalidateTag(tag, { soft: true })`: their entries became stale), one
    /// per tag of each call.
    pub tag_expirations: f64,
    /// Tag records retired to stay within the engine's bound on tags (their entries became
    /// misses: a forgotten tag never brings an older entry back).
    pub retired_tags: f64,
    /// The shared tier's counters (absent without the `redis` option).
    pub redis: Option<RedisCounters>,
}

fn counters(c: &CounterSnapshot) -> Counters {
    Counters {
        hits: c.hits as f64,
        negative_hits: c.negative_hits as f64,
        stale_served: c.stale_served as f64,
        misses: c.misses as f64,
        expired_misses: c.expired_misses as f64,
        cold_misses: c.cold_misses as f64,
        failsafe_served: c.failsafe_served as f64,
        loads: c.loads as f64,
        load_errors: c.load_errors as f64,
        load_timeouts: c.load_timeouts as f64,
        abandoned_loads: c.abandoned_loads as f64,
        coalesced_waiters: c.coalesced_waiters as f64,
        lock_acquired: c.lock_acquired as f64,
        batch_loads: c.batch_loads as f64,
        lock_contended: c.lock_contended as f64,
        wait_timeouts: c.wait_timeouts as f64,
        early_refreshes: c.early_refreshes as f64,
        refreshes: c.refreshes as f64,
        not_modified: c.not_modified as f64,
        backend_errors: c.backend_errors as f64,
        evictions: c.evictions as f64,
        admission_rejections: c.admission_rejections as f64,
        events_dropped: c.events_dropped as f64,
    }
}

fn histogram(h: &HistogramSnapshot) -> Histogram {
    let ms = |q: f64| h.quantile(q).map(|s| s * 1000.0);
    Histogram {
        count: h.count() as f64,
        sum_ms: h.sum.as_secs_f64() * 1000.0,
        bounds_ms: HistogramSnapshot::BUCKETS
            .iter()
            .map(|b| b * 1000.0)
            .collect(),
        counts: h.counts.iter().map(|&c| c as f64).collect(),
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
    }
}

fn namespace(n: &NamespaceMetrics) -> NamespaceStats {
    NamespaceStats {
        namespace: n.namespace.clone(),
        counters: counters(&n.counters),
        load_duration: histogram(&n.load_duration),
        lock_wait: histogram(&n.lock_wait),
    }
}

/// The snapshot as JS sees it.
pub(crate) fn snapshot(m: &MetricsSnapshot) -> Metrics {
    Metrics {
        total: counters(&m.total()),
        namespaces: m.namespaces.iter().map(namespace).collect(),
        entries: m.entries as f64,
        weight: m.weight as f64,
        loads_in_flight: m.loads_in_flight as f64,
        tags: m.tags as f64,
        tag_invalidations: m.tag_invalidations as f64,
        tag_expirations: m.tag_expirations as f64,
        retired_tags: m.retired_tags as f64,
        redis: None,
    }
}
