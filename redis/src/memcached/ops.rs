//! The core's [`Backend`] on memcached: each operation of PROTOCOL.md section 3 done with
//! meta commands on one item at a time (module docs of [`memcached`](super)).

use std::time::Duration;

use herdless::backend::{
    AcquireRequest, Acquired, Backend, BackendFuture, Listener, LockToken, StoredEntry, Watch,
    WriteOutcome,
};
use herdless::key::namespace_of;
use memcache::exp::{
    Arithmetic, AsyncMetaClient, Delete, Get, GetResult, LeaseState, Meta, MutationStatus, Op,
    OpResult, Set, Ttl,
};

use super::{FIRST_POLL, Held, MemcachedBackend, memcached_error, names};
use crate::error::Error;
use crate::metrics::inc;
use crate::wall::{now_ms, now_us, random_secret};
use crate::wire;

/// The "load locally" mark of PROTOCOL.md section 3, as memcached holds it: the whole item
/// is `herdless:unshared:<epoch>`, so it can never be read as an entry.
const UNSHARED: &str = "herdless:unshared:";

/// How long an epoch is kept after its last use, in seconds: 30 days, the longest time
/// memcached takes as relative.
const EPOCH_LIFE: u32 = 30 * 86_400;

/// How many times an `acquire` claims an entry that others keep replacing before it
/// answers "contended" and lets its caller wait.
const CLAIMS: usize = 3;

/// Whole seconds covering `d`, at least 1 (memcached's times are seconds).
fn secs(d: Duration) -> u32 {
    let s = d.as_millis().div_ceil(1000).max(1);
    u32::try_from(s).unwrap_or(u32::MAX)
}

/// The seconds from now until `until_ms`, at least 1.
fn secs_until(until_ms: u64, now: u64) -> u32 {
    secs(Duration::from_millis(until_ms.saturating_sub(now)))
}

/// A fresh epoch: random below 2^52, never 0, so an epoch memcached evicted comes back as a
/// number no entry was written under (PROTOCOL.md, "The memcached tier").
fn fresh_epoch() -> Result<u64, Error> {
    let b = random_secret()?;
    let n = u64::from_be_bytes(b[..8].try_into().expect("8 bytes")) >> 12;
    Ok(n.max(1))
}

/// The lock token of a won lease: the epoch, and the item's CAS (what the commit compares).
fn token(epoch: u64, cas: u64) -> LockToken {
    let mut secret = [0u8; 16];
    secret[..8].copy_from_slice(&cas.to_be_bytes());
    LockToken { epoch, secret }
}

/// The CAS a token was won with.
fn cas_of(token: &LockToken) -> u64 {
    u64::from_be_bytes(token.secret[..8].try_into().expect("8 bytes"))
}

/// What an item read answered, as herdless reads it.
enum Item {
    /// No item, or a lease placeholder (empty).
    Empty,
    /// An entry of the current epoch.
    Entry(StoredEntry),
    /// The "load locally" mark of the current epoch.
    Unshared,
    /// Anything else: an entry of another epoch, another epoch's mark, or bytes that are
    /// not an entry (`corrupt`).
    Outdated {
        /// Not herdless's bytes.
        corrupt: bool,
    },
}

/// What one read of an `acquire` decided.
enum Round {
    /// The answer.
    Done(Acquired),
    /// The entry needs a load and nobody holds its lease: claim it (its CAS, and the entry
    /// to serve meanwhile).
    Claim(u64, Option<StoredEntry>),
}

fn item(value: Option<&[u8]>, epoch: u64) -> Item {
    let Some(b) = value.filter(|b| !b.is_empty()) else {
        return Item::Empty;
    };
    if let Some(e) = b.strip_prefix(UNSHARED.as_bytes()) {
        let same = std::str::from_utf8(e).ok().and_then(|e| e.parse().ok()) == Some(epoch);
        return match same {
            true => Item::Unshared,
            false => Item::Outdated { corrupt: false },
        };
    }
    match wire::decode(b) {
        Ok(e) if e.epoch == epoch => Item::Entry(e),
        Ok(_) => Item::Outdated { corrupt: false },
        Err(_) => Item::Outdated { corrupt: true },
    }
}

impl MemcachedBackend {
    fn value_name(&self, key: &str) -> String {
        names::value(&self.inner.prefix, key)
    }

    fn epoch_name(&self, namespace: &str) -> String {
        names::epoch(&self.inner.prefix, namespace)
    }

    /// The epoch of `key`'s namespace and `key`'s item (`lease`: vivified for that long when
    /// missing, granting this caller the lease) in one round trip.
    async fn epoch_and_item(
        &self,
        c: &AsyncMetaClient,
        key: &str,
        lease: Option<u32>,
    ) -> Result<(u64, GetResult), Error> {
        let mut get = Get::new(self.value_name(key)).meta(Meta::NONE.cas().ttl());
        if let Some(l) = lease {
            get = get.lease_ttl(l);
        }
        let ops = [self.epoch_op(namespace_of(key), 0)?, Op::Get(get)];
        let mut answers = c.run_batch(ops).await.map_err(memcached_error)?.into_iter();
        let epoch = self.epoch_of(answers.next(), namespace_of(key)).await?;
        match answers.next() {
            Some(Ok(OpResult::Get(g))) => Ok((epoch, g)),
            Some(Err(e)) => Err(memcached_error(e)),
            _ => Err(Error::Protocol(
                "memcached answered a get with something else",
            )),
        }
    }

    /// `ma` on a namespace's epoch, adding `delta`; made at a random number when missing.
    /// Every use keeps it [`EPOCH_LIFE`] more: only a namespace unused that long loses it
    /// (and with it every entry, which have long expired by then).
    fn epoch_op(&self, namespace: &str, delta: u64) -> Result<Op, Error> {
        let op = Arithmetic::new(self.epoch_name(namespace))
            .delta(delta)
            .initial(fresh_epoch()?, EPOCH_LIFE)
            .ttl(Ttl::secs(EPOCH_LIFE));
        Ok(Op::Arithmetic(op))
    }

    /// The epoch an `ma` answered. Text that is no counter (memcached refuses to add to it)
    /// is removed, counted corrupt, and the call fails; the next one makes a new epoch.
    async fn epoch_of(
        &self,
        answer: Option<Result<OpResult, memcache::exp::Error>>,
        namespace: &str,
    ) -> Result<u64, Error> {
        match answer {
            Some(Ok(OpResult::Arithmetic(a))) => a
                .value
                .ok_or(Error::Protocol("memcached answered no epoch")),
            Some(Err(memcache::exp::Error::Rejected(_))) => {
                inc(&self.inner.metrics.corrupt_entries);
                let c = self.client().await?;
                let _ = c.delete(self.epoch_name(namespace)).send().await;
                Err(Error::Protocol(
                    "a namespace epoch was not a number (removed)",
                ))
            }
            Some(Err(e)) => Err(memcached_error(e)),
            _ => Err(Error::Protocol(
                "memcached answered an epoch with something else",
            )),
        }
    }

    fn corrupt(&self, corrupt: bool) {
        if corrupt {
            inc(&self.inner.metrics.corrupt_entries);
        }
    }

    /// What one round of `acquire` found.
    fn answer(&self, key: &str, req: &AcquireRequest, epoch: u64, g: &GetResult) -> Round {
        let now = req.now_ms;
        let found = item(g.value.as_deref(), epoch);
        let (corrupt, servable) = match &found {
            Item::Entry(e) if e.is_servable(now) => (false, Some(e.clone())),
            Item::Outdated { corrupt } => (*corrupt, None),
            _ => (false, None),
        };
        self.corrupt(corrupt);
        let cas = g.item.cas.unwrap_or(0);
        match g.lease_state {
            LeaseState::Granted => {
                if let (Some(e), Some(b)) = (&servable, &g.value) {
                    self.hold(key, cas, b, e.retain_until_ms);
                }
                Round::Done(Acquired::Locked {
                    token: token(epoch, cas),
                    stale: servable,
                })
            }
            LeaseState::Busy => {
                let left = g.item.ttl.filter(|t| *t > 0).unwrap_or(1);
                Round::Done(Acquired::Contended {
                    stale: servable,
                    remaining: Duration::from_secs(left.unsigned_abs()).min(req.lease),
                })
            }
            _ => match found {
                Item::Entry(e) if e.is_fresh(now) && e.version > req.have_version => {
                    Round::Done(Acquired::Fresh(e))
                }
                Item::Unshared => Round::Done(Acquired::Unshared),
                _ => Round::Claim(cas, servable),
            },
        }
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
    fn take_held(&self, key: &str, cas: u64) -> Option<Held> {
        let mut map = self.inner.held.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(key) {
            Some(h) if h.cas == cas => map.remove(key),
            _ => None,
        }
    }

    async fn acquire_now(&self, key: &str, req: AcquireRequest) -> Result<Acquired, Error> {
        let c = self.client().await?;
        let lease = secs(req.lease);
        let (epoch, g) = self.epoch_and_item(c, key, Some(lease)).await?;
        let (mut cas, mut stale) = match self.answer(key, &req, epoch, &g) {
            Round::Done(a) => return Ok(a),
            Round::Claim(cas, stale) => (cas, stale),
        };
        for _ in 0..CLAIMS {
            // Marked stale for one lease: the next read of it wins the lease (ours, sent
            // right after on the same connection, unless another reader came between), and
            // a winner that dies blocks the key for one lease at most.
            let name = self.value_name(key);
            let mark = Delete::new(&name)
                .invalidate()
                .compare_cas(cas)
                .stale_for_raw(lease);
            let get = Get::new(&name)
                .meta(Meta::NONE.cas().ttl())
                .lease_ttl(lease);
            let answers = c
                .run_batch([Op::Delete(mark), Op::Get(get)])
                .await
                .map_err(memcached_error)?;
            let g = match answers.into_iter().nth(1) {
                Some(Ok(OpResult::Get(g))) => g,
                Some(Err(e)) => return Err(memcached_error(e)),
                _ => {
                    return Err(Error::Protocol(
                        "memcached answered a get with something else",
                    ));
                }
            };
            match self.answer(key, &req, epoch, &g) {
                Round::Done(a) => return Ok(a),
                Round::Claim(c2, s2) => (cas, stale) = (c2, s2.or(stale)),
            }
        }
        // Replaced under us every time: someone else is writing it; wait and ask again.
        Ok(Acquired::Contended {
            stale,
            remaining: FIRST_POLL,
        })
    }

    async fn commit_now(
        &self,
        key: &str,
        mut entry: StoredEntry,
        token: Option<&LockToken>,
    ) -> Result<WriteOutcome, Error> {
        let c = self.client().await?;
        let name = self.value_name(key);
        let now = now_ms();
        let ttl = Ttl::secs(secs_until(entry.retain_until_ms, now));
        let Some(token) = token else {
            // A set: stored whatever is there (a lease's placeholder or mark too, so the
            // load that holds it cannot overwrite this), under the current epoch.
            let (epoch, g) = self.epoch_and_item(c, key, None).await?;
            let older = match item(g.value.as_deref(), epoch) {
                Item::Entry(e) => e.version,
                _ => 0,
            };
            entry.version = now_us().max(older + 1);
            entry.epoch = epoch;
            let set = Set::new(&name, wire::encode(&entry)).ttl(ttl);
            c.run(set).await.map_err(memcached_error)?;
            return Ok(WriteOutcome::Written {
                version: entry.version,
                epoch,
            });
        };
        let cas = cas_of(token);
        let older = self
            .take_held(key, cas)
            .and_then(|h| wire::decode(&h.bytes).ok());
        entry.version = now_us().max(older.map_or(0, |e| e.version + 1));
        entry.epoch = token.epoch;
        // The epoch is read in the same round trip: a bump before the store makes the
        // entry one of an older epoch, which no reader serves.
        let set = Set::new(&name, wire::encode(&entry))
            .ttl(ttl)
            .compare_cas(cas);
        let ops = [self.epoch_op(namespace_of(key), 0)?, Op::Set(set)];
        let mut answers = c.run_batch(ops).await.map_err(memcached_error)?.into_iter();
        let epoch = self.epoch_of(answers.next(), namespace_of(key)).await?;
        let stored = match answers.next() {
            Some(Ok(OpResult::Mutation(m))) => m.status == MutationStatus::Applied,
            Some(Err(e)) => return Err(memcached_error(e)),
            _ => {
                return Err(Error::Protocol(
                    "memcached answered a set with something else",
                ));
            }
        };
        Ok(match stored && epoch == token.epoch {
            true => WriteOutcome::Written {
                version: entry.version,
                epoch,
            },
            false => WriteOutcome::Superseded,
        })
    }

    async fn release_now(&self, key: &str, token: &LockToken) -> Result<bool, Error> {
        let c = self.client().await?;
        let name = self.value_name(key);
        let cas = cas_of(token);
        let now = now_ms();
        // A failed refresh puts the stale entry back (its mark and lease go with the
        // replaced item): the next reader claims it again, and it stays for fail-safe.
        let status = match self.take_held(key, cas) {
            Some(h) if h.retain_until_ms > now => {
                let ttl = Ttl::secs(secs_until(h.retain_until_ms, now));
                let set = Set::new(&name, h.bytes).ttl(ttl).compare_cas(cas);
                c.run(set).await.map_err(memcached_error)?.status
            }
            _ => {
                let del = Delete::new(&name).compare_cas(cas);
                c.run(del).await.map_err(memcached_error)?.status
            }
        };
        Ok(status == MutationStatus::Applied)
    }

    /// Whether `key`'s item still has the CAS `token` was won with.
    async fn owns(
        &self,
        c: &AsyncMetaClient,
        name: &str,
        token: &LockToken,
    ) -> Result<bool, Error> {
        let get = Get::new(name).meta(Meta::NONE.cas()).without_value();
        let g = c.run(get).await.map_err(memcached_error)?;
        Ok(g.item.cas == Some(cas_of(token)))
    }
}

impl Backend for MemcachedBackend {
    fn read<'a>(&'a self, key: &'a str, now: u64) -> BackendFuture<'a, Option<StoredEntry>> {
        self.run("read", async move {
            let c = self.client().await?;
            let (epoch, g) = self.epoch_and_item(c, key, None).await?;
            if g.lease_state == LeaseState::Granted {
                // A read took the lease of an entry another process just claimed: hand it
                // back (marked again, so the next reader wins it) rather than let the key
                // wait a lease for a load nobody runs.
                let cas = g.item.cas.unwrap_or(0);
                let ttl = secs(Duration::from_secs(
                    g.item.ttl.unwrap_or(1).max(1).unsigned_abs(),
                ));
                let mark = Delete::new(self.value_name(key))
                    .invalidate()
                    .compare_cas(cas)
                    .stale_for_raw(ttl);
                let _ = c.run(mark).await;
            }
            Ok(match item(g.value.as_deref(), epoch) {
                Item::Entry(e) if e.is_servable(now) => Some(e),
                Item::Outdated { corrupt } => {
                    self.corrupt(corrupt);
                    None
                }
                _ => None,
            })
        })
    }

    fn acquire<'a>(&'a self, key: &'a str, req: AcquireRequest) -> BackendFuture<'a, Acquired> {
        self.run("acquire", self.acquire_now(key, req))
    }

    fn extend<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
        lease: Duration,
    ) -> BackendFuture<'a, bool> {
        self.run("extend", async move {
            let c = self.client().await?;
            let name = self.value_name(key);
            // Checked, then touched: a write landing between the two (one round trip)
            // keeps its entry in memcached for one lease instead of its retention.
            if !self.owns(c, &name, token).await? {
                return Ok(false);
            }
            let touch = Get::new(&name)
                .without_value()
                .touch(Ttl::secs(secs(lease)));
            Ok(c.run(touch).await.map_err(memcached_error)?.hit())
        })
    }

    fn release<'a>(&'a self, key: &'a str, token: &'a LockToken) -> BackendFuture<'a, bool> {
        self.run("release", self.release_now(key, token))
    }

    /// Nothing to do: the lease of an acquire whose answer never came is the item's CAS,
    /// which this process never learnt; its placeholder or stale mark expires after one
    /// lease (the bound a dead leader has anyway).
    fn forget<'a>(&'a self, _key: &'a str, _secret: &'a [u8; 16]) -> BackendFuture<'a, bool> {
        Box::pin(async { Ok(false) })
    }

    fn mark_unshared<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
        hold: Duration,
    ) -> BackendFuture<'a, bool> {
        self.run("unshare", async move {
            let c = self.client().await?;
            let _ = self.take_held(key, cas_of(token));
            let mark = format!("{UNSHARED}{}", token.epoch);
            let set = Set::new(self.value_name(key), mark)
                .ttl(Ttl::secs(secs(hold)))
                .compare_cas(cas_of(token));
            Ok(c.run(set).await.map_err(memcached_error)?.applied())
        })
    }

    fn commit<'a>(
        &'a self,
        key: &'a str,
        entry: StoredEntry,
        token: Option<&'a LockToken>,
    ) -> BackendFuture<'a, WriteOutcome> {
        self.run("commit", self.commit_now(key, entry, token))
    }

    fn touch<'a>(&'a self, key: &'a str, tti: Duration) -> BackendFuture<'a, bool> {
        self.run("touch", async move {
            let c = self.client().await?;
            let name = self.value_name(key);
            let life = secs(tti * 5 / 4);
            let get = Get::new(&name).meta(Meta::NONE.ttl()).without_value();
            let g = c.run(get).await.map_err(memcached_error)?;
            // Lengthened only: never shortens what another process's read kept.
            match g.item.ttl {
                Some(t) if g.hit() && t >= 0 && t < i64::from(life) => {
                    let touch = Get::new(&name).without_value().touch(Ttl::secs(life));
                    Ok(c.run(touch).await.map_err(memcached_error)?.hit())
                }
                _ => Ok(false),
            }
        })
    }

    fn invalidate<'a>(&'a self, key: &'a str) -> BackendFuture<'a, bool> {
        self.run("invalidate", async move {
            let c = self.client().await?;
            // The placeholder or stale mark of a running load goes too: its commit fails.
            let r = c.run(Delete::new(self.value_name(key))).await;
            Ok(r.map_err(memcached_error)?.applied())
        })
    }

    fn bump<'a>(&'a self, namespace: &'a str) -> BackendFuture<'a, u64> {
        self.run("bump", async move {
            let c = self.client().await?;
            let answers = c.run_batch([self.epoch_op(namespace, 1)?]).await;
            let answer = answers.map_err(memcached_error)?.into_iter().next();
            self.epoch_of(answer, namespace).await
        })
    }

    fn watch<'a>(&'a self, _key: &'a str) -> BackendFuture<'a, Box<dyn Watch>> {
        Box::pin(async { Ok(Box::new(super::Poll { next: FIRST_POLL }) as Box<dyn Watch>) })
    }

    /// Nobody is told anything on memcached: no listener is ever called.
    fn listen(&self, _listener: Listener) {}
}
