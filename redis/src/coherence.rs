//! Keeping a process's in-memory copies (its L1) coherent with the fleet: what each
//! notification of another process's change does to them. Shared by the Rust tiered cache
//! and the Python and Node tiers.

use herdless::backend::Notice;

/// Applies a notification to `l1`.
pub fn apply_notice<V: Clone + Send + Sync + 'static>(l1: &herdless::Cache<V>, notice: Notice<'_>) {
    match notice {
        // A waiting local leader reads the new entry itself; dropping its flight's result
        // would only cost another round trip.
        Notice::Written { awaited: true, .. } | Notice::Released { .. } => {}
        Notice::Written { key, .. } | Notice::Invalidated { key } => {
            let _ = l1.invalidate(key);
        }
        // No more notices will come for an unwatched namespace: its copies are dropped too.
        Notice::Bumped { namespace, .. } | Notice::Unwatched { namespace } => {
            l1.bump(namespace);
        }
        // Messages may have been lost: every copy may be outdated. Loads already running
        // will not store their results either.
        Notice::Lost => l1.clear(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_notice_drops_what_it_names_and_lost_drops_everything() {
        let l1: herdless::Cache<u32> = herdless::Cache::builder().build().unwrap();
        for k in ["a:1", "a:2", "b:1", "c:1"] {
            l1.set(k, 1).unwrap();
        }
        apply_notice(
            &l1,
            Notice::Written {
                key: "a:1",
                version: 2,
                awaited: true,
            },
        );
        assert_eq!(
            l1.get("a:1"),
            Some(1),
            "an awaited write is read by its waiting leader"
        );
        apply_notice(
            &l1,
            Notice::Written {
                key: "a:1",
                version: 2,
                awaited: false,
            },
        );
        assert_eq!(l1.get("a:1"), None);
        apply_notice(&l1, Notice::Invalidated { key: "a:2" });
        assert_eq!(l1.get("a:2"), None);
        apply_notice(
            &l1,
            Notice::Bumped {
                namespace: "a",
                epoch: 1,
            },
        );
        assert_eq!(l1.get("b:1"), Some(1), "a bump of `a` leaves `b` alone");
        // Losing messages drops every namespace's copies.
        apply_notice(&l1, Notice::Lost);
        assert_eq!((l1.get("b:1"), l1.get("c:1")), (None, None));
        assert_eq!(l1.metrics().entries, 0);
    }
}
