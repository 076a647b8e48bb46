//! The shared tier a two-tier cache stands in front of ([`SharedTier`]): Redis (or Redis
//! Cluster), or a [`MemoryBackend`] standing for one; and where it is, as the bindings'
//! options name it ([`TierAddress`], [`TierOptions`]).

use std::time::Duration;

use herdless::backend::Backend;

use crate::backend::RedisBackend;
use crate::fleet::{Fleet, FleetOptions};
use crate::memcached::MemcachedBackend;
use crate::memory::MemoryBackend;
use crate::metrics::RedisMetrics;

/// The shared tier of a [`TwoTier`](crate::TwoTier): Redis (or Redis Cluster), memcached,
/// or a [`MemoryBackend`] standing for Redis (tests, the conformance scenarios).
#[derive(Clone, Debug)]
pub enum SharedTier {
    /// Redis or Redis Cluster.
    Redis(RedisBackend),
    /// A fleet in this process's memory.
    Memory(MemoryBackend),
    /// memcached (no tags, no L1 copies: see [`crate::memcached`]).
    Memcached(MemcachedBackend),
}

impl From<MemcachedBackend> for SharedTier {
    fn from(b: MemcachedBackend) -> Self {
        SharedTier::Memcached(b)
    }
}

impl From<RedisBackend> for SharedTier {
    fn from(b: RedisBackend) -> Self {
        SharedTier::Redis(b)
    }
}

impl From<MemoryBackend> for SharedTier {
    fn from(b: MemoryBackend) -> Self {
        SharedTier::Memory(b)
    }
}

/// Where a shared tier is, as the bindings' `redis` option names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TierAddress {
    /// One Redis server: `redis://host:port/db`, `unix:///path`.
    Redis(String),
    /// A Redis Cluster, given some of its nodes (`redis://host:port` each).
    Cluster(Vec<String>),
    /// A [`MemoryStore`](crate::memory::MemoryStore) of this process, by name
    /// (`memory://<name>`): caches created with the same name are one fleet.
    Memory(String),
    /// memcached servers (`memcached://host:port,host:port`), `host:port` each.
    Memcached(Vec<String>),
}

impl TierAddress {
    /// Parses one address: `redis://` / `unix://` (one server),
    /// `redis+cluster://host:port,host:port` (a cluster), `memcached://host:port[,...]`,
    /// or `memory://<name>`. TLS (`rediss://`) is refused with a clear error: this build
    /// has no TLS.
    pub fn parse(url: &str) -> Result<Self, crate::Error> {
        let bad = |why: &str| crate::Error::Config(format!("redis address {url:?}: {why}"));
        if let Some(name) = url.strip_prefix("memory://") {
            return Ok(TierAddress::Memory(name.to_owned()));
        }
        if let Some(rest) = url.strip_prefix("memcached://") {
            let servers: Vec<String> = rest
                .split(',')
                .map(|s| s.trim().trim_end_matches('/'))
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            if servers.is_empty() || servers.iter().any(|s| !s.contains(':')) {
                return Err(bad("a memcached address names host:port, comma-separated"));
            }
            return Ok(TierAddress::Memcached(servers));
        }
        // Refused here rather than failing every call later: this build has no TLS.
        if url.starts_with("rediss://") || url.starts_with("rediss+cluster://") {
            return Err(bad(
                "TLS (rediss://) is not built into herdless yet; reach Redis through a TLS \
                 tunnel (stunnel, a sidecar) with a redis:// address",
            ));
        }
        for (scheme, node_scheme) in [("redis+cluster://", "redis://")] {
            if let Some(rest) = url.strip_prefix(scheme) {
                let nodes: Vec<String> = rest
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(|n| format!("{node_scheme}{n}"))
                    .collect();
                if nodes.is_empty() {
                    return Err(bad("a cluster address names at least one node"));
                }
                return Ok(TierAddress::Cluster(nodes));
            }
        }
        if ["redis://", "unix://", "redis+unix://"]
            .iter()
            .any(|s| url.starts_with(s))
        {
            return Ok(TierAddress::Redis(url.to_owned()));
        }
        Err(bad(
            "expected redis://, unix://, redis+cluster://host:port,..., memcached://host:port \
             or memory://name",
        ))
    }

    /// memcached servers given as a list (a binding's `memcached` option): `host:port` each,
    /// with or without `memcached://`, or one string of them separated by commas.
    pub fn memcached(servers: &[String]) -> Result<Self, crate::Error> {
        let bare: Vec<&str> = servers
            .iter()
            .map(|s| s.strip_prefix("memcached://").unwrap_or(s))
            .collect();
        Self::parse(&format!("memcached://{}", bare.join(",")))
    }

    /// The one shared tier of a binding's `redis` and `memcached` options (each parsed
    /// already): either, or none; both at once are refused.
    pub fn one_of(
        redis: Option<Self>,
        memcached: Option<Self>,
    ) -> Result<Option<Self>, crate::Error> {
        match (redis, memcached) {
            (Some(_), Some(_)) => Err(crate::Error::Config(
                "give `redis` or `memcached`, not both: one shared tier".into(),
            )),
            (r, m) => Ok(r.or(m)),
        }
    }

    /// Several node addresses given as a list: one server, or a cluster of them.
    pub fn nodes(nodes: &[String]) -> Result<Self, crate::Error> {
        match nodes {
            [] => Err(crate::Error::Config(
                "a list of Redis Cluster nodes must not be empty".into(),
            )),
            [one] if !one.contains("+cluster://") => Self::parse(one).map(|a| match a {
                TierAddress::Redis(u) => TierAddress::Cluster(vec![u]),
                other => other,
            }),
            many => {
                for n in many {
                    if !n.starts_with("redis://") {
                        return Err(crate::Error::Config(format!(
                            "Redis Cluster node {n:?}: expected redis://host:port"
                        )));
                    }
                }
                Ok(TierAddress::Cluster(many.to_vec()))
            }
        }
    }

    /// Connects (lazily for Redis: this succeeds while it is down), with `prefix` for
    /// every Redis name (default `hl`).
    pub fn connect(&self, prefix: Option<&str>) -> Result<SharedTier, crate::Error> {
        let with_prefix = |b: crate::RedisBuilder| match prefix {
            Some(p) => b.prefix(p),
            None => b,
        };
        Ok(match self {
            TierAddress::Redis(url) => with_prefix(RedisBackend::builder(url.clone()))
                .build()?
                .into(),
            TierAddress::Cluster(nodes) => {
                with_prefix(RedisBackend::cluster(nodes.iter().cloned()))
                    .build()?
                    .into()
            }
            TierAddress::Memory(name) => crate::memory::MemoryStore::named(name)
                .backend()
                .build()?
                .into(),
            TierAddress::Memcached(servers) => {
                let b = MemcachedBackend::builder(servers.iter().cloned());
                match prefix {
                    Some(p) => b.prefix(p),
                    None => b,
                }
                .build()?
                .into()
            }
        })
    }
}

impl SharedTier {
    /// The fleet protocol over this tier.
    pub fn fleet(&self, options: FleetOptions) -> Fleet {
        match self {
            SharedTier::Redis(b) => b.fleet(options),
            SharedTier::Memory(b) => b.fleet(options),
            SharedTier::Memcached(b) => b.fleet(options),
        }
    }

    /// The tier's counters.
    pub fn metrics(&self) -> RedisMetrics {
        match self {
            SharedTier::Redis(b) => b.metrics(),
            SharedTier::Memory(b) => b.metrics(),
            SharedTier::Memcached(b) => b.metrics(),
        }
    }

    /// The runtime its I/O and timers run on.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        match self {
            SharedTier::Redis(b) => b.handle(),
            SharedTier::Memory(b) => b.handle(),
            SharedTier::Memcached(b) => b.handle(),
        }
    }

    /// The Redis backend, if this is Redis.
    pub fn redis(&self) -> Option<&RedisBackend> {
        match self {
            SharedTier::Redis(b) => Some(b),
            SharedTier::Memory(_) | SharedTier::Memcached(_) => None,
        }
    }

    /// This process's origin id in notifications.
    pub fn origin(&self) -> &str {
        match self {
            SharedTier::Redis(b) => b.origin(),
            SharedTier::Memory(b) => b.origin(),
            SharedTier::Memcached(b) => b.origin(),
        }
    }

    /// Closes this tier's connections and runtime (see [`RedisBackend::close`]).
    pub fn close(&self) {
        match self {
            SharedTier::Redis(b) => b.close(),
            SharedTier::Memory(b) => b.close(),
            SharedTier::Memcached(b) => b.close(),
        }
    }

    pub(crate) fn backend(&self) -> &dyn Backend {
        match self {
            SharedTier::Redis(b) => b,
            SharedTier::Memory(b) => b,
            SharedTier::Memcached(b) => b,
        }
    }

    pub(crate) fn counters(&self) -> &crate::metrics::Metrics {
        match self {
            SharedTier::Redis(b) => b.counters(),
            SharedTier::Memory(b) => b.counters(),
            SharedTier::Memcached(b) => b.counters(),
        }
    }
}

/// Where the shared tier of [`TwoTier::build`](crate::TwoTier::build) is, as a binding's options name it.
#[derive(Clone, Debug)]
pub struct TierOptions {
    /// Its address.
    pub address: TierAddress,
    /// The prefix of its names (default `hl`).
    pub prefix: Option<String>,
    /// The fleet lock's lease (default 5 s).
    pub lease: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::TierAddress;

    #[test]
    fn addresses_parse_once_for_every_language() {
        let a = |s: &str| TierAddress::parse(s);
        assert_eq!(
            a("redis://h:1/0").unwrap(),
            TierAddress::Redis("redis://h:1/0".into())
        );
        assert_eq!(
            a("redis+cluster://h:1, h:2").unwrap(),
            TierAddress::Cluster(vec!["redis://h:1".into(), "redis://h:2".into()])
        );
        assert_eq!(a("memory://t").unwrap(), TierAddress::Memory("t".into()));
        assert_eq!(
            a("memcached://h:1, h:2/").unwrap(),
            TierAddress::Memcached(vec!["h:1".into(), "h:2".into()])
        );
        assert!(a("memcached://").is_err() && a("memcached://h").is_err());
        assert_eq!(
            TierAddress::memcached(&["h:1".into(), "memcached://h:2".into()]).unwrap(),
            TierAddress::Memcached(vec!["h:1".into(), "h:2".into()])
        );
        assert!(TierAddress::memcached(&[]).is_err());
        let m = TierAddress::Memcached(vec!["h:1".into()]);
        assert_eq!(
            TierAddress::one_of(None, Some(m.clone())).unwrap(),
            Some(m.clone())
        );
        assert_eq!(TierAddress::one_of(None, None).unwrap(), None);
        let both = TierAddress::one_of(Some(m.clone()), Some(m)).unwrap_err();
        assert!(both.to_string().contains("not both"));
        for bad in ["h:1", "http://h", "redis+cluster://", "rediss://h:1"] {
            assert!(a(bad).is_err(), "{bad}");
        }
        assert!(a("rediss://h:1").unwrap_err().to_string().contains("TLS"));
        assert!(TierAddress::nodes(&[]).is_err());
        assert_eq!(
            TierAddress::nodes(&["redis://a:1".into(), "redis://b:2".into()]).unwrap(),
            TierAddress::Cluster(vec!["redis://a:1".into(), "redis://b:2".into()])
        );
    }
}
