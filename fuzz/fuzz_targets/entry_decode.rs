//! The Redis entry decoder (PROTOCOL.md §2) on arbitrary bytes.
//!
//! Invariants:
//! - `decode` never panics;
//! - it accepts exactly the bytes §2 calls an entry (formats 1, 2 and 4; 3 is retired; the
//!   idle flag's tti field before anything else) (checked against an independent reading
//!   of the table, not against the decoder's own code);
//! - an accepted entry re-encodes to the very same bytes (the format has one spelling per
//!   entry), and any entry with ordered times and a whole number of microseconds survives
//!   `decode(encode(e))` unchanged.
#![no_main]

use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use herdless::backend::{StoredEntry, TagMark};
use herdless_redis::wire::{self, DecodeError, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fn be(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Where what follows the header starts: 8 bytes later under the idle flag (bit 1), whose
/// field (a tti in ms) must be whole and not zero; or the rule it breaks.
fn after_idle(b: &[u8]) -> Result<usize, DecodeError> {
    if b[3] & 2 == 0 {
        return Ok(HEADER_LEN);
    }
    if b.len() < HEADER_LEN + 8 {
        return Err(DecodeError::Truncated);
    }
    if be(b, HEADER_LEN) == 0 {
        return Err(DecodeError::Malformed);
    }
    Ok(HEADER_LEN + 8)
}

/// Where format 2's value starts, if its extension at `base` is whole (ttl, meta length,
/// meta).
fn extension_end(b: &[u8], base: usize) -> Option<usize> {
    let at = base + 10;
    let len = usize::from(u16::from_be_bytes([*b.get(at - 2)?, *b.get(at - 1)?]));
    (b.len() >= at + len).then_some(at + len)
}

/// Where format 4's value starts, after its tags section at `at` (a count of 1 or more,
/// each tag a length of 1 to 128, UTF-8, then a 16-byte mark), or the first rule it breaks.
fn tags_end(b: &[u8], at: usize) -> Result<usize, DecodeError> {
    let Some(&count) = b.get(at) else {
        return Err(DecodeError::Truncated);
    };
    if count == 0 {
        return Err(DecodeError::Malformed);
    }
    let mut at = at + 1;
    for _ in 0..count {
        let Some(&len) = b.get(at) else {
            return Err(DecodeError::Truncated);
        };
        let len = usize::from(len);
        if len == 0 || len > wire::MAX_TAG_BYTES {
            return Err(DecodeError::Malformed);
        }
        if b.len() < at + 1 + len {
            return Err(DecodeError::Truncated);
        }
        if std::str::from_utf8(&b[at + 1..at + 1 + len]).is_err() {
            return Err(DecodeError::Malformed);
        }
        if b.len() < at + 1 + len + 16 {
            return Err(DecodeError::Truncated);
        }
        at += 1 + len + 16;
    }
    Ok(at)
}

/// §2's rules, read directly off the byte layout.
fn is_entry(b: &[u8]) -> bool {
    if b.len() < HEADER_LEN || b[0] != b'h' || b[1] != b'l' {
        return false;
    }
    let Ok(base) = after_idle(b) else {
        return false;
    };
    let body = match b[2] {
        1 => base,
        2 | 4 => match extension_end(b, base) {
            Some(end) => {
                let meta = &b[base + 10..end];
                if meta.len() > herdless::MAX_META_BYTES
                    || std::str::from_utf8(meta).is_err()
                    || (b[2] == 2 && be(b, base) == 0 && meta.is_empty())
                {
                    return false;
                }
                if b[2] == 2 {
                    end
                } else {
                    match tags_end(b, end) {
                        Ok(end) => end,
                        Err(_) => return false,
                    }
                }
            }
            None => return false,
        },
        _ => return false,
    };
    let flags = b[3];
    flags & !3 == 0
        && (flags & 1 == 1 || b.len() == body)
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
        // The same for a time-to-idle.
        tti: Option::<u32>::arbitrary(u)?
            .filter(|&ms| ms != 0)
            .map(|ms| Duration::from_millis(u64::from(ms))),
        // Not empty (an empty meta is None) and within the cap.
        meta: Option::<String>::arbitrary(u)?
            .filter(|m| !m.is_empty() && m.len() <= herdless::MAX_META_BYTES),
        // Non-empty tags within the bounds, each with a mark.
        tags: Vec::<String>::arbitrary(u)?
            .into_iter()
            .filter(|t| !t.is_empty() && t.len() <= wire::MAX_TAG_BYTES)
            .take(wire::MAX_TAGS)
            .collect(),
        tag_marks: Vec::new(),
    })
    .and_then(|mut e| {
        for _ in 0..e.tags.len() {
            e.tag_marks.push(TagMark {
                incarnation: u64::arbitrary(u)?,
                seen: u64::arbitrary(u)?,
            });
        }
        Ok(e)
    })
}

/// The first rule of format 2's (or 4's) extension at `base` and tags section that `b`
/// breaks (its header is whole).
fn extension_error(b: &[u8], base: usize) -> DecodeError {
    let at = base + 10;
    if b.len() < at {
        return DecodeError::Truncated;
    }
    let len = usize::from(u16::from_be_bytes([b[at - 2], b[at - 1]]));
    if len > herdless::MAX_META_BYTES {
        DecodeError::Malformed
    } else if b.len() < at + len {
        DecodeError::Truncated
    } else if b[2] == 4 && std::str::from_utf8(&b[at..at + len]).is_ok() {
        tags_end(b, at + len)
            .err()
            .unwrap_or(DecodeError::Malformed)
    } else {
        DecodeError::Malformed
    }
}

fuzz_target!(|data: &[u8]| {
    match wire::decode(data) {
        Ok(entry) => {
            assert!(is_entry(data), "accepted bytes that are not an entry");
            assert_eq!(wire::encode(&entry), data, "re-encoding changed the bytes");
            assert_eq!(entry.value.is_some(), data[3] & 1 == 1);
            assert_eq!(entry.tti.is_some(), data[3] & 2 == 2);
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
            } else if !(wire::FORMAT..=wire::FORMAT_TAGGED).contains(&data[2]) || data[2] == 3 {
                DecodeError::UnknownFormat(data[2])
            } else if data.len() < HEADER_LEN {
                DecodeError::Truncated
            } else if let Err(e) = after_idle(data) {
                e
            } else if data[2] != wire::FORMAT {
                extension_error(data, after_idle(data).expect("checked"))
            } else {
                DecodeError::Malformed
            };
            assert_eq!(e, expected);
        }
    }
    if let Ok(entry) = entry_from(&mut Unstructured::new(data)) {
        let bytes = wire::encode(&entry);
        let tags: usize = entry.tags.iter().map(|t| 1 + t.len() + 16).sum();
        let extension = match (&entry.ttl, &entry.meta, entry.tags.is_empty()) {
            (None, None, true) => 0,
            (_, meta, true) => 10 + meta.as_ref().map_or(0, String::len),
            (_, meta, false) => 10 + meta.as_ref().map_or(0, String::len) + 1 + tags,
        };
        let idle = if entry.tti.is_some() { 8 } else { 0 };
        assert_eq!(
            bytes.len(),
            HEADER_LEN + idle + extension + entry.value.as_ref().map_or(0, Vec::len)
        );
        assert_eq!(wire::decode(&bytes), Ok(entry));
    }
});
