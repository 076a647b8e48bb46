//! What a value item holds, as herdless reads it (an entry, a lease, the "load locally"
//! mark), and the small conversions the operations share: lease tokens, memcached's
//! seconds, fresh epochs.

use std::time::Duration;

use herdless::backend::{LockToken, StoredEntry};
use memcache::exp::Ttl;

use crate::error::Error;
use crate::wall::random_secret;
use crate::wire;

/// A cold key's lease, as its value item holds it while the load runs:
/// `herdless:lease:<32 hex digits of the leader's secret>`. Written with `ms ... MN` (add:
/// only where nothing is), so one process wins; the secret lets a leader whose answer was
/// lost find and remove it (`forget`).
const LEASE: &str = "herdless:lease:";

/// The "load locally" mark of PROTOCOL.md section 3, as memcached holds it: the whole item
/// is `herdless:unshared:<epoch>`, so it can never be read as an entry.
pub(super) const UNSHARED: &str = "herdless:unshared:";

/// The lease marker of `secret`.
pub(super) fn lease(secret: &[u8; 16]) -> Vec<u8> {
    format!("{LEASE}{}", crate::wall::hex(secret)).into_bytes()
}

/// Whole seconds covering `d`, at least 1 (memcached's times are seconds).
pub(super) fn secs(d: Duration) -> u32 {
    let s = d.as_millis().div_ceil(1000).max(1);
    u32::try_from(s).unwrap_or(u32::MAX)
}

/// memcached's expiry for an item that lives `d` from now: whole seconds, or never when its
/// end is past what memcached can hold (a life over 30 days is sent as a Unix time, which
/// memcached reads as a signed 32-bit number: past January 2038 it would read as already
/// expired; Django's 50-year "forever" was stored and gone at once).
/// The entry's own times still end it; an item that never expires can still be evicted.
pub(super) fn item_ttl(d: Duration) -> Ttl {
    let s = secs(d);
    let now = crate::wall::now_ms() / 1000;
    match now.saturating_add(u64::from(s)) < i32::MAX as u64 {
        true => Ttl::secs(s),
        false => Ttl::NEVER,
    }
}

/// A fresh epoch: random below 2^52, never 0, so an epoch memcached evicted comes back as a
/// number no entry was written under (PROTOCOL.md, "The memcached tier").
pub(super) fn fresh_epoch() -> Result<u64, Error> {
    let b = random_secret()?;
    let n = u64::from_be_bytes(b[..8].try_into().expect("8 bytes")) >> 12;
    Ok(n.max(1))
}

/// The lock token of a won lease: the epoch, and the item's CAS (what the commit compares).
pub(super) fn token(epoch: u64, cas: u64) -> LockToken {
    let mut secret = [0u8; 16];
    secret[..8].copy_from_slice(&cas.to_be_bytes());
    LockToken { epoch, secret }
}

/// The CAS a token was won with.
pub(super) fn cas_of(token: &LockToken) -> u64 {
    u64::from_be_bytes(token.secret[..8].try_into().expect("8 bytes"))
}

/// What a value item holds.
#[derive(Debug)]
pub(super) enum Item {
    /// Nothing (or an empty value).
    Empty,
    /// An entry of the current epoch.
    Entry(StoredEntry),
    /// A cold key's lease (the marker's bytes).
    Lease(Vec<u8>),
    /// The "load locally" mark of the current epoch.
    Unshared,
    /// Anything else: an entry of another epoch, another epoch's mark, or bytes that are
    /// not an entry (`corrupt`).
    Outdated {
        /// Not herdless's bytes.
        corrupt: bool,
    },
}

impl Item {
    /// `value` as herdless reads it under the namespace's current `epoch`.
    pub(super) fn read(value: Option<&[u8]>, epoch: u64) -> Item {
        let Some(b) = value.filter(|b| !b.is_empty()) else {
            return Item::Empty;
        };
        if b.starts_with(LEASE.as_bytes()) {
            return Item::Lease(b.to_vec());
        }
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

    /// The entry, if it may be served at `now` (fresh, or stale within grace).
    pub(super) fn servable(&self, now: u64) -> Option<StoredEntry> {
        match self {
            Item::Entry(e) if e.is_servable(now) => Some(e.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_read_as_entries_leases_marks_or_outdated_bytes() {
        let mut e = crate::lifetimes::new_entry(
            Some(b"v".to_vec()),
            Duration::from_secs(60),
            Duration::ZERO,
            Duration::from_secs(60),
            Duration::ZERO,
        );
        e.epoch = 7;
        let bytes = wire::encode(&e);
        assert!(matches!(Item::read(Some(&bytes), 7), Item::Entry(_)));
        assert!(matches!(
            Item::read(Some(&bytes), 8),
            Item::Outdated { corrupt: false }
        ));
        assert!(matches!(
            Item::read(Some(b"junk"), 7),
            Item::Outdated { corrupt: true }
        ));
        assert!(matches!(Item::read(Some(b""), 7), Item::Empty));
        assert!(matches!(Item::read(None, 7), Item::Empty));
        assert!(matches!(
            Item::read(Some(&lease(&[1; 16])), 7),
            Item::Lease(_)
        ));
        assert!(matches!(
            Item::read(Some(b"herdless:unshared:7"), 7),
            Item::Unshared
        ));
        assert!(matches!(
            Item::read(Some(b"herdless:unshared:6"), 7),
            Item::Outdated { corrupt: false }
        ));
        assert_eq!(cas_of(&token(3, 99)), 99);
        assert_eq!(
            (
                secs(Duration::from_millis(1)),
                secs(Duration::from_millis(1001))
            ),
            (1, 2)
        );
        assert!(fresh_epoch().unwrap() < 1 << 52);
        assert_eq!(item_ttl(Duration::from_secs(90)), Ttl::secs(90));
        assert_eq!(
            item_ttl(Duration::from_secs(100 * 365 * 86_400)),
            Ttl::NEVER
        );
    }
}
