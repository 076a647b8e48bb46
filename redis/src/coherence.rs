//! Keeping a process's in-memory copies (its L1) coherent with the fleet: what each
//! notification of another process's change does to them. Shared by the Rust tiered cache
//! and the Python and Node tiers.

use std::time::Duration;

use herdless::HitState;
use herdless::backend::Notice;

use crate::versioned::Versioned;

/// A copy whose servable life ends within this is left to end by itself on a
/// [`Notice::Changed`]: the expiry of its shared entry (which ends no sooner than the copy's
/// servable life, but may be reported a moment before the copy the writer stored after its
/// commit ends) is reported like a write from outside herdless.
pub const EXPIRY_SLACK: Duration = Duration::from_millis(200);

/// Applies a notification to `l1`.
pub fn apply_notice<V: Clone + Send + Sync + 'static>(
    l1: &herdless::Cache<Versioned<V>>,
    notice: Notice<'_>,
) {
    match notice {
        // A waiting local leader reads the new entry itself; dropping its flight's result
        // would only cost another round trip.
        Notice::Written { awaited: true, .. } | Notice::Released { .. } => {}
        Notice::Written { key, .. } | Notice::Invalidated { key } => {
            let _ = l1.invalidate(key);
        }
        // Kept for fail-safe, or about to end anyway: what an expiry looks like (and the
        // previous value a conditional refresh is told stays).
        Notice::Changed { key } => {
            let servable = l1.peek(key).is_some_and(|p| {
                matches!(p.state, HitState::Fresh | HitState::Stale)
                    && p.stale_until.saturating_sub(p.age) > EXPIRY_SLACK
            });
            if servable {
                let _ = l1.invalidate(key);
            }
        }
        // No more notices will come for an unwatched namespace: its copies are dropped too.
        Notice::Bumped { namespace, .. } | Notice::Unwatched { namespace } => {
            l1.bump(namespace);
        }
        // Messages may have been lost: every copy of a shared entry may be outdated (loads
        // already running will not store their results either). Values this process
        // loaded alone stay: dropping them would let an older shared entry be served after
        // them.
        Notice::Lost => herdless::driver::retain(l1, |v| v.is_some_and(Versioned::is_local)),
        // A tag too long for the L1 is on no entry of it.
        Notice::Tagged {
            tag, soft: false, ..
        } => {
            let _ = l1.invalidate_tag(tag);
        }
        Notice::Tagged {
            tag, soft: true, ..
        } => {
            let _ = l1.expire_tag(tag);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_notice_drops_what_it_names_and_lost_keeps_only_local_values() {
        let l1: herdless::Cache<Versioned<u32>> = herdless::Cache::builder().build().unwrap();
        for k in ["a:1", "a:2", "b:1", "c:1"] {
            l1.set(k, Versioned::shared(1, 7)).unwrap();
        }
        l1.set("d:1", Versioned::local(2)).unwrap();
        let get = |k: &str| l1.get(k).map(|v| v.value);
        apply_notice(
            &l1,
            Notice::Written {
                key: "a:1",
                version: 8,
                awaited: true,
            },
        );
        assert_eq!(
            get("a:1"),
            Some(1),
            "an awaited write is read by its waiting leader"
        );
        apply_notice(
            &l1,
            Notice::Written {
                key: "a:1",
                version: 8,
                awaited: false,
            },
        );
        assert_eq!(get("a:1"), None);
        apply_notice(&l1, Notice::Invalidated { key: "a:2" });
        assert_eq!(get("a:2"), None);
        apply_notice(
            &l1,
            Notice::Bumped {
                namespace: "a",
                epoch: 1,
            },
        );
        assert_eq!(get("b:1"), Some(1), "a bump of `a` leaves `b` alone");
        apply_notice(&l1, Notice::Unwatched { namespace: "b" });
        assert_eq!(get("b:1"), None, "an unwatched namespace's copies go");
        // Losing messages drops every copy of a shared entry, and keeps this process's own
        // loads (an older shared entry must not be served after them).
        apply_notice(&l1, Notice::Lost);
        assert_eq!((get("c:1"), get("d:1")), (None, Some(2)));
        assert_eq!(l1.metrics().entries, 1);
    }

    #[test]
    fn an_outside_change_drops_servable_copies_and_leaves_ending_ones() {
        let clock = herdless::ManualClock::new();
        let l1: herdless::Cache<Versioned<u32>> = herdless::Cache::builder()
            .ttl(Duration::from_secs(10))
            .jitter(0.0)
            .clock(clock.clone())
            .build()
            .unwrap();
        l1.set("a:1", Versioned::shared(1, 7)).unwrap();
        l1.set("a:2", Versioned::shared(2, 7)).unwrap();
        apply_notice(&l1, Notice::Changed { key: "a:1" });
        assert!(l1.peek("a:1").is_none(), "a servable copy goes");
        // Its shared entry expires as the copy ends: left to end by itself.
        clock.advance(Duration::from_secs(10) - EXPIRY_SLACK / 2);
        apply_notice(&l1, Notice::Changed { key: "a:2" });
        assert!(l1.peek("a:2").is_some());
    }
}
