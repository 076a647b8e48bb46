//! A batch's locks on Redis ([`Backend::acquire_many`](herdless::backend::Backend::acquire_many)):
//! one pipeline per slot group (per namespace on a Cluster, one in all on a single
//! server), the groups sent at once and each bounded by `op_timeout` on its own. A Cluster
//! node that fails or stalls fails only the keys of its own groups: the others lock and
//! answer as if it were not there (PROTOCOL.md, "Batch loads").

use std::future::Future;
use std::pin::Pin;

use herdless::backend::{AcquireRequest, Acquired};
use herdless::key::namespace_of;

use super::{AcquireReply, RedisBackend, hex, ms_arg};
use crate::error::Error;
use crate::join::join_all;
use crate::metrics::inc;
use crate::scripts::SCRIPTS;

/// One answer per request of a batch, in order.
type Answers = Vec<Result<Acquired, herdless::LoadError>>;

/// A slot group's exchange in progress.
type Part<'a> = Pin<Box<dyn Future<Output = Result<Answers, Error>> + Send + 'a>>;

impl RedisBackend {
    /// Asks for the locks and entries of `requests`: each slot group in one round trip,
    /// all groups at once; a group that fails (an error, or no answer within
    /// `op_timeout`) answers that error for each of its keys and only for them.
    pub(super) async fn acquire_batch(&self, requests: &[(String, AcquireRequest)]) -> Answers {
        let groups = self.request_groups(requests);
        let parts: Vec<Part<'_>> = groups
            .iter()
            .map(|members| -> Part<'_> {
                Box::pin(self.run("acquire_many", self.acquire_group(requests, members)))
            })
            .collect();
        let answers = join_all(parts).await;
        let mut out: Vec<Option<Result<Acquired, herdless::LoadError>>> =
            requests.iter().map(|_| None).collect();
        for (members, answered) in groups.iter().zip(answers) {
            match answered {
                Ok(replies) => {
                    for (&i, a) in members.iter().zip(replies) {
                        out[i] = Some(a);
                    }
                }
                Err(e) => {
                    let e = herdless::LoadError::from(e);
                    for &i in members {
                        out[i] = Some(Err(e.clone()));
                    }
                }
            }
        }
        out.into_iter()
            .map(|a| a.unwrap_or(Err(Error::Protocol("acquire_many: no reply").into())))
            .collect()
    }

    /// `requests`' indices grouped by Cluster slot, which is per namespace (its hash tag);
    /// one group on a single server.
    fn request_groups(&self, requests: &[(String, AcquireRequest)]) -> Vec<Vec<usize>> {
        let sharded = self.inner.sharded;
        let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, (key, _)) in requests.iter().enumerate() {
            let slot = if sharded { namespace_of(key) } else { "" };
            match groups.iter_mut().find(|(s, _)| *s == slot) {
                Some((_, members)) => members.push(i),
                None => groups.push((slot, vec![i])),
            }
        }
        groups.into_iter().map(|(_, m)| m).collect()
    }

    /// One slot group's exchange: its namespaces subscribed (as `read`: what it hands the
    /// L1 hears of later changes), then one pipeline. One answer per member, in order.
    async fn acquire_group(
        &self,
        requests: &[(String, AcquireRequest)],
        members: &[usize],
    ) -> Result<Answers, Error> {
        for &i in members {
            self.subscribe_for(&requests[i].0).await?;
        }
        let mut live = self.inner.cmd.live().await?;
        // The script is loaded in the same round trip: a pipeline does not reload a script
        // Redis lost (a restart, SCRIPT FLUSH) the way one invocation does.
        let mut pipe = redis::pipe();
        pipe.load_script(&SCRIPTS.acquire).ignore();
        let invocations: Vec<_> = members
            .iter()
            .map(|&i| {
                let (key, req) = &requests[i];
                let n = self.names(key);
                let mut inv = SCRIPTS.acquire.key(n.value);
                inv.key(n.epoch)
                    .key(n.lock)
                    .arg(req.now_ms)
                    .arg(ms_arg(req.lease))
                    .arg(hex(&req.secret))
                    .arg(req.have_version);
                inv
            })
            .collect();
        for inv in &invocations {
            pipe.invoke_script(inv);
        }
        inc(&self.inner.metrics.batch_round_trips);
        let replies: Vec<AcquireReply> = pipe.query_async(&mut live).await?;
        Ok(members
            .iter()
            .zip(replies)
            .map(|(&i, reply)| self.acquired(&requests[i].1, reply).map_err(Into::into))
            .collect())
    }
}
