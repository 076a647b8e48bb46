//! The fleet lock of PROTOCOL.md on a [`MemoryStore`](super::MemoryStore)'s data, as its
//! scripts do: `acquire` for one key or for the keys of a batch (one exchange per
//! namespace: a Cluster slot group), `extend`, and the scripts that free it (`release`,
//! `forget`, `unshare`).

use std::time::Duration;

use herdless::backend::{AcquireRequest, Acquired, BackendFuture, LockToken};
use herdless::key::namespace_of;

use super::{MemoryBackend, lock_epoch, lock_text, names, slot};
use crate::join::join_all;
use crate::memory::{Data, ms};
use crate::metrics::inc;
use crate::wire;

/// One answer per request of a batch, in order.
type Answers = Vec<Result<Acquired, herdless::LoadError>>;

impl MemoryBackend {
    /// [`Backend::acquire`](herdless::backend::Backend::acquire).
    pub(super) fn acquire_one<'a>(
        &'a self,
        key: &'a str,
        req: AcquireRequest,
    ) -> BackendFuture<'a, Acquired> {
        let (owned, now_ms) = (key.to_owned(), req.now_ms);
        Box::pin(async move {
            let (acquired, corrupt) = self
                .op_on("acquire", slot(key), move |s, now| {
                    acquire_in(&mut s.data(), &owned, &req, now)
                })
                .await?;
            Ok(self.counted(acquired, corrupt, now_ms))
        })
    }

    /// [`Backend::acquire_many`](herdless::backend::Backend::acquire_many): one exchange
    /// per namespace, all at once, each under its own namespace's fault and `op_timeout`.
    pub(super) fn acquire_batch<'a>(
        &'a self,
        requests: &'a [(String, AcquireRequest)],
    ) -> BackendFuture<'a, Answers> {
        Box::pin(async move {
            inc(&self.inner.metrics.batch_round_trips);
            let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
            for (i, (key, _)) in requests.iter().enumerate() {
                let ns = namespace_of(key);
                match groups.iter_mut().find(|(g, _)| *g == ns) {
                    Some((_, members)) => members.push(i),
                    None => groups.push((ns, vec![i])),
                }
            }
            let parts: Vec<BackendFuture<'a, Vec<(Acquired, bool)>>> = groups
                .iter()
                .map(|(ns, members)| {
                    let batch: Vec<(String, AcquireRequest)> =
                        members.iter().map(|&i| requests[i].clone()).collect();
                    self.op_on("acquire", Some((*ns).to_owned()), move |s, now| {
                        // One pipeline: the group's keys in one step, as Redis runs it.
                        let mut d = s.data();
                        batch
                            .iter()
                            .map(|(key, req)| acquire_in(&mut d, key, req, now))
                            .collect()
                    })
                })
                .collect();
            let mut out: Vec<Option<Result<Acquired, herdless::LoadError>>> =
                requests.iter().map(|_| None).collect();
            for ((_, members), answered) in groups.iter().zip(join_all(parts).await) {
                match answered {
                    Ok(replies) => {
                        for (&i, (acquired, corrupt)) in members.iter().zip(replies) {
                            out[i] =
                                Some(Ok(self.counted(acquired, corrupt, requests[i].1.now_ms)));
                        }
                    }
                    Err(e) => {
                        for &i in members {
                            out[i] = Some(Err(e.clone()));
                        }
                    }
                }
            }
            Ok(out
                .into_iter()
                .map(|a| a.expect("every member of a group is answered"))
                .collect())
        })
    }

    /// [`Backend::extend`](herdless::backend::Backend::extend).
    pub(super) fn extend_lock<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
        lease: Duration,
    ) -> BackendFuture<'a, bool> {
        let (key, value) = (key.to_owned(), lock_text(token));
        self.op_on("extend", slot(&key), move |s, now| {
            let n = names(&key);
            let mut d = s.data();
            if d.get(&n.lock, now).0.as_deref() == Some(value.as_bytes()) {
                d.set(&n.lock, value.into_bytes(), Some(ms(lease)), now);
                return true;
            }
            false
        })
    }

    /// [`Backend::release`](herdless::backend::Backend::release).
    pub(super) fn release_lock<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
    ) -> BackendFuture<'a, bool> {
        let (key, value, origin) = (key.to_owned(), lock_text(token), self.origin().to_owned());
        self.op_on("release", slot(&key), move |s, now| {
            let n = names(&key);
            let released = {
                let mut d = s.data();
                let mine = d.get(&n.lock, now).0.as_deref() == Some(value.as_bytes());
                if mine {
                    d.keys.remove(&n.lock);
                }
                mine
            };
            if released {
                s.publish('r', &origin, 0, &key);
            }
            released
        })
    }

    /// [`Backend::forget`](herdless::backend::Backend::forget).
    pub(super) fn forget_lock<'a>(
        &'a self,
        key: &'a str,
        secret: &'a [u8; 16],
    ) -> BackendFuture<'a, bool> {
        let (key, hex, origin) = (
            key.to_owned(),
            crate::wall::hex(secret),
            self.origin().to_owned(),
        );
        self.op_on("forget", slot(&key), move |s, now| {
            let n = names(&key);
            let forgot = {
                let mut d = s.data();
                let cur = d.get(&n.lock, now).0;
                let ours = cur.as_deref().and_then(|c| {
                    let c = std::str::from_utf8(c).ok()?;
                    let (e, h) = c.split_once(':')?;
                    Some(e.bytes().all(|b| b.is_ascii_digit()) && h == hex)
                });
                if ours == Some(true) {
                    d.keys.remove(&n.lock);
                }
                ours == Some(true)
            };
            if forgot {
                s.publish('r', &origin, 0, &key);
            }
            forgot
        })
    }

    /// [`Backend::mark_unshared`](herdless::backend::Backend::mark_unshared).
    pub(super) fn unshare_lock<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
        hold: Duration,
    ) -> BackendFuture<'a, bool> {
        let (key, value, origin) = (key.to_owned(), lock_text(token), self.origin().to_owned());
        let epoch = token.epoch;
        self.op_on("unshare", slot(&key), move |s, now| {
            let n = names(&key);
            let marked = {
                let mut d = s.data();
                let mine = d.get(&n.lock, now).0.as_deref() == Some(value.as_bytes());
                if mine {
                    let mark = format!("unshared:{epoch}").into_bytes();
                    d.set(&n.lock, mark, Some(ms(hold)), now);
                }
                mine
            };
            if marked {
                s.publish('r', &origin, 0, &key);
            }
            marked
        })
    }

    /// An acquire's answer, counted as Redis's are.
    fn counted(&self, acquired: Acquired, corrupt: bool, now_ms: u64) -> Acquired {
        let m = &self.inner.metrics;
        if corrupt {
            inc(&m.corrupt_entries);
        }
        match &acquired {
            Acquired::Fresh(e) => self.inner.metrics.count_read(Some(e), now_ms),
            Acquired::Locked { stale, .. } => {
                inc(&m.fleet_locks_acquired);
                self.inner.metrics.count_read(stale.as_ref(), now_ms);
            }
            Acquired::Contended { stale, .. } => {
                inc(&m.fleet_locks_contended);
                self.inner.metrics.count_read(stale.as_ref(), now_ms);
            }
            Acquired::Unshared => {}
        }
        acquired
    }
}

/// The acquire script on `d` for `key`: the answer, and whether corrupt state was healed.
fn acquire_in(d: &mut Data, key: &str, req: &AcquireRequest, now: u64) -> (Acquired, bool) {
    let n = names(key);
    let (ep, mut corrupt) = d.epoch(&n.epoch, req.now_ms.max(now));
    let (raw, bad) = d.get(&n.value, now);
    corrupt |= bad;
    let mut keep = None;
    if let Some(raw) = raw {
        match wire::decode(&raw) {
            Err(_) => corrupt = true,
            Ok(e) if e.epoch == ep && req.now_ms < e.stale_until_ms => {
                if req.now_ms < e.fresh_until_ms && e.version > req.have_version {
                    return (Acquired::Fresh(e), corrupt);
                }
                keep = Some(e);
            }
            Ok(_) => {}
        }
    }
    let (cur, bad) = d.get(&n.lock, now);
    corrupt |= bad;
    if let Some(cur) = cur {
        let pttl = d.pttl(&n.lock, now);
        if pttl > 0 {
            if lock_epoch(&cur) == Some(ep) {
                let remaining = Duration::from_millis(pttl as u64);
                return (
                    Acquired::Contended {
                        stale: keep,
                        remaining,
                    },
                    corrupt,
                );
            }
            if cur == format!("unshared:{ep}").as_bytes() {
                return (Acquired::Unshared, corrupt);
            }
        }
    }
    let value = format!("{ep}:{}", crate::wall::hex(&req.secret));
    d.set(&n.lock, value.into_bytes(), Some(ms(req.lease)), now);
    let token = LockToken {
        epoch: ep,
        secret: req.secret,
    };
    (Acquired::Locked { token, stale: keep }, corrupt)
}
