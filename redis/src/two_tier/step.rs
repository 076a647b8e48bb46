//! The steps a driver takes, and the replies of the shared tier it hands back.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use herdless::backend::{StoredEntry, WriteOutcome};
use herdless::{Error, LoadGuard, Loaded, Previous, driver};

use super::{Host, Load, TwoTier, Versioned, fresh_left};
use crate::codec::CodecError;
use crate::fleet::{FleetLease, FleetOutcome};
use crate::lifetimes::Own;

/// What the driver of a load does next.
#[must_use = "a step must be driven to its end, or the load is handed over"]
pub enum Step<V: Clone + Send + Sync + 'static> {
    /// The answer (`Ok(None)`: absent). The load is finished.
    Done(Result<Option<V>, Error>),
    /// Run the loader, then hand its result to [`Load::loaded`].
    Load(Load<V>),
    /// Answer with this (stale) value now. The load, if any, refreshes it for the fleet:
    /// run it in the background, where nobody awaits its answer.
    Stale(V, Option<Load<V>>),
    /// Await the shared tier, then take the next step with [`Reply::next`].
    Tier(Pending<Reply<V>>),
    /// The driver's own codec was interrupted (a Python `KeyboardInterrupt` in a user
    /// codec): the load was handed over; re-raise the interruption.
    Interrupted(CodecError),
}

impl<V: Clone + Send + Sync + 'static> std::fmt::Debug for Step<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Done(_) => "Step::Done",
            Step::Load(_) => "Step::Load",
            Step::Stale(..) => "Step::Stale",
            Step::Tier(_) => "Step::Tier",
            Step::Interrupted(_) => "Step::Interrupted",
        })
    }
}

/// An operation of the shared tier in progress: a `Send` future, polled by whatever waits
/// in the driver's language (a tokio task, a parked thread, an asyncio bridge, the Node
/// event loop); the backend's runtime does the I/O and wakes it. Dropping it cancels the
/// operation (a lock it won is released).
#[must_use = "futures do nothing unless polled"]
pub struct Pending<T> {
    fut: Pin<Box<dyn Future<Output = T> + Send>>,
}

impl<T> Pending<T> {
    pub(crate) fn new(fut: impl Future<Output = T> + Send + 'static) -> Self {
        Self { fut: Box::pin(fut) }
    }
}

impl<T: Send + 'static> Pending<T> {
    /// An operation that is already over (nothing to ask the shared tier).
    pub(crate) fn ready(value: T) -> Self {
        Self::new(std::future::ready(value))
    }
}

impl<T> Future for Pending<T> {
    type Output = T;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        self.fut.as_mut().poll(cx)
    }
}

impl<T> std::fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pending")
    }
}

/// What the shared tier answered a [`Step::Tier`]: turned into the next step on the
/// driver's thread, where the codec can run.
pub struct Reply<V: Clone + Send + Sync + 'static>(Kind<V>);

enum Kind<V: Clone + Send + Sync + 'static> {
    /// The fleet answered who loads.
    Asked {
        tt: TwoTier<V>,
        guard: LoadGuard<Versioned<V>>,
        ttl: Option<Duration>,
        background: bool,
        /// A key of a batch: its load begins under the batch's unit of the budget.
        batch: bool,
        outcome: Result<FleetOutcome, Error>,
    },
    /// A key of a batch that another process is loading: asked again alone (and waited
    /// for) once the batch's own loads are done.
    Later {
        tt: TwoTier<V>,
        guard: LoadGuard<Versioned<V>>,
        have: u64,
        background: bool,
    },
    /// A key of a batch with no shared tier: loaded in this process.
    Local {
        tt: TwoTier<V>,
        guard: LoadGuard<Versioned<V>>,
        background: bool,
    },
    /// The wait for the origin budget ended.
    Began {
        load: Load<V>,
        began: Result<(), Error>,
    },
    /// The answer, once the fleet lock was handed back.
    Ready(Result<Option<V>, Error>),
    /// A loaded value was published (or not).
    Published {
        tt: TwoTier<V>,
        guard: Option<LoadGuard<Versioned<V>>>,
        value: Option<V>,
        own: Own,
        tags: Vec<String>,
        fresh_until_ms: u64,
        published: Result<WriteOutcome, Error>,
    },
}

impl<V: Clone + Send + Sync + 'static> Reply<V> {
    pub(crate) fn asked(
        tt: TwoTier<V>,
        guard: LoadGuard<Versioned<V>>,
        ttl: Option<Duration>,
        background: bool,
        outcome: Result<FleetOutcome, Error>,
    ) -> Self {
        Self(Kind::Asked {
            tt,
            guard,
            ttl,
            background,
            batch: false,
            outcome,
        })
    }

    /// The fleet's answer for one key of a batch.
    pub(crate) fn asked_in_batch(
        tt: TwoTier<V>,
        guard: LoadGuard<Versioned<V>>,
        background: bool,
        outcome: Result<FleetOutcome, Error>,
    ) -> Self {
        Self(Kind::Asked {
            tt,
            guard,
            ttl: None,
            background,
            batch: true,
            outcome,
        })
    }

    /// One key of a batch that another process is loading (see [`Reply::is_later`]).
    pub(crate) fn later(
        tt: TwoTier<V>,
        guard: LoadGuard<Versioned<V>>,
        have: u64,
        background: bool,
    ) -> Self {
        Self(Kind::Later {
            tt,
            guard,
            have,
            background,
        })
    }

    /// Whether this key of a batch is loaded by another process: the batch's driver takes
    /// its [`next`](Self::next) step (a fleet wait) only after the batch's own loads are
    /// done, so two batches holding each other's keys never wait on each other.
    pub fn is_later(&self) -> bool {
        matches!(self.0, Kind::Later { .. })
    }

    /// One key of a batch with no shared tier.
    pub(crate) fn local(tt: TwoTier<V>, guard: LoadGuard<Versioned<V>>, background: bool) -> Self {
        Self(Kind::Local {
            tt,
            guard,
            background,
        })
    }

    pub(crate) fn ready(answer: Result<Option<V>, Error>) -> Self {
        Self(Kind::Ready(answer))
    }

    pub(crate) fn began(load: Load<V>, began: Result<(), Error>) -> Self {
        Self(Kind::Began { load, began })
    }

    pub(crate) fn published(
        tt: TwoTier<V>,
        guard: Option<LoadGuard<Versioned<V>>>,
        (value, own, tags): (Option<V>, Own, Vec<String>),
        fresh_until_ms: u64,
        published: Result<WriteOutcome, Error>,
    ) -> Self {
        Self(Kind::Published {
            tt,
            guard,
            value,
            own,
            tags,
            fresh_until_ms,
            published,
        })
    }

    /// The next step, decided with the driver's `host` (its codec).
    pub fn next(self, host: &dyn Host<V>) -> Step<V> {
        match self.0 {
            Kind::Asked {
                tt,
                guard,
                ttl,
                background,
                batch,
                outcome,
            } => asked(tt, guard, ttl, (background, batch), outcome, host),
            Kind::Local {
                tt,
                guard,
                background,
            } => Load::local(tt, guard, None, background).cover(),
            Kind::Later {
                tt,
                guard,
                have,
                background,
            } => tt.ask_in_batch(guard, have, background),
            Kind::Ready(answer) => Step::Done(answer),
            Kind::Began { load, began } => load.began(began),
            Kind::Published {
                tt,
                guard,
                value,
                own,
                tags,
                fresh_until_ms,
                published,
            } => {
                let Some(mut guard) = guard else {
                    // A detached refresh: the L1 kept serving its stale copy; the next read
                    // of it finds the new entry.
                    return Step::Done(Ok(value));
                };
                let shared = match published {
                    Ok(WriteOutcome::Written { version, .. }) => Some(version),
                    Ok(WriteOutcome::Superseded) => {
                        // Newer data is in the shared tier (a write, an invalidation, a bump,
                        // or another leader after this lease ran out): answer this load's
                        // callers, but keep it out of the L1 (invalidating supersedes the
                        // flight, whose completion is then not stored).
                        let _ = tt.l1().invalidate(guard.key());
                        None
                    }
                    // Counted by the fleet; the value is served, and kept in this process only.
                    Err(_) => None,
                };
                // Fresh until the shared entry's end, measured now: a publish that stalled
                // does not stretch the value's life in this process.
                guard.set_ttl(fresh_left(fresh_until_ms).max(Duration::from_nanos(1)));
                let value = value.map(|value| match shared {
                    Some(version) => Versioned::shared(value, version),
                    None => Versioned::local(value),
                });
                let loaded = loaded_of(value, &own, tags);
                Step::Done(unwrap(guard.complete_loaded(Ok(loaded))))
            }
        }
    }
}

/// A loader's answer as the L1 keeps it: `value` with the lifetimes, metadata and tags
/// chosen.
fn loaded_of<T>(value: Option<T>, own: &Own, tags: Vec<String>) -> Loaded<T> {
    let mut loaded = Loaded::from(value);
    if !tags.is_empty() {
        loaded = loaded.tags(tags);
    }
    if let Some(t) = own.ttl {
        loaded = loaded.ttl(t);
    }
    if let Some(g) = own.grace {
        loaded = loaded.grace(g);
    }
    if let Some(n) = own.negative_ttl {
        loaded = loaded.negative_ttl(n);
    }
    if let Some(t) = own.tti {
        loaded = loaded.tti(t);
    }
    if let Some(m) = &own.meta {
        loaded = loaded.meta(m.clone());
    }
    loaded
}

/// What the L1 keeps of a shared entry beside its value: fresh for `fresh`, its loader's
/// ttl and metadata, its tags.
fn shared_entry(e: &StoredEntry, fresh: Duration) -> driver::SharedEntry<'_> {
    driver::SharedEntry {
        fresh,
        ttl: e.ttl,
        tti: e.tti,
        meta: e.meta.as_deref(),
        tags: &e.tags,
        born: None,
    }
}

/// The value out of its L1 wrapper.
pub(crate) fn unwrap<V>(r: Result<Option<Versioned<V>>, Error>) -> Result<Option<V>, Error> {
    r.map(|v| v.map(|v| v.value))
}

/// Decodes a shared entry's value (`None`: an absence).
fn decode<V>(host: &dyn Host<V>, e: &StoredEntry) -> Result<Option<Versioned<V>>, CodecError> {
    match &e.value {
        None => Ok(None),
        Some(bytes) => Ok(Some(Versioned::shared(host.decode(bytes)?, e.version))),
    }
}

fn asked<V: Clone + Send + Sync + 'static>(
    tt: TwoTier<V>,
    guard: LoadGuard<Versioned<V>>,
    ttl: Option<Duration>,
    // Whether this runs in the background, and whether it is a key of a batch.
    (background, batch): (bool, bool),
    outcome: Result<FleetOutcome, Error>,
    host: &dyn Host<V>,
) -> Step<V> {
    match outcome {
        Ok(FleetOutcome::Fresh(e) | FleetOutcome::Stale(e)) => match decode(host, &e) {
            Ok(value) => {
                let shared = shared_entry(&e, fresh_left(e.fresh_until_ms));
                let adopted = driver::adopt_shared(guard, value, e.load_duration, shared);
                Step::Done(unwrap(adopted))
            }
            Err(ce) if ce.is_interrupted() => {
                guard.abandon();
                Step::Interrupted(ce)
            }
            // Bytes this codec cannot read (another codec's): load here, leave them alone.
            Err(_) => {
                tt.count_unreadable();
                Load::local(tt, guard, ttl, background).start(batch)
            }
        },
        Ok(FleetOutcome::Lead(lease)) => lead(tt, guard, lease, ttl, (background, batch), host),
        // Another process found this key's value unshareable: everyone loads for itself
        // until the mark runs out.
        Ok(FleetOutcome::Unshared) => Load::local(tt, guard, ttl, background).start(batch),
        // This caller's wait for the other process ran out: its waiters here, who arrived
        // later, go on waiting until their own deadlines.
        Err(e @ Error::WaitTimeout { .. }) => Step::Done(unwrap(guard.give_up(e))),
        // The tier is down or failing (counted by the fleet): this process loads for itself.
        Err(_) => Load::local(tt, guard, ttl, background).start(batch),
    }
}

/// This process won the fleet lock.
fn lead<V: Clone + Send + Sync + 'static>(
    tt: TwoTier<V>,
    guard: LoadGuard<Versioned<V>>,
    lease: FleetLease,
    ttl: Option<Duration>,
    (background, batch): (bool, bool),
    host: &dyn Host<V>,
) -> Step<V> {
    // A foreground caller that finds an entry within its grace serves it at once (here and
    // to this process's waiters) and refreshes it for the fleet in the background:
    // stale-while-revalidate for the whole fleet. A refresh already runs in the background.
    let stale = match lease.stale().filter(|e| !background && e.value.is_some()) {
        None => None,
        Some(e) => match decode(host, e) {
            Ok(v) => v.map(|v| (v, e)),
            Err(ce) if ce.is_interrupted() => {
                drop(lease);
                guard.abandon();
                return Step::Interrupted(ce);
            }
            Err(_) => {
                tt.count_unreadable();
                None
            }
        },
    };
    let Some((stale, e)) = stale else {
        return Load::fleet(tt, guard, lease, ttl, background).start(batch);
    };
    let (took, own_ttl, meta, tags) = (e.load_duration, e.ttl, e.meta.clone(), e.tags.clone());
    let tti = e.tti;
    // The detached refresh is told the shared entry it refreshes (a conditional refresh
    // sends its ETag).
    let age = Duration::from_micros(crate::wall::now_us().saturating_sub(e.version));
    let previous = Previous::from_parts(stale.value.clone(), age, own_ttl, meta.as_deref());
    // The detached refresh calls the origin, so it takes a share of the budget; with none
    // free it is skipped (dropping the lease hands the key over) and a later read of the
    // still-stale copy tries again.
    let refresh = driver::try_origin_permit(tt.l1()).map(|permit| {
        Load::detached(
            tt.clone(),
            lease,
            permit,
            ttl,
            Some((previous, tags.clone())),
        )
    });
    let value = stale.value.clone();
    // Stored already stale (within grace): served, and refreshed by whoever reads it next
    // once the detached load has published.
    let shared = driver::SharedEntry {
        fresh: Duration::ZERO,
        ttl: own_ttl,
        tti,
        meta: meta.as_deref(),
        tags: &tags,
        born: None,
    };
    let _ = driver::adopt_shared(guard, Some(stale), took, shared);
    Step::Stale(value, refresh)
}
