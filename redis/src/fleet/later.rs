//! What the fleet asks of the tier in the background, answered to nobody: forgetting a
//! lock an unanswered acquire may have taken, and keeping alive an entry with a
//! time-to-idle that a process read, from the tier or from its own copy (PROTOCOL.md,
//! "Time-to-idle").

use std::time::Duration;

use herdless::backend::StoredEntry;

use super::Fleet;

impl Fleet {
    /// An acquire whose answer never came (it timed out) may still run when the tier
    /// answers again and lock the key for a leader that gave up: forget any lock taken with
    /// `secret` as soon as the tier answers, retrying for at most one lease (the lock runs
    /// out by itself then). Redis runs a connection's commands in order, so this runs after
    /// the lost acquire did.
    pub(super) fn forget_later(&self, key: &str, secret: [u8; 16]) {
        let (fleet, key) = (self.clone(), key.to_owned());
        self.rt.spawn(async move {
            let give_up = tokio::time::Instant::now() + fleet.opts.lease;
            while fleet.backend.forget(&key, &secret).await.is_err() {
                if tokio::time::Instant::now() >= give_up {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }

    /// A read of `key` found `e`: an entry with a time-to-idle is kept alive for the fleet.
    pub(crate) fn read_entry(&self, key: &str, e: Option<&StoredEntry>) {
        if let Some(tti) = e.and_then(|e| e.tti) {
            self.touch_later(key, tti);
        }
    }

    /// Tells the tier that `key`'s entry (time-to-idle `tti`) was read, in the background:
    /// it keeps the entry a quarter past its tti from now (PROTOCOL.md, "Time-to-idle"). A
    /// touch that fails only lets the entry idle out sooner (counted as a backend error).
    pub fn touch_later(&self, key: &str, tti: Duration) {
        let (fleet, key) = (self.clone(), key.to_owned());
        self.rt.spawn(async move {
            if let Err(e) = fleet.backend.touch(&key, tti).await {
                drop(fleet.failed(&key, e));
            }
        });
    }
}
