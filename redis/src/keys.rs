//! The key layout (PROTOCOL.md, "Keys"). Every Redis key and channel of one herdless
//! namespace carries the same hash tag, `{<namespace>}`, so a value, its lock, the
//! namespace's epoch and its notification channel live in one Cluster slot: reading a value
//! with its epoch, and the lock and commit scripts, are single-slot operations.
//!
//! ```text
//! <prefix>:{<tag>}:v:<key>    the entry
//! <prefix>:{<tag>}:l:<key>    the lock: "<epoch>:<32 hex digits>"
//! <prefix>:{<tag>}:e          the namespace epoch (INCR)
//! <prefix>:{<tag>}:n          the notification channel
//! <prefix>:{t:<escaped tag>}:t an entry tag's record: "<incarnation>:<removed>:<expired>"
//! <prefix>:{%tags}:n           the channel of every entry tag's invalidations
//! ```
//!
//! `<tag>` is the namespace (the key's text before its first ':') with `%`, `{` and `}`
//! percent-escaped, and `%` alone for the empty namespace, so the tag is never empty and
//! never ends early (Redis hashes only what is between the first `{` and the next `}`).

use herdless::key::namespace_of;

/// The Redis names of one herdless key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyNames {
    /// The entry.
    pub value: String,
    /// The lock.
    pub lock: String,
    /// The namespace epoch.
    pub epoch: String,
    /// The namespace notification channel.
    pub channel: String,
}

/// The hash-tagged stem `<prefix>:{<tag>}` of a namespace.
pub fn stem(prefix: &str, namespace: &str) -> String {
    let mut s = String::with_capacity(prefix.len() + namespace.len() + 4);
    s.push_str(prefix);
    s.push_str(":{");
    if namespace.is_empty() {
        s.push('%');
    }
    escape_into(&mut s, namespace);
    s.push('}');
    s
}

/// `text` with `%`, `{` and `}` percent-escaped, so a hash tag never ends early.
fn escape_into(s: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '%' => s.push_str("%25"),
            '{' => s.push_str("%7B"),
            '}' => s.push_str("%7D"),
            c => s.push(c),
        }
    }
}

/// The record key of an entry tag (PROTOCOL.md, "Tags"): `<prefix>:{t:<escaped tag>}:t`,
/// its own hash tag, so the tags of a fleet spread over a Cluster. A namespace never
/// contains `:`, so this never shares a name with a namespace's keys.
pub fn tag_key(prefix: &str, tag: &str) -> String {
    let mut s = String::with_capacity(prefix.len() + tag.len() + 7);
    s.push_str(prefix);
    s.push_str(":{t:");
    escape_into(&mut s, tag);
    s.push_str("}:t");
    s
}

/// The one channel of every entry tag's invalidations: `<prefix>:{%tags}:n`. No namespace
/// escapes to `%tags`, and on a single server the pattern of [`channel_pattern`] covers it.
pub fn tags_channel(prefix: &str) -> String {
    format!("{prefix}:{{%tags}}:n")
}

/// The epoch key of a namespace.
pub fn epoch_key(prefix: &str, namespace: &str) -> String {
    stem(prefix, namespace) + ":e"
}

/// The notification channel of a namespace.
pub fn channel(prefix: &str, namespace: &str) -> String {
    stem(prefix, namespace) + ":n"
}

/// The pattern matching every notification channel of `prefix` (for `PSUBSCRIBE`):
/// `<prefix>:{*}:n`, with the glob characters of the prefix escaped.
pub fn channel_pattern(prefix: &str) -> String {
    let mut p = String::with_capacity(prefix.len() + 6);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push_str(":{*}:n");
    p
}

/// The namespace of a notification channel of `prefix`, if it is one.
pub fn namespace_of_channel(prefix: &str, channel: &str) -> Option<String> {
    let tag = channel
        .strip_prefix(prefix)?
        .strip_prefix(":{")?
        .strip_suffix("}:n")?;
    if tag == "%" {
        return Some(String::new());
    }
    let mut out = String::with_capacity(tag.len());
    let mut rest = tag;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3)?;
        out.push(match code {
            "25" => '%',
            "7B" => '{',
            "7D" => '}',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// The herdless key whose value name (`<prefix>:{<tag>}:v:<key>`) is `name`, if it is one
/// of `prefix` (its tag the key's own namespace): what a tracking invalidation names.
pub fn key_of_value<'a>(prefix: &str, name: &'a str) -> Option<&'a str> {
    let rest = name.strip_prefix(prefix)?.strip_prefix(":{")?;
    // A tag escapes `}`, so its first `}` ends it.
    let end = rest.find('}')?;
    let key = rest[end + 1..].strip_prefix(":v:")?;
    let stem = stem(prefix, namespace_of(key));
    (name.len() == stem.len() + 3 + key.len() && name.starts_with(&stem)).then_some(key)
}

/// All Redis names of `key`.
pub fn names(prefix: &str, key: &str) -> KeyNames {
    let stem = stem(prefix, namespace_of(key));
    KeyNames {
        value: format!("{stem}:v:{key}"),
        lock: format!("{stem}:l:{key}"),
        epoch: format!("{stem}:e"),
        channel: format!("{stem}:n"),
    }
}

/// The Redis Cluster hash slot of a key (CRC16/XMODEM of its hash tag, mod 16384), to check
/// the layout's promise that everything of a namespace shares one slot.
pub fn slot(key: &str) -> u16 {
    let b = key.as_bytes();
    let tagged = b.iter().position(|&c| c == b'{').and_then(|open| {
        let close = b[open + 1..].iter().position(|&c| c == b'}')?;
        (close > 0).then(|| &b[open + 1..open + 1 + close])
    });
    crc16(tagged.unwrap_or(b)) % 16384
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_protocol() {
        let n = names("hl", "users:v1:profile:42");
        assert_eq!(n.value, "hl:{users}:v:users:v1:profile:42");
        assert_eq!(n.lock, "hl:{users}:l:users:v1:profile:42");
        assert_eq!(n.epoch, "hl:{users}:e");
        assert_eq!(n.channel, "hl:{users}:n");
    }

    #[test]
    fn a_namespace_shares_one_slot_whatever_its_characters() {
        for key in [
            "users:42",
            "nokey",
            ":empty-namespace",
            "a}b:x",
            "{x}:y",
            "%7B:z",
            "ünï:1",
            "a{b}c:{d}",
        ] {
            let n = names("pfx", key);
            let s = slot(&n.value);
            assert_eq!(slot(&n.lock), s, "{key}");
            assert_eq!(slot(&n.epoch), s, "{key}");
            assert_eq!(slot(&n.channel), s, "{key}");
            assert!(n.value.contains("{") && !n.value.contains("{}"), "{key}");
        }
        // Escaping keeps distinct namespaces distinct.
        assert_ne!(stem("p", "{x}"), stem("p", "%7Bx%7D"));
        assert_ne!(stem("p", ""), stem("p", "%"));
    }

    #[test]
    fn tag_keys_have_their_own_slot_and_never_meet_a_namespace() {
        assert_eq!(tag_key("hl", "product:42"), "hl:{t:product:42}:t");
        assert_eq!(tag_key("hl", "a{b}%"), "hl:{t:a%7Bb%7D%25}:t");
        assert_eq!(tags_channel("hl"), "hl:{%tags}:n");
        assert_ne!(slot(&tag_key("hl", "x{")), slot(&tag_key("hl", "x")));
        // The standalone pattern subscription hears the tags channel too.
        assert_eq!(channel_pattern("hl"), "hl:{*}:n");
        for key in ["users:42", "a{b}:1", "%:x", "noname", ":lead", "ns:v:1"] {
            assert_eq!(key_of_value("hl", &names("hl", key).value), Some(key));
        }
        for other in [
            names("hl", "users:1").lock,
            names("hl", "users:1").epoch,
            names("hl2", "users:1").value,
            "hl:{users}:v:other:1".into(),
            "hl:{users".into(),
            tag_key("hl", "users"),
        ] {
            assert_eq!(key_of_value("hl", &other), None, "{other}");
        }
        assert_eq!(namespace_of_channel("hl", &tags_channel("hl")), None);
        for ns in ["t", "%tags", "", "%"] {
            assert_ne!(channel("hl", ns), tags_channel("hl"));
        }
    }

    #[test]
    fn crc16_matches_redis() {
        // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        assert_eq!(slot("foo{}{bar}"), slot("foo{}{bar}"));
    }
}
