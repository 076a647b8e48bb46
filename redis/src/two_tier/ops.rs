//! Reads and writes outside a load: `get`, `set`, `invalidate`, `bump`, each with the one
//! failure policy (module docs of [`two_tier`](super)).

use std::time::Duration;

use herdless::backend::{StoredEntry, WriteOutcome};
use herdless::{Error, LoadError};

use super::{Host, Pending, TwoTier, Versioned, fresh_left};
use crate::codec::CodecError;

/// What [`TwoTier::get`] found.
#[derive(Debug)]
pub enum Get<V: Clone + Send + Sync + 'static> {
    /// Answered from the L1 (or a miss with no shared tier to ask).
    Ready(Option<V>),
    /// Ask the shared tier; finish with [`Read::finish`].
    Tier(Pending<Read<V>>),
}

/// What the shared tier answered a [`Get::Tier`].
pub struct Read<V: Clone + Send + Sync + 'static> {
    tt: TwoTier<V>,
    key: String,
    /// The L1's tag clock before the tier was read: a tag invalidated here meanwhile
    /// keeps the entry out of the L1.
    born: u64,
    found: Result<Option<StoredEntry>, Error>,
}

impl<V: Clone + Send + Sync + 'static> std::fmt::Debug for Read<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Read").field("key", &self.key).finish()
    }
}

impl<V: Clone + Send + Sync + 'static> Read<V> {
    /// The value (`None`: a miss, a cached absence, unreadable bytes, or a tier that did not
    /// answer, which is counted). A fresh value is kept in the L1 for the rest of its life.
    /// `Err` only when the host's codec was interrupted.
    pub fn finish(self, host: &dyn Host<V>) -> Result<Option<V>, CodecError> {
        let Ok(Some(e)) = self.found else {
            return Ok(None);
        };
        let Some(bytes) = &e.value else {
            return Ok(None);
        };
        let value = match host.decode(bytes) {
            Ok(v) => v,
            Err(ce) if ce.is_interrupted() => return Err(ce),
            Err(_) => {
                self.tt.count_unreadable();
                return Ok(None);
            }
        };
        let fresh = fresh_left(e.fresh_until_ms);
        // A closed engine keeps nothing (see `close`), nor one whose tier tells it of no
        // change (memcached).
        if !fresh.is_zero() && !self.tt.is_closed() && self.tt.holds_copies() {
            let l1 = Versioned::shared(value.clone(), e.version);
            let shared = herdless::driver::SharedEntry {
                fresh,
                ttl: e.ttl,
                tti: e.tti,
                meta: e.meta.as_deref(),
                tags: &e.tags,
                born: Some(self.born),
            };
            let _ = herdless::driver::set_shared_entry(self.tt.l1(), &self.key, Some(l1), shared);
        }
        Ok(Some(value))
    }
}

impl<V: Clone + Send + Sync + 'static> TwoTier<V> {
    /// A fresh or within-grace value: from the L1, else from the shared tier (one round
    /// trip), without loading anything. A tier that does not answer is a miss (counted).
    /// Refused only once the engine is closed ([`Error::Closed`]).
    pub fn get(&self, key: &str) -> Result<Get<V>, Error> {
        self.check_open()?;
        if let Some(v) = self.l1().get(key) {
            return Ok(Get::Ready(Some(v.value)));
        }
        let Some(fleet) = self.fleet() else {
            return Ok(Get::Ready(None));
        };
        // A key the L1 refuses can hold nothing anywhere.
        if key.is_empty() || key.len() > self.l1().options().max_key_len {
            return Ok(Get::Ready(None));
        }
        let (fleet, tt, key) = (fleet.clone(), self.clone(), key.to_owned());
        let born = herdless::driver::tag_clock(self.l1());
        Ok(Get::Tier(Pending::new(async move {
            let found = fleet.read(&key).await;
            Read {
                tt,
                key,
                born,
                found,
            }
        })))
    }

    /// Stores `value` (for `ttl`, else the cache's TTL) in this process and, with a shared
    /// tier, for the whole fleet: a load already running anywhere will not overwrite it,
    /// and the other processes drop their copies. When the tier cannot be reached, the L1
    /// copy is dropped too and [`Error::Backend`] answers: a write that did not reach the
    /// fleet never looks like one that did.
    ///
    /// Errors at once (before anything is written): a bad key, a zero `ttl`, a value the
    /// host's codec cannot encode ([`Error::Load`] holding the [`CodecError`]), or a closed
    /// engine ([`Error::Closed`], also the answer of a write in flight at the close).
    pub fn set(
        &self,
        key: &str,
        value: V,
        ttl: Option<Duration>,
        host: &dyn Host<V>,
    ) -> Result<Pending<Result<(), Error>>, Error> {
        self.write(key, Some(value), ttl, host)
    }

    /// Caches an absence of `key` (for `negative_ttl`), here and, with a shared tier, for
    /// the whole fleet, as [`set`](Self::set) stores a value.
    pub fn set_absent(&self, key: &str) -> Result<Pending<Result<(), Error>>, Error> {
        struct Nothing;
        impl<V> crate::Codec<V> for Nothing {
            fn encode(&self, _: &V) -> Result<Vec<u8>, CodecError> {
                Err(CodecError::new("an absence has no value to encode"))
            }
            fn decode(&self, _: &[u8]) -> Result<V, CodecError> {
                Err(CodecError::new("an absence has no value to decode"))
            }
        }
        self.write(key, None, None, &Nothing)
    }

    fn write(
        &self,
        key: &str,
        value: Option<V>,
        ttl: Option<Duration>,
        host: &dyn Host<V>,
    ) -> Result<Pending<Result<(), Error>>, Error> {
        self.check_open()?;
        let l1 = self.l1();
        let Some(life) = self.shared_tier().copied() else {
            let r = match (value, ttl) {
                (None, _) => l1.set_absent(key),
                (Some(v), Some(t)) => l1.set_with_ttl(key, Versioned::local(v), t),
                (Some(v), None) => l1.set(key, Versioned::local(v)),
            };
            return Ok(Pending::ready(r));
        };
        self.check_key(key)?;
        self.check_ttl(ttl)?;
        let bytes = match &value {
            Some(v) => Some(host.encode(v).map_err(|e| Error::Load(LoadError::new(e)))?),
            None => None,
        };
        let (entry, _) = life.entry(bytes, Duration::ZERO, 0, ttl);
        let fresh_until_ms = entry.fresh_until_ms;
        let (fleet, tt, key) = (self.fleet().expect("shared"), self.clone(), key.to_owned());
        Ok(Pending::new(async move {
            let generation = fleet.bus_generation();
            let outcome = fleet.set(&key, entry).await;
            match fleet.heard(&key, generation, outcome) {
                Ok(WriteOutcome::Written { version, .. }) => match value {
                    Some(value) => {
                        let fresh = fresh_left(fresh_until_ms).max(Duration::from_nanos(1));
                        tt.l1()
                            .set_with_ttl(&key, Versioned::shared(value, version), fresh)
                    }
                    None => tt.l1().set_absent(&key),
                },
                // A newer write won the race in the tier (what every process reads), or this
                // one is unheard here: no copy is kept.
                Ok(WriteOutcome::Superseded) => {
                    let _ = tt.l1().invalidate(&key);
                    Ok(())
                }
                Err(e) => {
                    let _ = tt.l1().invalidate(&key);
                    Err(tt.or_closed(e))
                }
            }
        }))
    }

    /// Drops `key` in this process and, with a shared tier, in the whole fleet (a load
    /// already running anywhere will not store its older value). Answers whether the shared
    /// tier held an entry (without one, whether the L1 did). A tier that cannot be reached
    /// answers [`Error::Backend`], after the L1 copy is dropped.
    pub fn invalidate(&self, key: &str) -> Result<Pending<Result<bool, Error>>, Error> {
        self.check_open()?;
        let here = self.l1().invalidate(key)?;
        let Some(fleet) = self.fleet() else {
            return Ok(Pending::ready(Ok(here)));
        };
        let (fleet, tt, key) = (fleet.clone(), self.clone(), key.to_owned());
        Ok(Pending::new(async move {
            fleet.invalidate(&key).await.map_err(|e| tt.or_closed(e))
        }))
    }

    /// Invalidates every key of `namespace` in O(1), in this process and, with a shared
    /// tier, in the whole fleet; answers the new epoch (the fleet's, with a shared tier).
    /// A namespace longer than `max_key_len` holds no key: nothing happens, and 0 answers.
    /// A tier that cannot be reached answers [`Error::Backend`], after the L1 was bumped.
    pub fn bump(&self, namespace: &str) -> Pending<Result<u64, Error>> {
        if let Err(e) = self.check_open() {
            return Pending::ready(Err(e));
        }
        if namespace.len() > self.l1().options().max_key_len {
            return Pending::ready(Ok(0));
        }
        let here = self.l1().bump(namespace);
        let Some(fleet) = self.fleet() else {
            return Pending::ready(Ok(here));
        };
        let (fleet, tt, ns) = (fleet.clone(), self.clone(), namespace.to_owned());
        Pending::new(async move { fleet.bump(&ns).await.map_err(|e| tt.or_closed(e)) })
    }

    /// The lifetimes this cache's values get: the shared entries' with a shared tier (the
    /// L1 is built without jitter then, so its own options would say 0), else the L1's.
    /// A binding that tells its caller how long an entry may live asks this, never the
    /// L1's options.
    pub fn lifetimes(&self) -> crate::Lifetimes {
        match self.shared_tier() {
            Some(life) => *life,
            None => crate::Lifetimes::from(&self.l1().options()),
        }
    }

    /// The L1's key rules, checked before anything is written to the shared tier.
    pub(crate) fn check_key(&self, key: &str) -> Result<(), Error> {
        let max = self.l1().options().max_key_len;
        if key.is_empty() {
            return Err(Error::EmptyKey);
        }
        if key.len() > max {
            return Err(Error::KeyTooLong {
                len: key.len(),
                max,
            });
        }
        Ok(())
    }
}
