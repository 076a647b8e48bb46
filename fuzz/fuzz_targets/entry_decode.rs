//! The Redis entry decoder (PROTOCOL.md §2) on arbitrary bytes.
//!
//! Invariants:
//! - `decode` never panics;
//! - it accepts exactly the bytes §2 calls an entry (formats 1 and 2) (checked against an independent reading
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

/// Where format 2's value starts, if its extension is whole (ttl, meta length, meta).
fn extension_end(b: &[u8]) -> Option<usize> {
    let at = HEADER_LEN + 10;
    let len = usize::from(u16::from_be_bytes([*b.get(at - 2)?, *b.get(at - 1)?]));
    (b.len() >= at + len).then_some(at + len)
}

/// §2's rules, read directly off the byte layout.
fn is_entry(b: &[u8]) -> bool {
    if b.len() < HEADER_LEN || b[0] != b'h' || b[1] != b'l' {
        return false;
    }
    let body = match b[2] {
        1 => HEADER_LEN,
        2 => match extension_end(b) {
            Some(end) => {
                let meta = &b[HEADER_LEN + 10..end];
                if meta.len() > herdless::MAX_META_BYTES
                    || std::str::from_utf8(meta).is_err()
                    || (be(b, HEADER_LEN) == 0 && meta.is_empty())
                {
                    return false;
                }
                end
            }
            None => return false,
        },
        _ => return false,
    };
    (b[3] == 1 || (b[3] == 0 && b.len() == body))
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
        // Whole milliseconds, not zero (zero is "the cache's ttl", spelled None).
        ttl: Option::<u32>::arbitrary(u)?
            .filter(|&ms| ms != 0)
            .map(|ms| Duration::from_millis(u64::from(ms))),
        // Not empty (an empty meta is None) and within the cap.
        meta: Option::<String>::arbitrary(u)?
            .filter(|m| !m.is_empty() && m.len() <= herdless::MAX_META_BYTES),
    })
}

/// The first rule of format 2's extension that `b` breaks (its header is whole).
fn extension_error(b: &[u8]) -> DecodeError {
    let at = HEADER_LEN + 10;
    if b.len() < at {
        return DecodeError::Truncated;
    }
    let len = usize::from(u16::from_be_bytes([b[at - 2], b[at - 1]]));
    if len > herdless::MAX_META_BYTES {
        DecodeError::Malformed
    } else if b.len() < at + len {
        DecodeError::Truncated
    } else {
        DecodeError::Malformed
    }
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
            } else if data[2] != wire::FORMAT && data[2] != wire::FORMAT_EXTENDED {
                DecodeError::UnknownFormat(data[2])
            } else if data.len() < HEADER_LEN {
                DecodeError::Truncated
            } else if data[2] == wire::FORMAT_EXTENDED {
                extension_error(data)
            } else {
                DecodeError::Malformed
            };
            assert_eq!(e, expected);
        }
    }
    if let Ok(entry) = entry_from(&mut Unstructured::new(data)) {
        let bytes = wire::encode(&entry);
        let extension = match (&entry.ttl, &entry.meta) {
            (None, None) => 0,
            (_, meta) => 10 + meta.as_ref().map_or(0, String::len),
        };
        assert_eq!(
            bytes.len(),
            HEADER_LEN + extension + entry.value.as_ref().map_or(0, Vec::len)
        );
        assert_eq!(wire::decode(&bytes), Ok(entry));
    }
});
