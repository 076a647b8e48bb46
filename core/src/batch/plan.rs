//! A batch request: its distinct keys, the waves of lookups that sort them into hits,
//! loads and waits, and the answers in the request's order. This crate's drivers use it,
//! and so does a driver beyond it (a shared tier's) through
//! [`driver::batch`](crate::driver::batch).

use alloc::string::String;
use alloc::vec::Vec;
use core::hash::BuildHasher;

use super::chunk::{Answer, Chunk, chunks_of};
use crate::error::Error;
use crate::lookup::{self, LoadGuard, Lookup, Refresh, Retry, Waited, Waiter};
use crate::sync::Arc;
use crate::table::Table;

/// A batch request in progress (see [`driver::batch`](crate::driver::batch)): its distinct
/// keys, each answered once, and the keys still to look up.
///
/// Drive it in waves: [`wave`](Self::wave) looks up the pending keys and answers the hits
/// (and invalid keys); the driver loads the wave's `leads` together (one loader call per
/// `max_batch` keys) and [`answer`](Self::answer)s them, runs its `refreshes` in the
/// background, and only then awaits its `waits`: a batch must never wait while it holds a
/// flight, or two batches sharing keys could wait on each other. A wait that ends in
/// [`Waited::Retry`](crate::Waited::Retry) goes back with [`retry`](Self::retry), to be
/// looked up in the next wave. When [`wave`](Self::wave) answers `None`, every key is
/// answered: [`finish`](Self::finish).
pub struct Batch<V: Clone + Send + Sync + 'static> {
    table: Arc<Table<V>>,
    keys: Vec<String>,
    /// For each key of the request (duplicates included), its distinct key.
    positions: Vec<usize>,
    answers: Vec<Option<Answer<V>>>,
    /// The keys to look up next, with their first arrival after a hand-over.
    next: Vec<(usize, Option<Retry>)>,
}

/// What one wave of a [`Batch`] found to do, each item with its key's index in the batch.
pub struct BatchWave<V: Clone + Send + Sync + 'static> {
    /// Keys this batch loads: one loader call for them (per `max_batch`).
    pub leads: Vec<(usize, LoadGuard<V>)>,
    /// Keys someone else loads: await them after the leads are done.
    pub waits: Vec<(usize, Waiter<V>)>,
    /// Hits that chose this caller to refresh the key in the background (already
    /// answered with the value served): one background loader call for them.
    pub refreshes: Vec<(usize, LoadGuard<V>)>,
}

impl<V: Clone + Send + Sync + 'static> core::fmt::Debug for Batch<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Batch")
            .field("keys", &self.keys.len())
            .field("pending", &self.next.len())
            .finish_non_exhaustive()
    }
}

impl<V: Clone + Send + Sync + 'static> Batch<V> {
    pub(crate) fn new<I>(table: &Arc<Table<V>>, keys: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        // Distinct keys, each copied once; the index holds positions in `distinct`.
        let hasher = hashbrown::DefaultHashBuilder::default();
        let mut index = hashbrown::HashTable::<usize>::new();
        let mut distinct: Vec<String> = Vec::new();
        let positions = keys
            .into_iter()
            .map(|k| {
                let k = k.as_ref();
                let hash = hasher.hash_one(k);
                if let Some(&i) = index.find(hash, |&i| distinct[i] == k) {
                    return i;
                }
                distinct.push(String::from(k));
                let i = distinct.len() - 1;
                index.insert_unique(hash, i, |&j| hasher.hash_one(distinct[j].as_str()));
                i
            })
            .collect();
        let answers = distinct.iter().map(|_| None).collect();
        let next = (0..distinct.len()).map(|i| (i, None)).collect();
        Self {
            table: table.clone(),
            keys: distinct,
            positions,
            answers,
            next,
        }
    }

    /// The key of index `i`.
    pub fn key(&self, i: usize) -> &str {
        &self.keys[i]
    }

    /// The answer of key `i` so far (a hit's value, for the version a refresh replaces).
    pub fn answered(&self, i: usize) -> Option<&Result<Option<V>, Error>> {
        self.answers[i].as_ref()
    }

    /// The most keys per loader call (the cache's `max_batch`).
    pub fn max_batch(&self) -> usize {
        self.table.cfg.max_batch
    }

    /// Looks up the pending keys: hits and errors are answered now, the rest is what the
    /// driver does. `None` when no key is pending: the batch is answered.
    pub fn wave(&mut self) -> Option<BatchWave<V>> {
        if self.next.is_empty() {
            return None;
        }
        let mut out = BatchWave {
            leads: Vec::new(),
            waits: Vec::new(),
            refreshes: Vec::new(),
        };
        for (i, retry) in core::mem::take(&mut self.next) {
            let key = &self.keys[i];
            let step = match retry {
                None => lookup::lookup(&self.table, key, Refresh::IfSpawner),
                Some(r) => lookup::lookup_again(&self.table, key, r, Refresh::IfSpawner),
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
        Some(out)
    }

    /// Answers key `i` (a load's or a wait's end).
    pub fn answer(&mut self, i: usize, answer: Result<Option<V>, Error>) {
        self.answers[i] = Some(answer);
    }

    /// Key `i`'s leader went away: look it up again in the next wave, keeping its first
    /// arrival.
    pub fn retry(&mut self, i: usize, retry: Retry) {
        self.next.push((i, Some(retry)));
    }

    /// The wait for key `i` ended: its answer, or a retry in the next wave when its leader
    /// went away.
    pub fn waited(&mut self, i: usize, waited: Result<Waited<V>, Error>) {
        match waited {
            Ok(Waited::Loaded(v)) => self.answer(i, Ok(v)),
            Ok(Waited::Stale(v)) => self.answer(i, Ok(Some(v))),
            Ok(Waited::Retry(r)) => self.retry(i, r),
            Err(e) => self.answer(i, Err(e)),
        }
    }

    /// Records the answers of a loader call.
    pub(super) fn answer_all(&mut self, answers: Vec<(usize, Answer<V>)>) {
        for (i, a) in answers {
            self.answers[i] = Some(a);
        }
    }

    /// The answers in the request's order.
    ///
    /// # Panics
    /// If a key is not answered yet (the batch was not driven to its end).
    pub fn finish(self) -> Vec<Result<Option<V>, Error>> {
        let mut answers = self.answers;
        // Each answer is moved out at its key's last position, cloned before (duplicates).
        let mut last = alloc::vec![0; answers.len()];
        for (p, &i) in self.positions.iter().enumerate() {
            last[i] = p;
        }
        self.positions
            .iter()
            .enumerate()
            .map(|(p, &i)| {
                let answer = match last[i] == p {
                    true => answers[i].take(),
                    false => answers[i].clone(),
                };
                answer.expect("every distinct key is answered before the batch ends")
            })
            .collect()
    }
}

/// Splits `guards` into loader calls of at most `max` keys each.
pub(super) fn chunks<V: Clone + Send + Sync + 'static>(
    guards: Vec<(usize, LoadGuard<V>)>,
    max: usize,
) -> Vec<Chunk<V>> {
    chunks_of(guards, max).into_iter().map(Chunk::new).collect()
}
