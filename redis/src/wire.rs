//! The entry encoding (PROTOCOL.md, "Entry"): a fixed 52-byte big-endian header, in format
//! 2 an extension with the loader's own ttl and metadata (in format 4 followed by the tags
//! and their marks), then the value bytes. Fixed
//! offsets keep the Lua scripts simple (they read the times, version and epoch without a
//! parser) and make the format easy to implement in any language.
//!
//! ```text
//! offset size field
//!  0      2   magic "hl"
//!  2      1   format version (1; 2 with the extension; 4 with it and the tags)
//!  3      1   flags: bit 0 = a value follows (0 = a cached absence); bit 1 = idle (a
//!             time-to-idle follows the header); other bits 0
//!  4      8   fresh_until   Unix ms
//! 12      8   stale_until   Unix ms (>= fresh_until; end of grace)
//! 20      8   retain_until  Unix ms (>= stale_until; the key's own PX expiry)
//! 28      8   load duration, microseconds
//! 36      8   version (assigned by the commit script)
//! 44      8   epoch   (assigned by the commit script)
//! with flag bit 1 (idle), before anything else, and everything below 8 bytes later:
//! 52      8   tti     the entry's time-to-idle, ms (>= 1)
//! format 1:
//! 52      -   value bytes (empty for an absence)
//! format 2:
//! 52      8   ttl     the loader's own ttl, ms (0: the cache's)
//! 60      2   meta_len  bytes of metadata (at most herdless::MAX_META_BYTES)
//! 62      n   meta    UTF-8 (an ETag, a version)
//! 62+n    -   value bytes (empty for an absence)
//! format 4 (format 2's extension, then the tags section):
//! 62+n    1   tag_count 1 to MAX_TAGS
//! 63+n    -   each tag: len (1 byte, 1 to herdless::MAX_TAG_BYTES), UTF-8 bytes, then its
//!             mark: incarnation (8), seen (8) (what the tag's record said at the write)
//! ...     -   value bytes (empty for an absence)
//! ```
//!
//! A writer uses format 1 when the loader chose neither, format 2 when it chose a ttl or
//! metadata and the entry has no tags, and format 4 only for an entry with tags: one
//! spelling per entry, so a fleet that does not use them writes what older readers read.
//! Format 3 (tags dated by the writer's wall clock, compared with stamps of other clocks)
//! is retired: it is an unknown format, a miss, and the next commit replaces it. The idle
//! flag is written only for an entry with a time-to-idle, in any format; a reader older than
//! it sees an unknown flag bit (a miss), as for a new format.

use std::time::Duration;

use herdless::backend::{StoredEntry, TagMark};

/// Bytes before the value.
pub const HEADER_LEN: usize = 52;
/// The format of an entry without the loader's own ttl or metadata.
pub const FORMAT: u8 = 1;
/// The format with them (the extension after the header).
pub const FORMAT_EXTENDED: u8 = 2;
/// The format of an entry with tags (format 2's extension followed by the tags section,
/// each tag with its mark).
pub const FORMAT_TAGGED: u8 = 4;
/// The retired format of tagged entries dated by their writer's clock: unknown to this
/// reader (a miss), as every format it cannot read.
const FORMAT_RETIRED: u8 = 3;
/// The most tags one entry's bytes may carry (its count is one byte).
pub const MAX_TAGS: usize = 255;
/// The longest tag the entry bytes carry (its length is one byte): the engine's own bound.
pub const MAX_TAG_BYTES: usize = herdless::MAX_TAG_BYTES;
/// Bytes of the extension before its metadata (format 2).
const EXTENSION_LEN: usize = 10;
/// Bytes of a tag's mark: incarnation, seen.
const MARK_LEN: usize = 16;
const MAGIC: [u8; 2] = *b"hl";
const HAS_VALUE: u8 = 1;
/// Flag: the entry has a time-to-idle, in ms, in 8 bytes right after the header (before
/// any extension, at a fixed offset).
const IDLE: u8 = 2;
/// Bytes of the time-to-idle under [`IDLE`].
const IDLE_LEN: usize = 8;

/// Why bytes under a key are not an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the header.
    Truncated,
    /// Not written by herdless (wrong magic).
    Foreign,
    /// A format version this build does not know.
    UnknownFormat(u8),
    /// Unknown flag bits, a value under an absence flag, times out of order, or a bad
    /// extension or tags section.
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
    // A tti under a millisecond is one: zero would say "none".
    let tti_ms = entry
        .tti
        .filter(|t| !t.is_zero())
        .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1));
    // Tags out of the wire's bounds are refused before an entry is encoded (the engine
    // checks them when the load answers); these filters only keep the bytes well formed.
    // A tag without a mark carries the empty one, which no record matches.
    let tags: Vec<(&str, TagMark)> = entry
        .tags
        .iter()
        .enumerate()
        .map(|(i, t)| {
            (
                t.as_str(),
                entry.tag_marks.get(i).copied().unwrap_or_default(),
            )
        })
        .filter(|(t, _)| !t.is_empty() && t.len() <= MAX_TAG_BYTES)
        .take(MAX_TAGS)
        .collect();
    let tagged = !tags.is_empty();
    let extended = tagged || !meta.is_empty() || ttl_ms != 0;
    let tags_len: usize = tags.iter().map(|(t, _)| 1 + t.len() + MARK_LEN).sum();
    let mut out = Vec::with_capacity(
        HEADER_LEN + IDLE_LEN + EXTENSION_LEN + meta.len() + 1 + tags_len + value.len(),
    );
    out.extend_from_slice(&MAGIC);
    out.push(match (tagged, extended) {
        (true, _) => FORMAT_TAGGED,
        (false, true) => FORMAT_EXTENDED,
        (false, false) => FORMAT,
    });
    let idle = if tti_ms.is_some() { IDLE } else { 0 };
    out.push(if entry.value.is_some() { HAS_VALUE } else { 0 } | idle);
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
    if let Some(tti) = tti_ms {
        out.extend_from_slice(&tti.to_be_bytes());
    }
    if extended {
        out.extend_from_slice(&ttl_ms.to_be_bytes());
        out.extend_from_slice(&(meta.len() as u16).to_be_bytes());
        out.extend_from_slice(meta.as_bytes());
    }
    if tagged {
        out.push(tags.len() as u8);
        for (t, mark) in &tags {
            out.push(t.len() as u8);
            out.extend_from_slice(t.as_bytes());
            out.extend_from_slice(&mark.incarnation.to_be_bytes());
            out.extend_from_slice(&mark.seen.to_be_bytes());
        }
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
    if !(FORMAT..=FORMAT_TAGGED).contains(&b[2]) || b[2] == FORMAT_RETIRED {
        return Err(DecodeError::UnknownFormat(b[2]));
    }
    if b.len() < HEADER_LEN {
        return Err(DecodeError::Truncated);
    }
    let flags = b[3];
    let (tti, at) = if flags & IDLE != 0 {
        let tti = b
            .get(HEADER_LEN..HEADER_LEN + IDLE_LEN)
            .ok_or(DecodeError::Truncated)?;
        let tti = u64_at(tti, 0);
        if tti == 0 {
            return Err(DecodeError::Malformed);
        }
        (Some(Duration::from_millis(tti)), HEADER_LEN + IDLE_LEN)
    } else {
        (None, HEADER_LEN)
    };
    let (ttl, meta, body) = match b[2] {
        FORMAT => (None, None, at),
        _ => extension(b, at, b[2] == FORMAT_TAGGED)?,
    };
    let (tags, tag_marks, body) = match b[2] {
        FORMAT_TAGGED => tags_section(b, body)?,
        _ => (Vec::new(), Vec::new(), body),
    };
    if flags & !(HAS_VALUE | IDLE) != 0 || (flags & HAS_VALUE == 0 && b.len() > body) {
        return Err(DecodeError::Malformed);
    }
    let entry = StoredEntry {
        ttl,
        tti,
        meta,
        value: (flags & HAS_VALUE != 0).then(|| b[body..].to_vec()),
        fresh_until_ms: u64_at(b, 4),
        stale_until_ms: u64_at(b, 12),
        retain_until_ms: u64_at(b, 20),
        load_duration: Duration::from_micros(u64_at(b, 28)),
        version: u64_at(b, 36),
        epoch: u64_at(b, 44),
        tags,
        tag_marks,
    };
    if entry.stale_until_ms < entry.fresh_until_ms || entry.retain_until_ms < entry.stale_until_ms {
        return Err(DecodeError::Malformed);
    }
    Ok(entry)
}

/// Format 2's extension at `at` (also the start of format 4's): the loader's ttl, its
/// metadata, and where what follows starts.
#[allow(clippy::type_complexity)]
fn extension(
    b: &[u8],
    at: usize,
    tagged: bool,
) -> Result<(Option<Duration>, Option<String>, usize), DecodeError> {
    if b.len() < at + EXTENSION_LEN {
        return Err(DecodeError::Truncated);
    }
    let ttl_ms = u64_at(b, at);
    let len = usize::from(u16::from_be_bytes([b[at + 8], b[at + 9]]));
    let start = at + EXTENSION_LEN;
    if len > herdless::MAX_META_BYTES {
        return Err(DecodeError::Malformed);
    }
    let meta = b.get(start..start + len).ok_or(DecodeError::Truncated)?;
    let meta = std::str::from_utf8(meta).map_err(|_| DecodeError::Malformed)?;
    // Format 2 is written only with something in its extension: one spelling per entry.
    if !tagged && ttl_ms == 0 && meta.is_empty() {
        return Err(DecodeError::Malformed);
    }
    let ttl = (ttl_ms != 0).then(|| Duration::from_millis(ttl_ms));
    let meta = (!meta.is_empty()).then(|| meta.to_owned());
    Ok((ttl, meta, start + len))
}

/// Format 4's tags section at `at`: the tags, their marks, and where the value starts.
/// Every length is checked against the bytes present before anything is read or
/// allocated.
#[allow(clippy::type_complexity)]
fn tags_section(b: &[u8], at: usize) -> Result<(Vec<String>, Vec<TagMark>, usize), DecodeError> {
    let count = usize::from(*b.get(at).ok_or(DecodeError::Truncated)?);
    // Format 4 is written only with tags: one spelling per entry.
    if count == 0 {
        return Err(DecodeError::Malformed);
    }
    let (mut tags, mut marks) = (Vec::new(), Vec::new());
    let mut at = at + 1;
    for _ in 0..count {
        let len = usize::from(*b.get(at).ok_or(DecodeError::Truncated)?);
        if len == 0 || len > MAX_TAG_BYTES {
            return Err(DecodeError::Malformed);
        }
        let raw = b.get(at + 1..at + 1 + len).ok_or(DecodeError::Truncated)?;
        let tag = std::str::from_utf8(raw).map_err(|_| DecodeError::Malformed)?;
        let mark = b
            .get(at + 1 + len..at + 1 + len + MARK_LEN)
            .ok_or(DecodeError::Truncated)?;
        tags.push(tag.to_owned());
        marks.push(TagMark {
            incarnation: u64_at(mark, 0),
            seen: u64_at(mark, 8),
        });
        at += 1 + len + MARK_LEN;
    }
    Ok((tags, marks, at))
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
            tti: None,
            meta: None,
            tags: Vec::new(),
            tag_marks: Vec::new(),
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
        let mut v5 = good.clone();
        v5[2] = 5;
        assert_eq!(decode(&v5), Err(DecodeError::UnknownFormat(5)));
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
        let mut tagged = sample(Some(b"value"));
        tagged.tags = vec!["product:42".into(), "é".into()];
        tagged.tag_marks = vec![mark(7, 1_700_000_000_000_000), mark(u64::MAX, 0)];
        let mut idle = tagged.clone();
        idle.tti = Some(Duration::from_secs(2));
        for good in [
            encode(&sample(Some(b"value"))),
            encode(&extended),
            encode(&tagged),
            encode(&idle),
        ] {
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
    fn the_idle_flag_carries_the_tti_before_anything_else() {
        let mut plain = sample(Some(b"v"));
        plain.tti = Some(Duration::from_millis(1_500));
        let bytes = encode(&plain);
        assert_eq!((bytes[2], bytes[3]), (FORMAT, HAS_VALUE | IDLE));
        assert_eq!(u64_at(&bytes, 52), 1_500);
        assert_eq!(&bytes[60..], b"v");
        assert_eq!(decode(&bytes), Ok(plain.clone()));
        let mut tagged = plain;
        tagged.ttl = Some(Duration::from_secs(5));
        tagged.tags = vec!["t".into()];
        tagged.tag_marks = vec![mark(3, 4)];
        let bytes = encode(&tagged);
        assert_eq!(bytes[2], FORMAT_TAGGED);
        assert_eq!(
            u64_at(&bytes, 60),
            5_000,
            "the extension comes after the tti"
        );
        assert_eq!(decode(&bytes), Ok(tagged));
        // Under a millisecond is one (zero would say none); a zero under the flag, or the
        // flag with no room for its field, is not an entry.
        let mut short = sample(None);
        short.tti = Some(Duration::from_micros(10));
        assert_eq!(
            decode(&encode(&short)).unwrap().tti,
            Some(Duration::from_millis(1))
        );
        let mut zero = encode(&short);
        zero[52..60].copy_from_slice(&0u64.to_be_bytes());
        assert_eq!(decode(&zero), Err(DecodeError::Malformed));
        assert_eq!(decode(&zero[..56]), Err(DecodeError::Truncated));
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

    fn mark(incarnation: u64, seen: u64) -> TagMark {
        TagMark { incarnation, seen }
    }

    #[test]
    fn format_4_carries_the_tags_and_their_marks() {
        for (v, meta) in [(Some(&b"page"[..]), Some("etag")), (None, None)] {
            let mut e = sample(v);
            e.meta = meta.map(Into::into);
            e.tags = vec!["product:42".into(), "seller:7".into()];
            e.tag_marks = vec![mark(0xabc, 1_699_999_999_000_000), mark(5, 0)];
            let bytes = encode(&e);
            assert_eq!(&bytes[..3], b"hl\x04");
            let at = 62 + meta.map_or(0, str::len);
            assert_eq!(bytes[at], 2);
            assert_eq!(bytes[at + 1], 10);
            assert_eq!(&bytes[at + 2..at + 12], b"product:42");
            assert_eq!(u64_at(&bytes, at + 12), 0xabc);
            assert_eq!(u64_at(&bytes, at + 20), 1_699_999_999_000_000);
            assert_eq!(bytes[at + 28], 8);
            assert_eq!(u64_at(&bytes, at + 37), 5);
            assert_eq!(decode(&bytes), Ok(e));
        }
        // Without tags, formats 1 and 2 stay as they were (one spelling per entry).
        assert_eq!(encode(&sample(Some(b"x")))[2], 1);
        let good = {
            let mut e = sample(Some(b"x"));
            e.tags = vec!["t".into()];
            e.tag_marks = vec![mark(1, 2)];
            encode(&e)
        };
        // A tags section with no tag, an empty or overlong tag, bytes that are not UTF-8,
        // a mark cut short, or a count beyond the bytes present: not an entry.
        let mut none = good.clone();
        none[62] = 0;
        assert_eq!(decode(&none), Err(DecodeError::Malformed));
        let mut empty = good.clone();
        empty[63] = 0;
        assert_eq!(decode(&empty), Err(DecodeError::Malformed));
        let mut long = good.clone();
        long[63] = 200;
        assert_eq!(decode(&long), Err(DecodeError::Malformed));
        let mut utf = good.clone();
        utf[64] = 0xff;
        assert_eq!(decode(&utf), Err(DecodeError::Malformed));
        assert_eq!(decode(&good[..70]), Err(DecodeError::Truncated));
        let mut many = good[..81].to_vec();
        many[62] = 255;
        assert_eq!(decode(&many), Err(DecodeError::Truncated));
        // Format 3, retired: unknown to this reader, whatever its bytes.
        let mut retired = good;
        retired[2] = 3;
        assert_eq!(decode(&retired), Err(DecodeError::UnknownFormat(3)));
    }
}
