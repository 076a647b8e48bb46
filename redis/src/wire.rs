//! The entry encoding (PROTOCOL.md, "Entry"): a fixed 52-byte big-endian header, in format
//! 2 an extension with the loader's own ttl and metadata, then the value bytes. Fixed
//! offsets keep the Lua scripts simple (they read the times, version and epoch without a
//! parser) and make the format easy to implement in any language.
//!
//! ```text
//! offset size field
//!  0      2   magic "hl"
//!  2      1   format version (1, or 2 with the extension)
//!  3      1   flags: bit 0 = a value follows (0 = a cached absence); other bits 0
//!  4      8   fresh_until   Unix ms
//! 12      8   stale_until   Unix ms (>= fresh_until; end of grace)
//! 20      8   retain_until  Unix ms (>= stale_until; the key's own PX expiry)
//! 28      8   load duration, microseconds
//! 36      8   version (assigned by the commit script)
//! 44      8   epoch   (assigned by the commit script)
//! format 1:
//! 52      -   value bytes (empty for an absence)
//! format 2:
//! 52      8   ttl     the loader's own ttl, ms (0: the cache's)
//! 60      2   meta_len  bytes of metadata (at most herdless::MAX_META_BYTES)
//! 62      n   meta    UTF-8 (an ETag, a version)
//! 62+n    -   value bytes (empty for an absence)
//! ```
//!
//! A writer uses format 1 when the loader chose neither, so a fleet that does not use them
//! writes what older readers read.

use std::time::Duration;

use herdless::backend::StoredEntry;

/// Bytes before the value.
pub const HEADER_LEN: usize = 52;
/// The format of an entry without the loader's own ttl or metadata.
pub const FORMAT: u8 = 1;
/// The format with them (the extension after the header).
pub const FORMAT_EXTENDED: u8 = 2;
/// Bytes of the extension before its metadata (format 2).
const EXTENSION_LEN: usize = 10;
const MAGIC: [u8; 2] = *b"hl";
const HAS_VALUE: u8 = 1;

/// Why bytes under a key are not an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the header.
    Truncated,
    /// Not written by herdless (wrong magic).
    Foreign,
    /// A format version this build does not know.
    UnknownFormat(u8),
    /// Unknown flag bits, a value under an absence flag, or times out of order.
    Malformed,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated => f.write_str("entry shorter than its header"),
            Self::Foreign => f.write_str("not a herdless entry"),
            Self::UnknownFormat(v) => write!(f, "unknown entry format {v}"),
            Self::Malformed => f.write_str("malformed entry header"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Encodes `entry` (version and epoch as given; the commit script overwrites them).
pub fn encode(entry: &StoredEntry) -> Vec<u8> {
    let value = entry.value.as_deref().unwrap_or(&[]);
    let meta = entry
        .meta
        .as_deref()
        .filter(|m| m.len() <= herdless::MAX_META_BYTES)
        .unwrap_or("");
    let ttl_ms = entry
        .ttl
        .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
    let extended = !meta.is_empty() || ttl_ms != 0;
    let mut out = Vec::with_capacity(HEADER_LEN + EXTENSION_LEN + meta.len() + value.len());
    out.extend_from_slice(&MAGIC);
    out.push(if extended { FORMAT_EXTENDED } else { FORMAT });
    out.push(if entry.value.is_some() { HAS_VALUE } else { 0 });
    let load_us = u64::try_from(entry.load_duration.as_micros()).unwrap_or(u64::MAX);
    for n in [
        entry.fresh_until_ms,
        entry.stale_until_ms,
        entry.retain_until_ms,
        load_us,
        entry.version,
        entry.epoch,
    ] {
        out.extend_from_slice(&n.to_be_bytes());
    }
    if extended {
        out.extend_from_slice(&ttl_ms.to_be_bytes());
        out.extend_from_slice(&(meta.len() as u16).to_be_bytes());
        out.extend_from_slice(meta.as_bytes());
    }
    out.extend_from_slice(value);
    out
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// Decodes bytes read from the tier. Never panics, whatever the input.
pub fn decode(b: &[u8]) -> Result<StoredEntry, DecodeError> {
    if b.len() < 2 {
        return Err(if MAGIC.starts_with(b) {
            DecodeError::Truncated
        } else {
            DecodeError::Foreign
        });
    }
    if b[..2] != MAGIC {
        return Err(DecodeError::Foreign);
    }
    if b.len() < 3 {
        return Err(DecodeError::Truncated);
    }
    if b[2] != FORMAT && b[2] != FORMAT_EXTENDED {
        return Err(DecodeError::UnknownFormat(b[2]));
    }
    if b.len() < HEADER_LEN {
        return Err(DecodeError::Truncated);
    }
    let (ttl, meta, body) = match b[2] {
        FORMAT => (None, None, HEADER_LEN),
        _ => extension(b)?,
    };
    let flags = b[3];
    if flags & !HAS_VALUE != 0 || (flags & HAS_VALUE == 0 && b.len() > body) {
        return Err(DecodeError::Malformed);
    }
    let entry = StoredEntry {
        ttl,
        meta,
        value: (flags & HAS_VALUE != 0).then(|| b[body..].to_vec()),
        fresh_until_ms: u64_at(b, 4),
        stale_until_ms: u64_at(b, 12),
        retain_until_ms: u64_at(b, 20),
        load_duration: Duration::from_micros(u64_at(b, 28)),
        version: u64_at(b, 36),
        epoch: u64_at(b, 44),
    };
    if entry.stale_until_ms < entry.fresh_until_ms || entry.retain_until_ms < entry.stale_until_ms {
        return Err(DecodeError::Malformed);
    }
    Ok(entry)
}

/// Format 2's extension: the loader's ttl, its metadata, and where the value starts.
#[allow(clippy::type_complexity)]
fn extension(b: &[u8]) -> Result<(Option<Duration>, Option<String>, usize), DecodeError> {
    if b.len() < HEADER_LEN + EXTENSION_LEN {
        return Err(DecodeError::Truncated);
    }
    let ttl_ms = u64_at(b, HEADER_LEN);
    let len = usize::from(u16::from_be_bytes([b[HEADER_LEN + 8], b[HEADER_LEN + 9]]));
    let start = HEADER_LEN + EXTENSION_LEN;
    if len > herdless::MAX_META_BYTES {
        return Err(DecodeError::Malformed);
    }
    let meta = b.get(start..start + len).ok_or(DecodeError::Truncated)?;
    let meta = std::str::from_utf8(meta).map_err(|_| DecodeError::Malformed)?;
    // Format 2 is written only with something in its extension: one spelling per entry.
    if ttl_ms == 0 && meta.is_empty() {
        return Err(DecodeError::Malformed);
    }
    let ttl = (ttl_ms != 0).then(|| Duration::from_millis(ttl_ms));
    let meta = (!meta.is_empty()).then(|| meta.to_owned());
    Ok((ttl, meta, start + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(value: Option<&[u8]>) -> StoredEntry {
        StoredEntry {
            value: value.map(<[u8]>::to_vec),
            fresh_until_ms: 1_700_000_000_000,
            stale_until_ms: 1_700_000_030_000,
            retain_until_ms: 1_700_000_600_000,
            load_duration: Duration::from_micros(123_456),
            version: 1_700_000_000_000_123,
            epoch: 7,
            ttl: None,
            meta: None,
        }
    }

    #[test]
    fn round_trips_values_and_absences() {
        for v in [Some(&b"{\"a\":1}"[..]), Some(&b""[..]), None] {
            let e = sample(v);
            let bytes = encode(&e);
            assert_eq!(bytes.len(), HEADER_LEN + v.map_or(0, <[u8]>::len));
            assert_eq!(decode(&bytes), Ok(e));
        }
    }

    #[test]
    fn the_header_is_laid_out_as_documented() {
        let bytes = encode(&sample(Some(b"x")));
        assert_eq!(&bytes[..4], b"hl\x01\x01");
        assert_eq!(u64_at(&bytes, 4), 1_700_000_000_000);
        assert_eq!(u64_at(&bytes, 28), 123_456);
        assert_eq!(u64_at(&bytes, 44), 7);
        assert_eq!(bytes[52], b'x');
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        let good = encode(&sample(Some(b"value")));
        assert_eq!(decode(b""), Err(DecodeError::Truncated));
        assert_eq!(decode(b"h"), Err(DecodeError::Truncated));
        assert_eq!(decode(b"hello world"), Err(DecodeError::Foreign));
        assert_eq!(decode(b"{\"json\": true}"), Err(DecodeError::Foreign));
        assert_eq!(decode(&good[..30]), Err(DecodeError::Truncated));
        let mut v3 = good.clone();
        v3[2] = 3;
        assert_eq!(decode(&v3), Err(DecodeError::UnknownFormat(3)));
        let mut flags = good.clone();
        flags[3] = 0x80;
        assert_eq!(decode(&flags), Err(DecodeError::Malformed));
        let mut absent_with_bytes = good.clone();
        absent_with_bytes[3] = 0;
        assert_eq!(decode(&absent_with_bytes), Err(DecodeError::Malformed));
        let mut order = good;
        order[12..20].copy_from_slice(&0u64.to_be_bytes());
        assert_eq!(decode(&order), Err(DecodeError::Malformed));
        // Every prefix and every single-byte corruption decodes or fails cleanly, in both
        // formats.
        let mut extended = sample(Some(b"value"));
        extended.meta = Some("\"etag\"".into());
        for good in [encode(&sample(Some(b"value"))), encode(&extended)] {
            for n in 0..good.len() {
                let _ = decode(&good[..n]);
                for x in [0u8, 1, 0x7f, 0xff] {
                    let mut c = good.clone();
                    c[n] = x;
                    let _ = decode(&c);
                }
            }
        }
    }

    #[test]
    fn format_2_carries_the_loaders_ttl_and_metadata() {
        for v in [Some(&b"body"[..]), None] {
            let mut e = sample(v);
            e.ttl = Some(Duration::from_secs(5));
            e.meta = Some("W/\"v7\"".into());
            let bytes = encode(&e);
            assert_eq!(&bytes[..3], b"hl\x02");
            assert_eq!(u64_at(&bytes, 52), 5_000);
            assert_eq!(&bytes[60..62], &[0, 6]);
            assert_eq!(&bytes[62..68], b"W/\"v7\"");
            assert_eq!(bytes.len(), 68 + v.map_or(0, <[u8]>::len));
            assert_eq!(decode(&bytes), Ok(e));
        }
        // Metadata over the cap, or not UTF-8: not an entry.
        let mut e = sample(Some(b"x"));
        e.meta = Some("m".into());
        let mut long = encode(&e);
        long[60..62].copy_from_slice(&300u16.to_be_bytes());
        assert_eq!(decode(&long), Err(DecodeError::Malformed));
        let mut bad = encode(&e);
        bad[62] = 0xff;
        assert_eq!(decode(&bad), Err(DecodeError::Malformed));
        // A format 1 entry still decodes, without either.
        let old = encode(&sample(Some(b"x")));
        assert_eq!(old[2], 1);
        assert_eq!(decode(&old).unwrap().meta, None);
    }
}
