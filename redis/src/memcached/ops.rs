//! The core's [`Backend`] on memcached: each operation of PROTOCOL.md section 3 done with
//! meta commands on one item at a time (module docs of [`memcached`](super)).

use std::time::Duration;

use herdless::LoadError;
use herdless::backend::{
    AcquireRequest, Acquired, Backend, BackendFuture, Listener, LockToken, StoredEntry, Watch,
    WriteOutcome,
};
use herdless::key::namespace_of;
use memcache::exp::{
    Arithmetic, AsyncMetaClient, Delete, Get, GetResult, LeaseState, Meta, MutationStatus, Op,
    OpResult, Set, Ttl,
};

use super::acquire::get_of;
use super::item::{Item, UNSHARED, cas_of, fresh_epoch, item_ttl, lease, secs};
use super::{FIRST_POLL, MemcachedBackend, memcached_error, names};
use crate::error::Error;
use crate::metrics::inc;
use crate::wall::{now_ms, now_us};
use crate::wire;

/// How long an epoch is kept after its last use, in seconds: 30 days, the longest time
/// memcached takes as relative.
const EPOCH_LIFE: u32 = 30 * 86_400;

impl MemcachedBackend {
    pub(super) fn value_name(&self, key: &str) -> String {
        names::value(&self.inner.prefix, key)
    }

    pub(super) fn epoch_name(&self, namespace: &str) -> String {
        names::epoch(&self.inner.prefix, namespace)
    }

    /// The epoch of `key`'s namespace and `key`'s item, in one round trip.
    pub(super) async fn epoch_and_item(
        &self,
        c: &AsyncMetaClient,
        key: &str,
    ) -> Result<(u64, GetResult), Error> {
        for _ in 0..2 {
            let get = Get::new(self.value_name(key)).meta(Meta::NONE.cas().ttl());
            let ops = [self.epoch_op(namespace_of(key), 0)?, Op::Get(get)];
            let mut answers = c.run_batch(ops).await.map_err(memcached_error)?.into_iter();
            match self.epoch_of(answers.next(), namespace_of(key)).await? {
                (epoch, false) => return Ok((epoch, get_of(answers.next())?)),
                // Repaired: read again under the new epoch.
                (_, true) => continue,
            }
        }
        Err(Error::Protocol("a namespace epoch could not be repaired"))
    }

    /// `ma` on a namespace's epoch, adding `delta`; made at a random number when missing.
    /// Every use keeps it [`EPOCH_LIFE`] more: only a namespace unused that long loses it
    /// (and with it every entry, which have long expired by then).
    pub(super) fn epoch_op(&self, namespace: &str, delta: u64) -> Result<Op, Error> {
        let op = Arithmetic::new(self.epoch_name(namespace))
            .delta(delta)
            .initial(fresh_epoch()?, EPOCH_LIFE)
            .ttl(Ttl::secs(EPOCH_LIFE));
        Ok(Op::Arithmetic(op))
    }

    /// The epoch an `ma` answered. Text that is no counter (memcached refuses to add to it)
    /// is repaired forward, as the Redis scripts do: removed (counted corrupt) and made
    /// again at a fresh random number, which no entry was written under.
    ///
    /// Answers the epoch and whether it was repaired: the commands sent after it in the
    /// same pipeline are then not to be trusted (the client gives up on the rest of a
    /// pipeline after an error), and the caller sends them again.
    pub(super) async fn epoch_of(
        &self,
        answer: Option<Result<OpResult, memcache::exp::Error>>,
        namespace: &str,
    ) -> Result<(u64, bool), Error> {
        use memcache::exp::Error as E;
        let rejected = match &answer {
            Some(Err(E::Rejected(_))) => true,
            Some(Err(E::Ambiguous { source, .. })) => matches!(**source, E::Rejected(_)),
            _ => false,
        };
        if rejected {
            return Ok((self.repair_epoch(namespace).await?, true));
        }
        match answer {
            Some(Ok(OpResult::Arithmetic(a))) => a
                .value
                .map(|e| (e, false))
                .ok_or(Error::Protocol("memcached answered no epoch")),
            Some(Err(e)) => Err(memcached_error(e)),
            _ => Err(Error::Protocol(
                "memcached answered an epoch with something else",
            )),
        }
    }

    async fn repair_epoch(&self, namespace: &str) -> Result<u64, Error> {
        inc(&self.inner.metrics.corrupt_entries);
        let c = self.client().await?;
        let name = self.epoch_name(namespace);
        c.run(Delete::new(&name)).await.map_err(memcached_error)?;
        let made = c.run_batch([self.epoch_op(namespace, 0)?]).await;
        match made.map_err(memcached_error)?.into_iter().next() {
            Some(Ok(OpResult::Arithmetic(a))) => a
                .value
                .ok_or(Error::Protocol("memcached answered no epoch")),
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

    async fn commit_now(
        &self,
        key: &str,
        mut entry: StoredEntry,
        token: Option<&LockToken>,
    ) -> Result<WriteOutcome, Error> {
        let c = self.client().await?;
        let name = self.value_name(key);
        let now = now_ms();
        // The key's life: its retention, or less with a time-to-idle (PROTOCOL.md section 3).
        let life = crate::lifetimes::key_life_ms(&entry, now);
        let ttl = item_ttl(Duration::from_millis(life));
        let Some(token) = token else {
            // A set: stored whatever is there (a lease's placeholder or mark too, so the
            // load that holds it cannot overwrite this), under the current epoch.
            let (epoch, g) = self.epoch_and_item(c, key).await?;
            let older = match Item::read(g.value.as_deref(), epoch) {
                Item::Entry(e) => e.version,
                _ => 0,
            };
            entry.version = now_us().max(older + 1);
            entry.epoch = epoch;
            let set = Set::new(&name, wire::encode(&entry)).ttl(ttl);
            c.run(set).await.map_err(memcached_error)?;
            inc(&self.inner.metrics.commits);
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
        let (epoch, repaired) = self.epoch_of(answers.next(), namespace_of(key)).await?;
        if repaired {
            // A new epoch (no load of the old one lands); the lease is handed back.
            let _ = c.run(Delete::new(&name).compare_cas(cas)).await;
            inc(&self.inner.metrics.superseded_commits);
            return Ok(WriteOutcome::Superseded);
        }
        let stored = match answers.next() {
            Some(Ok(OpResult::Mutation(m))) => m.status == MutationStatus::Applied,
            Some(Err(e)) => return Err(memcached_error(e)),
            _ => {
                return Err(Error::Protocol(
                    "memcached answered a set with something else",
                ));
            }
        };
        let m = &self.inner.metrics;
        Ok(match stored && epoch == token.epoch {
            true => {
                inc(&m.commits);
                WriteOutcome::Written {
                    version: entry.version,
                    epoch,
                }
            }
            false => {
                inc(&m.superseded_commits);
                WriteOutcome::Superseded
            }
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
                let ttl = item_ttl(Duration::from_millis(h.retain_until_ms.saturating_sub(now)));
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
            let (epoch, g) = self.epoch_and_item(c, key).await?;
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
            let found = Item::read(g.value.as_deref(), epoch);
            self.corrupt(matches!(found, Item::Outdated { corrupt: true }));
            let entry = found.servable(now);
            self.inner.metrics.count_read(entry.as_ref(), now);
            Ok(entry)
        })
    }

    fn acquire<'a>(&'a self, key: &'a str, req: AcquireRequest) -> BackendFuture<'a, Acquired> {
        self.run("acquire", self.acquire_now(key, req))
    }

    fn acquire_many<'a>(
        &'a self,
        requests: &'a [(String, AcquireRequest)],
    ) -> BackendFuture<'a, Vec<Result<Acquired, LoadError>>> {
        self.run("acquire_many", self.acquire_all(requests))
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

    /// Removes the lease marker an acquire whose answer never came may have added (it
    /// holds `secret`). Memcached orders commands per connection only, and the lost acquire
    /// went out on a connection the client has dropped since: it may be run after this
    /// `forget` (a stalled server resuming). So the marker is looked for again, 50 ms, then
    /// 100, 200, ... apart, for most of `op_timeout`. A claim whose answer was lost is not
    /// found this way (the stale mark carries no secret): it runs out after one lease, the
    /// stale value served meanwhile.
    fn forget<'a>(&'a self, key: &'a str, secret: &'a [u8; 16]) -> BackendFuture<'a, bool> {
        self.run("forget", async move {
            let c = self.client().await?;
            let name = self.value_name(key);
            let until = std::time::Instant::now() + self.inner.op_timeout * 3 / 4;
            let mut pause = Duration::from_millis(50);
            loop {
                let g = c.run(Get::new(&name).meta(Meta::NONE.cas())).await;
                let g = g.map_err(memcached_error)?;
                if g.value.as_deref() == Some(lease(secret).as_slice()) {
                    let del = Delete::new(&name).compare_cas(g.item.cas.unwrap_or(0));
                    return Ok(c.run(del).await.map_err(memcached_error)?.applied());
                }
                if std::time::Instant::now() + pause >= until {
                    return Ok(false);
                }
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        })
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
                .ttl(item_ttl(hold))
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
            inc(&self.inner.metrics.idle_touches);
            // Lengthened only: never shortens what another process's read kept.
            match g.item.ttl {
                Some(t) if g.hit() && t >= 0 && t < i64::from(life) => {
                    let touch = Get::new(&name)
                        .without_value()
                        .touch(item_ttl(Duration::from_secs(life.into())));
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
            // A repaired epoch is a new one: the bump is done.
            Ok(self.epoch_of(answer, namespace).await?.0)
        })
    }

    fn watch<'a>(&'a self, _key: &'a str) -> BackendFuture<'a, Box<dyn Watch>> {
        Box::pin(async { Ok(Box::new(super::Poll { next: FIRST_POLL }) as Box<dyn Watch>) })
    }

    /// Nobody is told anything on memcached: no listener is ever called.
    fn listen(&self, _listener: Listener) {}
}
