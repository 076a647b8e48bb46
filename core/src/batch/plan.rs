//! A batch request: its distinct keys, the waves of lookups that sort them into hits,
//! loads and waits, and the answers in the request's order.

use alloc::string::String;
use alloc::vec::Vec;

use super::chunk::{Answer, Chunk};
use crate::lookup::{self, LoadGuard, Lookup, Refresh, Retry, Waiter};
use crate::sync::Arc;
use crate::table::Table;

/// A batch request: its distinct keys, and for each key of the request (duplicates
/// included) the distinct key it is.
pub(super) struct Plan<V> {
    keys: Vec<String>,
    positions: Vec<usize>,
    pub(super) answers: Vec<Option<Answer<V>>>,
}

/// What one wave of lookups found to do.
pub(super) struct Wave<V: Clone + Send + Sync + 'static> {
    /// Keys this batch leads: (distinct index, guard).
    pub(super) leads: Vec<(usize, LoadGuard<V>)>,
    /// Keys someone else loads.
    pub(super) waits: Vec<(usize, Waiter<V>)>,
    /// Hits that handed this caller a background refresh.
    pub(super) refreshes: Vec<(usize, LoadGuard<V>)>,
}

impl<V: Clone + Send + Sync + 'static> Plan<V> {
    pub(super) fn new<I>(keys: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut index = hashbrown::HashMap::<String, usize>::new();
        let mut distinct = Vec::new();
        let positions = keys
            .into_iter()
            .map(|k| {
                let k = k.as_ref();
                if let Some(&i) = index.get(k) {
                    return i;
                }
                index.insert(String::from(k), distinct.len());
                distinct.push(String::from(k));
                distinct.len() - 1
            })
            .collect();
        let answers = distinct.iter().map(|_| None).collect();
        Self {
            keys: distinct,
            positions,
            answers,
        }
    }

    /// The first wave: every distinct key, looked up for the first time.
    pub(super) fn first_wave(&self) -> Vec<(usize, Option<Retry>)> {
        (0..self.keys.len()).map(|i| (i, None)).collect()
    }

    /// Looks up the keys of a wave: hits and errors are answered now, the rest is sorted
    /// into what the drivers do.
    pub(super) fn look_up(
        &mut self,
        table: &Arc<Table<V>>,
        wave: Vec<(usize, Option<Retry>)>,
    ) -> Wave<V> {
        let mut out = Wave {
            leads: Vec::new(),
            waits: Vec::new(),
            refreshes: Vec::new(),
        };
        for (i, retry) in wave {
            let key = &self.keys[i];
            let step = match retry {
                None => lookup::lookup(table, key, Refresh::IfSpawner),
                Some(r) => lookup::lookup_again(table, key, r, Refresh::IfSpawner),
            };
            match step {
                Ok(Lookup::Hit(hit)) => {
                    if let Some(guard) = hit.refresh {
                        out.refreshes.push((i, guard));
                    }
                    self.answers[i] = Some(Ok(hit.value));
                }
                Ok(Lookup::Lead(guard)) => out.leads.push((i, guard)),
                Ok(Lookup::Wait(waiter)) => out.waits.push((i, waiter)),
                Err(e) => self.answers[i] = Some(Err(e)),
            }
        }
        out
    }

    /// Records the answers of a loader call.
    pub(super) fn answer(&mut self, answers: Vec<(usize, Answer<V>)>) {
        for (i, a) in answers {
            self.answers[i] = Some(a);
        }
    }

    /// The answers in the request's order.
    pub(super) fn finish(self) -> Vec<Answer<V>> {
        let answers = self.answers;
        self.positions
            .into_iter()
            .map(|i| {
                answers[i]
                    .clone()
                    .expect("every distinct key is answered before the batch ends")
            })
            .collect()
    }
}

/// Splits `guards` into loader calls of at most `max` keys each.
pub(super) fn chunks<V: Clone + Send + Sync + 'static>(
    mut guards: Vec<(usize, LoadGuard<V>)>,
    max: usize,
) -> Vec<Chunk<V>> {
    let mut out = Vec::with_capacity(guards.len().div_ceil(max.max(1)));
    while !guards.is_empty() {
        let rest = guards.split_off(guards.len().min(max.max(1)));
        out.push(Chunk::new(core::mem::replace(&mut guards, rest)));
    }
    out
}
