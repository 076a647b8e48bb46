//! [`Fleet::lead_many`]: the lock protocol for the keys of a batch. Their locks and entries
//! are asked for together ([`Backend::acquire_many`](herdless::backend::Backend::acquire_many)),
//! and each key's answer is then its own: a key whose part of the exchange failed (its
//! Cluster node down or stalled past `op_timeout`) follows the failure policy alone (it is
//! loaded in this process and not published), while the keys the tier answered lock, load
//! and publish as if nothing had failed (PROTOCOL.md, "Batch loads").

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;

use herdless::backend::{AcquireRequest, Acquired, StoredEntry};

use super::{AbortOnDrop, Fleet, FleetLease, FleetOutcome, Judged};
use crate::join::join_all;
use crate::wall::{now_ms, random_secret};

/// One key's answer, judged by its tags, in progress.
type Judging<'a> = Pin<Box<dyn Future<Output = Result<Judged, herdless::LoadError>> + Send + 'a>>;

impl Fleet {
    /// [`lead`](Self::lead) for many keys at once (a batch load), each with its
    /// `have_version`: their locks are asked for together, in one round trip per Cluster
    /// slot group ([`Backend::acquire_many`](herdless::backend::Backend::acquire_many); one
    /// in all on a single server), which also reads their entries. Each key's answer is its
    /// own: a slot group that fails or stalls (bounded by `op_timeout`) answers the tier's
    /// error for its own keys only. One answer per key, in order; `None` for a key another
    /// process is loading with nothing to serve meanwhile: the caller waits for it with
    /// [`lead_until`](Self::lead_until) once its own loads of the batch are done, so that
    /// two batches holding each other's keys never wait on each other.
    pub async fn lead_many(
        &self,
        keys: Vec<(String, u64)>,
    ) -> Vec<Option<Result<FleetOutcome, herdless::Error>>> {
        let this = self.clone();
        let n = keys.len();
        let mut task = AbortOnDrop(
            self.rt
                .spawn(async move { this.lead_many_inner(keys).await }),
        );
        match (&mut task.0).await {
            Ok(r) => r,
            Err(e) => (0..n)
                .map(|_| {
                    let e = herdless::LoadError::new(std::io::Error::other(e.to_string()));
                    Some(Err(herdless::Error::Backend(e)))
                })
                .collect(),
        }
    }

    async fn lead_many_inner(
        &self,
        keys: Vec<(String, u64)>,
    ) -> Vec<Option<Result<FleetOutcome, herdless::Error>>> {
        let mut requests = Vec::with_capacity(keys.len());
        for (key, have_version) in &keys {
            let secret = match random_secret() {
                Ok(s) => s,
                Err(e) => {
                    let e = herdless::Error::from(e);
                    return keys.iter().map(|_| Some(Err(e.clone()))).collect();
                }
            };
            let req = AcquireRequest {
                now_ms: now_ms(),
                lease: self.opts.lease,
                secret,
                have_version: *have_version,
            };
            requests.push((key.clone(), req));
        }
        let answers = match self.backend.acquire_many(&requests).await {
            Ok(a) => a,
            Err(e) => requests.iter().map(|_| Err(e.clone())).collect(),
        };
        // The stamps of every tag the answers carry, in one exchange (each key's judging
        // then finds them known); judged all at once, so that tags whose stamps sit on a
        // stalled node cost the batch about one `op_timeout` more, not one per key.
        let mut seen = HashSet::new();
        let tags: Vec<String> = answers
            .iter()
            .filter_map(|a| entry_of(a.as_ref().ok()?))
            .flat_map(|e| &e.tags)
            .filter(|t| seen.insert(t.as_str()))
            .cloned()
            .collect();
        if !tags.is_empty() {
            // A failure is met again, key by key, by the judging below (and counted there).
            if let Ok(records) = self.tags.fetch_records(&tags).await {
                let cache = self.tags.stamp_cache();
                for (t, r) in tags.iter().zip(records) {
                    cache.learn(t, r);
                }
            }
        }
        let judging: Vec<Judging<'_>> = answers
            .into_iter()
            .map(|a| -> Judging<'_> {
                Box::pin(async move {
                    match a {
                        Ok(a) => self.judge_acquired(a).await,
                        Err(e) => Err(e),
                    }
                })
            })
            .collect();
        let judged = join_all(judging).await;
        let mut out = Vec::with_capacity(keys.len());
        for ((key, req), acquired) in requests.iter().zip(judged) {
            out.push(match acquired {
                Err(e) => {
                    // This key's part failed: as a single acquire that failed, its lock
                    // (if the tier took one after all) is forgotten when the tier answers.
                    self.forget_later(key, req.secret);
                    Some(Err(self.failed(key, e)))
                }
                // Fresh in the tier, not by its tags: asked again alone, later.
                Ok(Judged::PastFresh(_)) => None,
                Ok(Judged::Ready(Acquired::Fresh(e))) => {
                    self.read_entry(key, Some(&e));
                    Some(Ok(FleetOutcome::Fresh(e)))
                }
                Ok(Judged::Ready(Acquired::Locked { token, stale })) => Some(Ok(
                    FleetOutcome::Lead(FleetLease::start(self.clone(), key, token, stale)),
                )),
                Ok(Judged::Ready(Acquired::Contended { stale: Some(e), .. }))
                    if e.version > req.have_version =>
                {
                    Some(Ok(FleetOutcome::Stale(e)))
                }
                Ok(Judged::Ready(Acquired::Unshared)) => Some(Ok(FleetOutcome::Unshared)),
                // Waited for (and counted) by `lead_until`, later.
                Ok(Judged::Ready(Acquired::Contended { .. })) => None,
            });
        }
        out
    }
}

/// The entry an acquire's answer carries, if any (what its tags are judged on).
fn entry_of(a: &Acquired) -> Option<&StoredEntry> {
    match a {
        Acquired::Fresh(e) => Some(e),
        Acquired::Locked { stale, .. } | Acquired::Contended { stale, .. } => stale.as_ref(),
        Acquired::Unshared => None,
    }
}
