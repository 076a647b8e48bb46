//! Connections: a standalone server through redis-rs' `ConnectionManager` (reconnects by
//! itself), or a Cluster through its async cluster connection (follows slot moves and
//! reconnects nodes). One connection for commands, one for subscriptions (RESP3 pushes,
//! resubscribed by redis-rs after a reconnect).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, IntoConnectionInfo, Pipeline, ProtocolVersion, PushInfo, RedisFuture, Value};
use tokio::sync::OnceCell;

use crate::error::Error;

/// Where to connect.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    Single(String),
    Cluster(Vec<String>),
}

impl Target {
    /// The keyspace this target names, as one string: the server (`host:port` or socket
    /// path) and database, or the Cluster's nodes. Backends of one process over the same
    /// keyspace (and prefix) tell each other their changes at once (`notify::Hub::join`).
    pub(crate) fn keyspace(&self) -> String {
        let node = |url: &str| match url.into_connection_info() {
            Ok(i) => format!("{}/{}", i.addr(), i.redis_settings().db()),
            Err(_) => url.to_owned(),
        };
        match self {
            Target::Single(url) => node(url),
            Target::Cluster(nodes) => {
                let mut all: Vec<String> = nodes.iter().map(|n| node(n)).collect();
                all.sort();
                all.dedup();
                format!("cluster {}", all.join(" "))
            }
        }
    }
}

/// Connection timings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timings {
    pub(crate) connect: Duration,
    pub(crate) response: Duration,
}

/// A lazily connected cluster connection (the cluster client needs the cluster to answer
/// before it hands a connection out; the backend must start while Redis is down).
pub(crate) struct LazyCluster {
    client: ClusterClient,
    conn: OnceCell<ClusterConnection>,
}

impl LazyCluster {
    async fn get(&self) -> Result<ClusterConnection, Error> {
        self.conn
            .get_or_try_init(|| async { Ok::<_, Error>(self.client.get_async_connection().await?) })
            .await
            .cloned()
    }
}

/// A handle to a connection (cheap to clone).
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(Arc<LazyCluster>),
}

/// A connection ready for one command.
pub(crate) enum Live {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Conn {
    /// The command connection. Must be called inside the backend's runtime.
    pub(crate) fn commands(target: &Target, t: Timings) -> Result<Self, Error> {
        match target {
            Target::Single(url) => {
                let client = redis::Client::open(url.as_str())?;
                Ok(Self::Single(ConnectionManager::new_lazy_with_config(
                    client,
                    manager_config(t),
                )?))
            }
            Target::Cluster(nodes) => Ok(Self::Cluster(Arc::new(LazyCluster {
                client: cluster_builder(nodes, t).build()?,
                conn: OnceCell::new(),
            }))),
        }
    }

    /// The subscription connection: RESP3, pushes go to `on_push`. Must be called inside
    /// the backend's runtime.
    pub(crate) fn subscriber(
        target: &Target,
        t: Timings,
        on_push: impl Fn(PushInfo) + Send + Sync + 'static,
    ) -> Result<Self, Error> {
        let sender = move |p: PushInfo| {
            on_push(p);
            Ok::<(), redis::aio::SendError>(())
        };
        match target {
            Target::Single(url) => {
                let info = url.as_str().into_connection_info()?;
                let settings = info
                    .redis_settings()
                    .clone()
                    .set_protocol(ProtocolVersion::RESP3);
                let client = redis::Client::open(info.set_redis_settings(settings))?;
                let cfg = manager_config(t)
                    .set_push_sender(sender)
                    .set_automatic_resubscription();
                Ok(Self::Single(ConnectionManager::new_lazy_with_config(
                    client, cfg,
                )?))
            }
            Target::Cluster(nodes) => Ok(Self::Cluster(Arc::new(LazyCluster {
                client: cluster_builder(nodes, t)
                    .use_protocol(ProtocolVersion::RESP3)
                    .push_sender(sender)
                    .build()?,
                conn: OnceCell::new(),
            }))),
        }
    }

    /// A connection for one command (connecting a cluster on first use).
    pub(crate) async fn live(&self) -> Result<Live, Error> {
        Ok(match self {
            Self::Single(m) => Live::Single(m.clone()),
            Self::Cluster(c) => Live::Cluster(c.get().await?),
        })
    }

    /// Subscribes to every notification channel matching `pattern` (standalone server).
    pub(crate) async fn psubscribe(&self, pattern: &str) -> Result<(), Error> {
        match self.live().await? {
            Live::Single(mut m) => m.psubscribe(pattern).await?,
            Live::Cluster(mut c) => c.psubscribe(pattern).await?,
        }
        Ok(())
    }

    /// Subscribes to one channel, sharded (SSUBSCRIBE: it stays within the slot's shard).
    pub(crate) async fn ssubscribe(&self, channel: &str) -> Result<(), Error> {
        match self.live().await? {
            Live::Single(mut m) => m.subscribe(channel).await?,
            Live::Cluster(mut c) => c.ssubscribe(channel).await?,
        }
        Ok(())
    }

    /// Asks the server to report every change of a key under `<prefix>:{` on this
    /// (RESP3) connection: `CLIENT TRACKING ON BCAST PREFIX`. `Ok(false)` when the server
    /// refuses (before Redis 6, or an ACL); a Cluster is not asked (`Ok(false)`).
    pub(crate) async fn track(&self, prefix: &str) -> Result<bool, Error> {
        let Self::Single(m) = self else {
            return Ok(false);
        };
        let mut m = m.clone();
        let answer = redis::cmd("CLIENT")
            .arg("TRACKING")
            .arg("ON")
            .arg("BCAST")
            .arg("PREFIX")
            .arg(format!("{prefix}:{{"))
            .query_async::<()>(&mut m)
            .await;
        Ok(crate::tracking::accepted(answer)?)
    }

    /// Drops a sharded subscription.
    pub(crate) async fn sunsubscribe(&self, channel: &str) -> Result<(), Error> {
        match self.live().await? {
            Live::Single(mut m) => m.unsubscribe(channel).await?,
            Live::Cluster(mut c) => c.sunsubscribe(channel).await?,
        }
        Ok(())
    }
}

fn manager_config(t: Timings) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(t.connect))
        .set_response_timeout(Some(t.response))
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(500))
        .set_number_of_retries(3)
}

fn cluster_builder(nodes: &[String], t: Timings) -> ClusterClientBuilder {
    ClusterClientBuilder::new(nodes.to_vec())
        .connection_timeout(t.connect)
        .response_timeout(t.response)
        .retries(2)
        .min_retry_wait(10)
        .max_retry_wait(200)
}

impl ConnectionLike for Live {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Target;

    #[test]
    fn a_keyspace_is_the_server_and_database_however_the_url_spells_them() {
        let one = |u: &str| Target::Single(u.into()).keyspace();
        assert_eq!(
            one("redis://127.0.0.1:6379"),
            one("redis://127.0.0.1:6379/0")
        );
        assert_ne!(
            one("redis://127.0.0.1:6379/0"),
            one("redis://127.0.0.1:6379/1")
        );
        assert_ne!(one("redis://127.0.0.1:6379"), one("redis://127.0.0.1:6380"));
        let cluster = |n: &[&str]| Target::Cluster(n.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            cluster(&["redis://a:1", "redis://b:2"]).keyspace(),
            cluster(&["redis://b:2", "redis://a:1"]).keyspace()
        );
    }
}
