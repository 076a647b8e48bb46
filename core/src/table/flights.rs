//! A load's life in the table: its flight record is made by the caller that leads, given up
//! when it hangs past the hard timeout or was outdated by a write, and finished exactly once,
//! storing the result when nothing newer happened meanwhile.

use alloc::boxed::Box;
use core::time::Duration;

use super::Table;
use super::shard::Shard;
use crate::epoch::Namespace;
use crate::error::Error;
use crate::events::EventKind;
use crate::expiry::nanos;
use crate::flight::{self, Flight, Outcome};
use crate::loaded::Keep;
use crate::store::Dropped;
use crate::sync::{Arc, Ordering};
use crate::tags;

/// What [`Table::remove_outdated_flight`] leaves: the key's current flight, and the hung one
/// it took out.
pub(crate) type Outdated<V> = (Option<Arc<Flight<V>>>, Option<Arc<Flight<V>>>);

impl<V: Clone> Table<V> {
    /// Makes the flight record of `key`'s load, led by the caller of this lookup, unless
    /// `max_flights` loads are running already. `vacant`: the shard holds no entry of `key`
    /// now (see [`Flight::vacant`]).
    pub(crate) fn start_flight(
        &self,
        shard: &mut Shard<V>,
        (key, hash): (&str, u64),
        ns: Arc<Namespace>,
        now: Duration,
        vacant: bool,
    ) -> Result<Arc<Flight<V>>, Error> {
        let max = self.cfg.max_flights;
        if self.flights.load(Ordering::Relaxed) >= max {
            return Err(Error::TooManyFlights { max });
        }
        self.flights.fetch_add(1, Ordering::Relaxed);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let cfg = &self.cfg;
        // The epoch the load will be stored under, read once: `ns` (looked up by the caller,
        // or an entry's) may have been retired meanwhile.
        let ns = self.namespaces.live(ns);
        let mut flight = Flight::new(
            id,
            key,
            hash,
            ns,
            (now, self.tags.now()),
            cfg.soft_timeout,
            cfg.hard_timeout,
        );
        flight.vacant = vacant;
        let flight = Flight::renew(&mut shard.spare, flight);
        shard
            .flights
            .insert_unique(hash, flight.clone(), |f| f.hash);
        Ok(flight)
    }

    /// Takes `key`'s flight out of the table when it must not answer a caller arriving at
    /// `now`: hung past its hard timeout (so a hung loader never holds a key, even when no
    /// waiter is left to notice), or begun before a `set`, `invalidate` or `bump`, or led by
    /// the parent of a `fork` (nobody here will finish it). Its own waiters still get its
    /// result. Returns the flight left in the table for the caller to wait on, if any, and
    /// the hung flight, for the caller to [`time_out`](Self::time_out) once the shard lock is
    /// released (one lookup of the key's flight serves both).
    pub(crate) fn remove_outdated_flight(
        &self,
        shard: &mut Shard<V>,
        key: &str,
        hash: u64,
        now: Duration,
    ) -> Outdated<V> {
        let Some(f) = shard.flight(hash, key) else {
            return (None, None);
        };
        let hung = f.hard_deadline().is_some_and(|d| now >= d);
        let outdated = f.is_withdrawn() || f.epoch != f.ns.epoch() || f.orphaned();
        if !(hung || outdated) {
            return (Some(f.clone()), None);
        }
        let f = f.clone();
        shard.remove_flight(&f);
        self.flights.fetch_sub(1, Ordering::Relaxed);
        if !hung {
            return (None, None);
        }
        // Back off as any failed load does: serve the fail-safe value, if any, rather than
        // sending the next caller straight to a hung origin.
        let until = nanos(now).saturating_add(nanos(self.cfg.failsafe_backoff));
        if let Some(node) = shard.store.get_mut(hash, key) {
            node.entry.set_backoff(until);
        }
        (None, Some(f))
    }

    /// Gives up a load past its hard timeout: its waiters get the timeout (or fail-safe),
    /// and the key backs off as after any failed load, whoever noticed the timeout.
    pub(crate) fn time_out(&self, flight: &Arc<Flight<V>>) {
        let after = self.cfg.hard_timeout.unwrap_or_default();
        let outcome = Outcome::Failed(Error::LoadTimeout { after });
        self.finish(flight, outcome, Duration::ZERO, None, self.now());
    }

    /// Ends a flight: stores a loaded result when nothing newer happened meanwhile (no
    /// `set`, `invalidate` or `bump` since it began, it was not timed out nor left by every
    /// caller) and the loader did not say `no_cache`, records a
    /// failure for fail-safe backoff, then wakes the waiters. `now` is the caller's reading
    /// of the clock at the end of the load (one read serves both the duration and this).
    /// `keep`: how the result is kept, `None` when the load chose nothing (most do).
    pub(crate) fn finish(
        &self,
        flight: &Arc<Flight<V>>,
        outcome: Outcome<V>,
        took: Duration,
        keep: Option<Box<Keep>>,
        now: Duration,
    ) {
        let n = nanos(now);
        let mut dropped = Dropped::new();
        // Resolved outside the shard's lock; the check against the load's start is made
        // under it, so an older value never displaces anything.
        let mut keep = keep;
        let tags = match keep.as_deref_mut() {
            Some(keep) => self.resolve_tags(keep),
            None => Box::default(),
        };
        let born = flight.born;
        let no_cache = keep.as_ref().is_some_and(|k| k.no_cache);
        let wakers = {
            let mut shard = self.shard(flight.hash).write();
            let current = shard.remove_flight(flight);
            if current {
                self.flights.fetch_sub(1, Ordering::Relaxed);
            }
            let storable = current
                && !flight.is_withdrawn()
                && !no_cache
                && flight.ns.epoch() == flight.epoch
                && !tags::removed_since(&tags, born);
            let entry = match &outcome {
                Outcome::Loaded(v) if storable => Some(self.make_entry(
                    &mut shard.rng,
                    v.clone(),
                    flight.ns.clone(),
                    flight.epoch,
                    nanos(took),
                    n,
                    keep.map(|k| *k),
                    (tags, born),
                )),
                _ => None,
            };
            let error = match &outcome {
                Outcome::Failed(e) => Some(e.clone()),
                _ => None,
            };
            let failed = error.is_some();
            let timed_out = matches!(outcome, Outcome::Failed(Error::LoadTimeout { .. }));
            // The outcome is set under the shard lock, before anything is stored: a hard
            // timeout that ended the flight first wins, and then nothing is stored, so no
            // waiter is told "timed out" about a value that was cached.
            let wakers = match current {
                true => Flight::end_alone(flight, outcome, now, &mut shard.spare),
                false => flight.set_outcome(outcome, now),
            };
            // Counted once per load, by whichever of the leader and the waiters ended it.
            if wakers.is_some() && timed_out {
                flight.ns.counters().load_timeouts.inc();
            }
            if let Some(entry) = entry {
                match self.weigh(&flight.key, &entry) {
                    Ok(weight) if wakers.is_some() => self.store(
                        &mut shard,
                        flight.hash,
                        flight.key.share(),
                        entry,
                        weight,
                        n,
                        &mut dropped,
                        flight.vacant,
                    ),
                    // Not stored: dropped with the rest, outside the lock.
                    _ => dropped.push(entry),
                }
            } else if wakers.is_some() && failed && storable {
                // Back off: the stale value keeps being served without hammering a
                // failing origin with one refresh per read.
                if let Some(node) = shard.store.get_mut(flight.hash, &flight.key) {
                    node.entry
                        .set_backoff(n.saturating_add(nanos(self.cfg.failsafe_backoff)));
                    if node.entry.has_value() {
                        self.emit(&flight.ns, EventKind::FailSafe, &flight.key, error.clone());
                    }
                }
            }
            if wakers.is_some() && failed {
                self.emit(&flight.ns, EventKind::LoadFailed, &flight.key, error);
            }
            wakers
        };
        drop(dropped);
        self.deliver_events();
        if let Some(wakers) = wakers {
            flight::wake_all(wakers);
        }
        self.detect(n);
    }
}
