//! `acquire` on memcached (module docs of [`memcached`](super)): one round trip reads the
//! namespace epoch and the key's item and, where nothing is, adds this caller's lease
//! marker; an entry that needs a load is claimed with the meta protocol's stale mark, which
//! hands exactly one reader the win flag.

use herdless::LoadError;
use herdless::backend::{AcquireRequest, Acquired, StoredEntry};
use herdless::key::namespace_of;
use memcache::exp::{AsyncMetaClient, Delete, Get, GetResult, LeaseState, Meta, Op, OpResult, Set};

use super::item::{Item, lease, secs, token};
use super::{FIRST_POLL, Held, MemcachedBackend, memcached_error};
use crate::error::Error;
use crate::metrics::inc;

/// How many rounds an `acquire` makes for an item that others keep changing under it
/// before it answers "contended" and lets its caller wait and ask again.
const ROUNDS: usize = 3;

/// Commands of one round: the epoch, the lease marker added where nothing is, the item.
const PER_ROUND: usize = 3;

/// What one read of an `acquire` decided.
enum Round {
    /// The answer.
    Done(Acquired),
    /// The entry needs a load and nobody holds its lease: claim it (its CAS, and the entry
    /// to serve meanwhile), or, with CAS 0 (nothing there), add a lease marker again.
    Claim(u64, Option<StoredEntry>),
}

impl MemcachedBackend {
    /// The commands of one round for `key`.
    fn round(&self, key: &str, req: &AcquireRequest) -> Result<[Op; PER_ROUND], Error> {
        let name = self.value_name(key);
        let add = Set::new(&name, lease(&req.secret))
            .add()
            .ttl(memcache::exp::Ttl::secs(secs(req.lease)));
        let get = Get::new(&name).meta(Meta::NONE.cas().ttl());
        Ok([
            self.epoch_op(namespace_of(key), 0)?,
            Op::Set(add),
            Op::Get(get),
        ])
    }

    /// Decides a round from its answers (epoch, add, get), in order.
    async fn decide(
        &self,
        key: &str,
        req: &AcquireRequest,
        answers: Vec<Result<OpResult, memcache::exp::Error>>,
    ) -> Result<(u64, Round), Error> {
        let mut answers = answers.into_iter();
        let (epoch, repaired) = self.epoch_of(answers.next(), namespace_of(key)).await?;
        if repaired {
            // The rest of the pipeline is not to be trusted: this round again.
            return Ok((epoch, Round::Claim(0, None)));
        }
        match answers.next() {
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(memcached_error(e)),
            None => return Err(Error::Protocol("memcached answered too little")),
        }
        let g = get_of(answers.next())?;
        Ok((epoch, self.answer(key, req, epoch, &g)))
    }

    /// What a read of `key`'s item means for this caller.
    fn answer(&self, key: &str, req: &AcquireRequest, epoch: u64, g: &GetResult) -> Round {
        let now = req.now_ms;
        let found = Item::read(g.value.as_deref(), epoch);
        let servable = found.servable(now);
        if matches!(found, Item::Outdated { corrupt: true }) {
            inc(&self.inner.metrics.corrupt_entries);
        }
        let cas = g.item.cas.unwrap_or(0);
        let left = g.item.ttl.filter(|t| *t > 0).unwrap_or(1).unsigned_abs();
        let contended = |stale| {
            Round::Done(Acquired::Contended {
                stale,
                remaining: std::time::Duration::from_secs(left).min(req.lease),
            })
        };
        match g.lease_state {
            // This caller's read won the lease of an entry marked stale.
            LeaseState::Granted => {
                if let (Some(e), Some(b)) = (&servable, &g.value) {
                    self.hold(key, cas, b, e.retain_until_ms);
                }
                return Round::Done(Acquired::Locked {
                    token: token(epoch, cas),
                    stale: servable,
                });
            }
            LeaseState::Busy => return contended(servable),
            _ => {}
        }
        match found {
            Item::Lease(m) if m == lease(&req.secret) => Round::Done(Acquired::Locked {
                token: token(epoch, cas),
                stale: None,
            }),
            Item::Lease(_) => contended(None),
            Item::Entry(e) if e.is_fresh(now) && e.version > req.have_version => {
                Round::Done(Acquired::Fresh(e))
            }
            Item::Unshared => Round::Done(Acquired::Unshared),
            // Nothing there: add a lease again.
            Item::Empty if !g.hit() => Round::Claim(0, None),
            // An empty value herdless never writes (another program's): claimed over, as
            // any bytes that are not an entry.
            Item::Empty => {
                inc(&self.inner.metrics.corrupt_entries);
                Round::Claim(cas, None)
            }
            _ => Round::Claim(cas, servable),
        }
    }

    /// Claims an item that needs a load: marked stale for one lease, so that the next read
    /// of it wins the lease (ours, sent right after on the same connection, unless another
    /// reader came between), and a winner that dies holds the key for one lease at most.
    async fn claim(
        &self,
        c: &AsyncMetaClient,
        key: &str,
        req: &AcquireRequest,
        (epoch, cas): (u64, u64),
    ) -> Result<Round, Error> {
        let name = self.value_name(key);
        let mark = Delete::new(&name)
            .invalidate()
            .compare_cas(cas)
            .stale_for_raw(secs(req.lease));
        let get = Get::new(&name).meta(Meta::NONE.cas().ttl());
        let answers = c
            .run_batch([Op::Delete(mark), Op::Get(get)])
            .await
            .map_err(memcached_error)?;
        let g = get_of(answers.into_iter().nth(1))?;
        Ok(self.answer(key, req, epoch, &g))
    }

    /// Rounds after the first (whose answer is `first`) until an answer, counted as every
    /// backend counts an acquire.
    async fn settle(
        &self,
        c: &AsyncMetaClient,
        key: &str,
        req: &AcquireRequest,
        first: (u64, Round),
    ) -> Result<Acquired, Error> {
        let a = self.rounds(c, key, req, first).await?;
        let m = &self.inner.metrics;
        let read = match &a {
            Acquired::Fresh(e) => Some(e),
            Acquired::Locked { stale, .. } | Acquired::Contended { stale, .. } => stale.as_ref(),
            Acquired::Unshared => None,
        };
        m.count_read(read, req.now_ms);
        match &a {
            Acquired::Locked { .. } => inc(&m.fleet_locks_acquired),
            Acquired::Contended { .. } => inc(&m.fleet_locks_contended),
            _ => {}
        }
        Ok(a)
    }

    async fn rounds(
        &self,
        c: &AsyncMetaClient,
        key: &str,
        req: &AcquireRequest,
        first: (u64, Round),
    ) -> Result<Acquired, Error> {
        let (mut epoch, mut round) = first;
        let mut stale = None;
        for _ in 0..ROUNDS {
            let (cas, s) = match round {
                Round::Done(a) => return Ok(a),
                Round::Claim(cas, s) => (cas, s),
            };
            stale = s.or(stale);
            round = match cas {
                0 => {
                    let answers = c.run_batch(self.round(key, req)?).await;
                    let (e, r) = self
                        .decide(key, req, answers.map_err(memcached_error)?)
                        .await?;
                    epoch = e;
                    r
                }
                _ => self.claim(c, key, req, (epoch, cas)).await?,
            };
        }
        match round {
            Round::Done(a) => Ok(a),
            // Changed under us every time: someone else is writing it; wait, ask again.
            Round::Claim(..) => Ok(Acquired::Contended {
                stale,
                remaining: FIRST_POLL,
            }),
        }
    }

    pub(super) async fn acquire_now(
        &self,
        key: &str,
        req: AcquireRequest,
    ) -> Result<Acquired, Error> {
        let c = self.client().await?;
        let answers = c
            .run_batch(self.round(key, &req)?)
            .await
            .map_err(memcached_error)?;
        let first = self.decide(key, &req, answers).await?;
        self.settle(c, key, &req, first).await
    }

    /// Every key's first round in one pipeline (one round trip; memcached runs a
    /// connection's commands in order), then each key on its own.
    pub(super) async fn acquire_all(
        &self,
        requests: &[(String, AcquireRequest)],
    ) -> Result<Vec<Result<Acquired, LoadError>>, Error> {
        let c = self.client().await?;
        let mut ops = Vec::with_capacity(requests.len() * PER_ROUND);
        for (key, req) in requests {
            ops.extend(self.round(key, req)?);
        }
        inc(&self.inner.metrics.batch_round_trips);
        let mut answers = c.run_batch(ops).await.map_err(memcached_error)?.into_iter();
        let mut out = Vec::with_capacity(requests.len());
        for (key, req) in requests {
            let mine: Vec<_> = answers.by_ref().take(PER_ROUND).collect();
            let one = async {
                let first = self.decide(key, req, mine).await?;
                self.settle(c, key, req, first).await
            };
            out.push(one.await.map_err(|e| {
                inc(&self.inner.metrics.backend_errors);
                LoadError::new(e)
            }));
        }
        Ok(out)
    }

    fn hold(&self, key: &str, cas: u64, bytes: &[u8], retain_until_ms: u64) {
        let held = Held {
            cas,
            bytes: bytes.to_vec(),
            retain_until_ms,
        };
        let mut map = self.inner.held.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(key.to_owned(), held);
    }

    /// The stale entry this process's lease on `key` (won with `cas`) replaced, if any.
    pub(super) fn take_held(&self, key: &str, cas: u64) -> Option<Held> {
        let mut map = self.inner.held.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(key) {
            Some(h) if h.cas == cas => map.remove(key),
            _ => None,
        }
    }
}

/// The get of a pipeline's answers.
pub(super) fn get_of(
    answer: Option<Result<OpResult, memcache::exp::Error>>,
) -> Result<GetResult, Error> {
    match answer {
        Some(Ok(OpResult::Get(g))) => Ok(g),
        Some(Err(e)) => Err(memcached_error(e)),
        _ => Err(Error::Protocol(
            "memcached answered a get with something else",
        )),
    }
}
