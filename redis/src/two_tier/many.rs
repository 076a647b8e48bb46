//! The fleet part of a batch load, written once: the keys a batch leads in this process
//! are asked of the fleet together ([`Fleet::lead_many`](crate::Fleet::lead_many):
//! their entries read and their locks taken in one round trip per Cluster slot group), and
//! each key's answer becomes its own [`Step`] through [`Reply::next`], exactly as a single
//! load's: an entry another process wrote is adopted, a won lock is a [`Load`] (begun
//! under the batch's one unit of the origin budget), a key another process loads is waited
//! for and woken as it lands — after the batch's own loads are done ([`Reply::is_later`]),
//! so that batches in two processes holding each other's keys never wait on each other.
//!
//! The driver then makes one loader call for every [`Step::Load`] of the batch, hands each
//! load its key's answer ([`Load::loaded`]), and drives the publishing steps together (a
//! multiplexed connection pipelines them).

use herdless::LoadGuard;

use super::{Pending, Reply, TwoTier, Versioned};

impl<V: Clone + Send + Sync + 'static> TwoTier<V> {
    /// The first step of the keys a batch leads in this process (each a
    /// [`Lookup::Lead`](herdless::Lookup::Lead) of the L1, with the version of the value
    /// it serves when this is a refresh, else 0): one exchange with the fleet for all of
    /// them, then a [`Reply`] per key, in order, for [`Reply::next`].
    ///
    /// `background`: a batch of refreshes (stale-while-revalidate, XFetch), whose guards
    /// began under one unit of the origin budget; nobody awaits it.
    /// Otherwise the driver holds one unit of the origin budget for its loader call
    /// ([`origin_permit`](herdless::driver::origin_permit)), taken when the fleet's answer
    /// has loads in it.
    pub fn lead_many(
        &self,
        guards: Vec<(LoadGuard<Versioned<V>>, u64)>,
        background: bool,
    ) -> Pending<Vec<Reply<V>>> {
        let Some(live) = self.live() else {
            let replies = guards
                .into_iter()
                .map(|(g, _)| Reply::local(self.clone(), g, background))
                .collect();
            return Pending::ready(replies);
        };
        let mut guards = guards;
        if !live.fleet.holds_copies() {
            guards.iter_mut().for_each(|(g, _)| g.serve_only());
        }
        let keys = guards
            .iter()
            .map(|(g, have)| (g.key().to_owned(), *have))
            .collect();
        let (fleet, this) = (live.fleet.clone(), self.clone());
        Pending::new(async move {
            let outcomes = fleet.lead_many(keys).await;
            guards
                .into_iter()
                .zip(outcomes)
                .map(|((g, have), o)| match o {
                    Some(o) => Reply::asked_in_batch(this.clone(), g, background, o),
                    None => Reply::later(this.clone(), g, have, background),
                })
                .collect()
        })
    }
}
