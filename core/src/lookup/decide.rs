//! The decision of a lookup, atomic for the key: serve (fresh, stale with perhaps a refresh,
//! fail-safe), lead the load, or wait for the caller who leads it.

use core::time::Duration;

use super::guard::LoadGuard;
use super::step::{Hit, Lookup};
use super::waiter::{Retry, Waiter};
use crate::context::{LoadReason, Previous};
use crate::entry::HitState;
use crate::error::Error;
use crate::events::EventKind;
use crate::expiry::{Phase, nanos};
use crate::flight::Flight;
use crate::sync::Arc;
use crate::table::Table;
use crate::table::read::Fast;
use crate::table::shard::Shard;

/// Whether a hit may hand its caller a refresh of the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refresh {
    /// When the cache has a spawner to run it on (the public state machine).
    IfSpawner,
    /// Always: the caller refreshes in the foreground (pre-warming).
    Always,
    /// Never: the caller's loader cannot outlive the call (a borrowing blocking loader).
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    Never,
}

impl Refresh {
    #[inline]
    fn allowed<V>(self, table: &Table<V>) -> bool {
        match self {
            Refresh::IfSpawner => table.spawner.is_some(),
            Refresh::Always => true,
            Refresh::Never => false,
        }
    }
}

/// Decides what a caller of `key` does now. The fresh hit, by far the most common answer,
/// is decided under the shard's read lock; everything else under its write lock.
#[inline]
pub(crate) fn lookup<V: Clone + Send + Sync + 'static>(
    table: &Arc<Table<V>>,
    key: &str,
    refresh: Refresh,
) -> Result<Lookup<V>, Error> {
    table.check_key(key)?;
    let hash = table.hash(key);
    // The cheap clock errs late, so a value it calls fresh is fresh.
    let now = table.now_fast();
    match table.read_fresh(key, hash, now, || refresh.allowed(table)) {
        Fast::Hit(value) => Ok(Lookup::Hit(Hit {
            value,
            state: HitState::Fresh,
            refresh: None,
        })),
        Fast::Slow { early } => decide(table, key, hash, early, None, refresh),
    }
}

/// [`lookup`] after a [`Waited::Retry`](super::waiter::Waited::Retry): the same decision,
/// with the caller's `wait_timeout` still counted from its first arrival.
pub(crate) fn lookup_again<V: Clone + Send + Sync + 'static>(
    table: &Arc<Table<V>>,
    key: &str,
    retry: Retry,
    refresh: Refresh,
) -> Result<Lookup<V>, Error> {
    table.check_key(key)?;
    let hash = table.hash(key);
    decide(table, key, hash, false, Some(retry.arrived), refresh)
}

/// The slow path, under the shard's write lock. `early`: XFetch chose this read to refresh
/// a fresh entry; `arrived`: when the caller first arrived, if before now (a hand-over).
fn decide<V: Clone + Send + Sync + 'static>(
    table: &Arc<Table<V>>,
    key: &str,
    hash: u64,
    early: bool,
    arrived: Option<Duration>,
    refresh: Refresh,
) -> Result<Lookup<V>, Error> {
    let now = table.now();
    let n = nanos(now);
    table.detect(n);
    let mut shard = table.shard(hash).write();
    let (flight, hung) = table.remove_outdated_flight(&mut shard, key, hash, now);
    // The entry's phase, and whether a failed load made it back off from loading again.
    let (phase, backing_off) = shard.store.get(hash, key).map_or((None, false), |node| {
        (
            Some(node.entry.phase(n, &table.life)),
            n < node.entry.backoff_until(),
        )
    });
    let mut dead = match phase {
        Some(Phase::Dead) => shard.store.remove(hash, key),
        _ => None,
    };
    // An entry that outlived its retention (not one of a bumped namespace or invalidated
    // tag): it expired without a refresh, and its value is the next load's previous one,
    // moved, not cloned.
    let expired = dead.as_mut().filter(|e| !e.killed()).map(|e| {
        table.emit(&e.ns, EventKind::Expired, key, None);
        let age = Duration::from_nanos(n.saturating_sub(e.timing.written));
        let extras = e.previous_extras();
        e.take_value()
            .map(|v| Previous::new(v, age, extras.as_ref()))
    });
    let result = match phase {
        Some(p @ (Phase::Fresh | Phase::Stale)) => {
            let may_refresh = flight.is_none() && (p == Phase::Stale || early);
            let may_refresh = may_refresh && !backing_off && refresh.allowed(table);
            Ok(serve(table, &mut shard, key, hash, now, p, may_refresh))
        }
        Some(Phase::FailSafe) if backing_off => {
            let node = shard
                .store
                .get(hash, key)
                .expect("phase came from this node");
            node.entry.ns.counters().failsafe_served.inc();
            Ok(Lookup::Hit(Hit {
                value: node.entry.value().cloned(),
                state: HitState::FailSafe,
                refresh: None,
            }))
        }
        _ => lead_or_wait(
            table,
            &mut shard,
            key,
            hash,
            (now, arrived.unwrap_or(now)),
            (phase, expired.flatten()),
            flight,
        ),
    };
    drop(shard);
    table.deliver_events();
    if let Some(hot) = &table.hot {
        let miss = !matches!(result, Ok(Lookup::Hit(_)));
        hot.access(key, hash, miss);
    }
    if let Some(f) = hung {
        table.time_out(&f);
    }
    drop(dead);
    result
}

/// A fresh or stale entry: served, with the key's refresh when `may_refresh` (one caller
/// only: the refresh is a flight, and a key has one flight at a time).
fn serve<V: Clone + Send + Sync + 'static>(
    table: &Arc<Table<V>>,
    shard: &mut Shard<V>,
    key: &str,
    hash: u64,
    now: Duration,
    phase: Phase,
    may_refresh: bool,
) -> Lookup<V> {
    let node = shard
        .store
        .get(hash, key)
        .expect("phase came from this node");
    let n = nanos(now);
    table.touch(node, n);
    let (value, ns) = (node.entry.value().cloned(), node.entry.ns.clone());
    let reason = match phase {
        Phase::Fresh if table.ahead_due(&node.entry, n) => LoadReason::RefreshAhead,
        Phase::Fresh => LoadReason::EarlyRefresh,
        _ => LoadReason::Refresh,
    };
    let refresh = if may_refresh {
        let e = &node.entry;
        let age = Duration::from_nanos(n.saturating_sub(e.timing.written));
        let previous = value
            .clone()
            .map(|v| Previous::new(v, age, e.previous_extras().as_ref()));
        // The entry being refreshed stays in the store meanwhile: not vacant.
        let flight = table
            .start_flight(shard, (key, hash), ns.clone(), now, false)
            .ok();
        flight.map(|f| LoadGuard::new(table.clone(), f, None, now).with_context(reason, previous))
    } else {
        None
    };
    let c = ns.counters();
    if refresh.is_some() {
        c.refreshes.inc();
        match reason {
            LoadReason::RefreshAhead => c.ahead_refreshes.inc(),
            LoadReason::EarlyRefresh => c.early_refreshes.inc(),
            _ => {}
        }
    }
    let stripe = table.shard_index(hash);
    let state = if phase == Phase::Fresh {
        if value.is_some() {
            c.hits.add(stripe);
        } else {
            c.negative_hits.add(stripe);
        }
        HitState::Fresh
    } else {
        c.stale_served.add(stripe);
        HitState::Stale
    };
    Lookup::Hit(Hit {
        value,
        state,
        refresh,
    })
}

/// Nothing servable: the caller waits for the key's load in progress, or leads a new one.
/// An entry kept for fail-safe goes with either, as the answer should the load fail; a
/// leader's previous value is its value, else the `expired` one's.
fn lead_or_wait<V: Clone + Send + Sync + 'static>(
    table: &Arc<Table<V>>,
    shard: &mut Shard<V>,
    key: &str,
    hash: u64,
    // The clock now, and when the caller first arrived (before any hand-over).
    (now, arrived): (Duration, Duration),
    (phase, expired): (Option<Phase>, Option<Previous<V>>),
    flight: Option<Arc<Flight<V>>>,
) -> Result<Lookup<V>, Error> {
    // The node is looked up again only when it is kept for fail-safe: a miss has none.
    let failsafe = match phase {
        Some(Phase::FailSafe) => shard.store.get(hash, key),
        _ => None,
    };
    let (ns, fallback, previous) = match failsafe {
        // The fallback keeps its retention deadline: it is never handed out past it,
        // however long the load or the wait lasts.
        Some(node) => {
            let e = &node.entry;
            let until = Duration::from_nanos(e.ends(&table.life).retain_until);
            let fallback = e.value().cloned().map(|v| (v, until));
            let age = now.saturating_sub(Duration::from_nanos(e.timing.written));
            let previous = e
                .value()
                .cloned()
                .map(|v| Previous::new(v, age, e.previous_extras().as_ref()));
            (e.ns.clone(), fallback, previous)
        }
        _ => {
            let ns = table.namespaces.get_cached(&mut shard.last_ns, key);
            (ns, None, None)
        }
    };
    let c = ns.counters();
    c.misses.inc();
    if phase.is_some() {
        c.expired_misses.inc();
    } else if flight.is_none() {
        c.cold_misses.inc();
    }
    match flight {
        Some(f) => {
            c.coalesced_waiters.inc();
            c.lock_contended.inc();
            Ok(Lookup::Wait(Waiter::new(
                table.clone(),
                f,
                fallback,
                arrived,
            )))
        }
        None => {
            // No entry (a dead one was taken out above), unless one kept for fail-safe.
            let vacant = matches!(phase, None | Some(Phase::Dead));
            let f = table.start_flight(shard, (key, hash), ns.clone(), now, vacant)?;
            c.lock_acquired.inc();
            let guard = LoadGuard::new(table.clone(), f, fallback, arrived);
            // A new guard's reason is `First` already: a miss with no previous value (the
            // common one) is not moved through `with_context` and back.
            let guard = match previous.or(expired) {
                None => guard,
                previous => guard.with_context(LoadReason::First, previous),
            };
            Ok(Lookup::Lead(guard))
        }
    }
}
