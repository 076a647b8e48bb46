//! Counters of the Redis tier, beside the engine's per-namespace metrics (the engine's
//! `backend_errors` is also counted, per namespace, by the tiered cache).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($name:ident: $help:literal,)*) => {
        /// The live counters.
        #[derive(Default, Debug)]
        pub(crate) struct Metrics {
            $(pub(crate) $name: AtomicU64,)*
        }

        /// Counter values at one moment.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct RedisMetrics {
            $(#[doc = $help] pub $name: u64,)*
        }

        impl Metrics {
            pub(crate) fn snapshot(&self) -> RedisMetrics {
                RedisMetrics { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }

        impl RedisMetrics {
            /// Every counter as (name, help, value), in a stable order.
            pub fn fields(&self) -> Vec<(&'static str, &'static str, u64)> {
                vec![$((stringify!($name), $help, self.$name),)*]
            }
        }
    };
}

counters! {
    l2_hits: "Reads answered by a fresh entry in Redis.",
    l2_stale: "Reads that found only an entry within grace in Redis.",
    l2_misses: "Reads that found nothing servable in Redis.",
    corrupt_entries: "Unreadable or wrongly typed shared state found (a miss; repaired where the protocol says how).",
    unshareable_values: "Loaded values the codec could not encode: served in their process only.",
    backend_errors: "Redis operations that failed or timed out.",
    fleet_locks_acquired: "Fleet locks won: this process loads for the fleet.",
    fleet_locks_contended: "Lock attempts that found another process loading.",
    batch_round_trips: "Round trips of batch loads' lock requests (one pipeline per Cluster slot group).",
    lease_extensions: "Lease extensions while a loader ran.",
    leases_lost: "Leases found lost (expired, broken by a write or invalidation, or Redis restarted).",
    leases_cut: "Locks handed back at the hard timeout while their loader still ran (the fleet's other processes lead).",
    commits: "Entries written to Redis.",
    idle_touches: "Reads of entries with a time-to-idle told to Redis to keep them for the fleet (at most one per quarter of the tti per key and process).",
    superseded_commits: "Commits refused: the lease was lost or the namespace bumped meanwhile.",
    notices: "Notifications received from other processes.",
    notices_lost: "Times notifications may have been lost (subscription connection dropped, or the database flushed).",
    subscription_drops: "Times the subscription connection was seen to drop (until it is confirmed again, reads are not kept; then notices_lost).",
    outside_invalidations: "Copies dropped because the server reported a change of their value key that no notice announced: a write from outside herdless, an expiry or an eviction (single server, key tracking).",
    tracking_refused: "Times the server refused key tracking (Redis before 6, or an ACL without client|tracking): writes from outside herdless are then not followed.",
    fleet_waits: "Waits for another process's load.",
    fleet_wait_rechecks: "Re-checks of a waited key without a notification (timer).",
    fleet_wait_timeouts: "Waits for another process's load that ended at wait_timeout.",
    tag_invalidations: "Tags invalidated or expired by this process for the fleet.",
    tag_fetches: "Round trips that read tags' records (a tagged entry whose tags were not known within tag_check, or a writer's use of its tags before its commit).",
    tag_rejected_commits: "Loads not published because one of their tags was invalidated after the load began.",
    tag_records_lost: "Tagged entries read as removed because a tag's record was gone (evicted, expired), not a record, or made again since they were written.",
}

impl Metrics {
    /// Counts a read of the tier that found `e` (a hit, a stale entry, or nothing) at `now`:
    /// the same for every backend.
    pub(crate) fn count_read(&self, e: Option<&herdless::backend::StoredEntry>, now: u64) {
        match e {
            Some(e) if e.is_fresh(now) => inc(&self.l2_hits),
            Some(_) => inc(&self.l2_stale),
            None => inc(&self.l2_misses),
        }
    }
}

pub(crate) fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl RedisMetrics {
    /// The counters in Prometheus text exposition format (`herdless_redis_<name>_total`).
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        for (name, help, value) in self.fields() {
            let _ = writeln!(out, "# HELP herdless_redis_{name}_total {help}");
            let _ = writeln!(out, "# TYPE herdless_redis_{name}_total counter");
            let _ = writeln!(out, "herdless_redis_{name}_total {value}");
        }
        out
    }
}
