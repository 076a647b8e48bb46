//! The Redis entry decoder (PROTOCOL.md §2) on arbitrary bytes.
//!
//! Invariants:
//! - `decode` never panics;
//! - it accepts exactly the bytes §2 calls an entry (checked against an independent reading
//!   of the table, not against the decoder's own code);
//! - an accepted entry re-encodes to the very same bytes (the format has one spelling per
//!   entry), and any entry with ordered times and a whole number of microseconds survives
//!   `decode(encode(e))` unchanged.
#![no_main]

use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use herdless::backend::StoredEntry;
use herdless_redis::wire::{self, DecodeError, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fn be(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// §2's rules, read directly off the byte layout.
fn is_entry(b: &[u8]) -> bool {
    b.len() >= HEADER_LEN
        && b[0] == b'h'
        && b[1] == b'l'
        && b[2] == 1
        && (b[3] == 1 || (b[3] == 0 && b.len() == HEADER_LEN))
        && be(b, 4) <= be(b, 12)
        && be(b, 12) <= be(b, 20)
}

/// An entry built from the fuzzer's bytes, with its times put in order.
fn entry_from(u: &mut Unstructured<'_>) -> arbitrary::Result<StoredEntry> {
    let mut times = [u64::arbitrary(u)?, u64::arbitrary(u)?, u64::arbitrary(u)?];
    times.sort_unstable();
    Ok(StoredEntry {
        value: Option::<Vec<u8>>::arbitrary(u)?,
        fresh_until_ms: times[0],
        stale_until_ms: times[1],
        retain_until_ms: times[2],
        load_duration: Duration::from_micros(u64::arbitrary(u)?),
        version: u64::arbitrary(u)?,
        epoch: u64::arbitrary(u)?,
    })
}

fuzz_target!(|data: &[u8]| {
    match wire::decode(data) {
        Ok(entry) => {
            assert!(is_entry(data), "accepted bytes that are not an entry");
            assert_eq!(wire::encode(&entry), data, "re-encoding changed the bytes");
            assert_eq!(entry.value.is_some(), data[3] == 1);
        }
        Err(e) => {
            assert!(!is_entry(data), "rejected an entry: {e:?}");
            // The error names the first rule broken.
            let expected = if data.len() >= 2 && data[..2] != *b"hl" {
                DecodeError::Foreign
            } else if data.len() == 1 && data[0] != b'h' {
                DecodeError::Foreign
            } else if data.len() < 3 {
                DecodeError::Truncated
            } else if data[2] != wire::FORMAT {
                DecodeError::UnknownFormat(data[2])
            } else if data.len() < HEADER_LEN {
                DecodeError::Truncated
            } else {
                DecodeError::Malformed
            };
            assert_eq!(e, expected);
        }
    }
    if let Ok(entry) = entry_from(&mut Unstructured::new(data)) {
        let bytes = wire::encode(&entry);
        assert_eq!(
            bytes.len(),
            HEADER_LEN + entry.value.as_ref().map_or(0, Vec::len)
        );
        assert_eq!(wire::decode(&bytes), Ok(entry));
    }
});
