//! One loader call of a batch: its keys, the flights it holds, and how they end.
//!
//! A loader call takes one unit of the origin budget however many keys it loads: the first
//! guard waits for the permit and holds it, the others begin under it. The permit holder is
//! completed last, so the permit is released once every key of the call has landed.

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use crate::error::{Error, LoadError};
use crate::key::namespace_of;
use crate::lookup::LoadGuard;

/// What a caller of a batch gets for one key: the value, `None` for an absence, or the
/// error of that key (its load failed, its wait timed out, the key is invalid, ...).
pub(crate) type Answer<V> = Result<Option<V>, Error>;

/// Splits `items` into runs of at most `max` (at least 1) in their order, each run allocated
/// to its own length: splitting the tail off a vector leaves the head the capacity of the
/// whole, which made a batch of N keys hold N^2 / `max` slots at once.
pub fn chunks_of<T>(items: Vec<T>, max: usize) -> Vec<Vec<T>> {
    let max = max.max(1);
    let mut out = Vec::with_capacity(items.len().div_ceil(max));
    let mut items = items.into_iter();
    loop {
        // `take` on a vector's iterator knows its exact length, so `collect` allocates once.
        let run: Vec<T> = items.by_ref().take(max).collect();
        if run.is_empty() {
            return out;
        }
        out.push(run);
    }
}

/// The keys of one loader call and their flights: (distinct index in the plan, guard).
pub(super) struct Chunk<V: Clone + Send + Sync + 'static> {
    guards: Vec<(usize, LoadGuard<V>)>,
}

impl<V: Clone + Send + Sync + 'static> Chunk<V> {
    pub(super) fn new(guards: Vec<(usize, LoadGuard<V>)>) -> Self {
        Self { guards }
    }

    /// The keys, in the order the caller asked for them, for the loader.
    pub(super) fn keys(&self) -> Vec<String> {
        self.guards
            .iter()
            .map(|(_, g)| String::from(g.key()))
            .collect()
    }

    /// The earliest hard deadline of the call's flights: the call is given up then.
    pub(super) fn hard_deadline(&self) -> Option<Duration> {
        self.guards
            .iter()
            .filter_map(|(_, g)| g.hard_deadline())
            .min()
    }

    /// Marks the call started without waiting: `true` unless there is an origin budget the
    /// first guard must wait for ([`begin`](Self::begin)).
    pub(super) fn begin_at_lookup(&mut self) -> bool {
        let mut ready = true;
        for (_, g) in &mut self.guards {
            ready &= g.begin_at_lookup();
        }
        ready
    }

    /// Waits for the call's one unit of the origin budget (until the first guard's wait
    /// deadline), then marks every flight begun.
    pub(super) async fn begin(&mut self) -> Result<(), Error> {
        if let Some(((_, first), rest)) = self.guards.split_first_mut() {
            first.begin().await?;
            for (_, g) in rest {
                g.begin_covered();
            }
        }
        Ok(())
    }

    /// [`begin`](Self::begin) if the budget has room now; `false` (nothing begun) if not.
    pub(super) fn try_begin(&mut self) -> bool {
        let Some(((_, first), rest)) = self.guards.split_first_mut() else {
            return true;
        };
        if !first.try_begin() {
            return false;
        }
        for (_, g) in rest {
            g.begin_covered();
        }
        true
    }

    /// Counts the loader call once in each namespace it loads keys of.
    pub(super) fn count_call(&self) {
        let mut seen = hashbrown::HashSet::<&str>::new();
        for (_, g) in &self.guards {
            if seen.insert(namespace_of(g.key())) {
                g.count_batch_load();
            }
        }
    }

    /// Completes every flight with the loader's answer: a key the loader answered gets its
    /// value or absence, a key it omitted is absent (cached for `negative_ttl`), and an
    /// error of the whole call is every key's error. Answers (distinct index, answer).
    pub(super) fn complete<R>(self, result: Result<R, LoadError>) -> Vec<(usize, Answer<V>)>
    where
        R: IntoIterator<Item = (String, Option<V>)>,
    {
        match result {
            Ok(found) => {
                let mut found: hashbrown::HashMap<String, Option<V>> = found.into_iter().collect();
                self.end(|g| {
                    let v = found.remove(g.key()).flatten();
                    g.complete(Ok(v))
                })
            }
            Err(e) => self.end(|g| g.complete(Err(e.clone()))),
        }
    }

    /// Fails every flight with `error` (a timeout the driver enforced); waiters get it too.
    pub(super) fn fail(self, error: Error) -> Vec<(usize, Answer<V>)> {
        self.end(|g| g.fail(error.clone()))
    }

    /// Gives every flight up because this caller's wait for the budget ran out: each key is
    /// answered its fail-safe value or `error`, and the waiters of each look up again.
    pub(super) fn give_up(self, error: Error) -> Vec<(usize, Answer<V>)> {
        self.end(|g| g.give_up(error.clone()))
    }

    /// Hands every flight over unanswered (the call never ran).
    pub(super) fn abandon(self) {
        for (_, g) in self.guards {
            g.abandon();
        }
    }

    /// Ends every flight because the loader panicked.
    #[cfg(feature = "std")]
    pub(super) fn panicked(self, message: Option<String>) {
        for (_, g) in self.guards {
            g.panicked(message.clone());
        }
    }

    /// Ends each flight with `f`, the permit holder (the first) last.
    fn end(mut self, mut f: impl FnMut(LoadGuard<V>) -> Answer<V>) -> Vec<(usize, Answer<V>)> {
        let first = if self.guards.is_empty() {
            None
        } else {
            Some(self.guards.remove(0))
        };
        let rest = self.guards.into_iter().chain(first);
        rest.map(|(i, g)| (i, f(g))).collect()
    }
}
