//! Item names on memcached: the Redis names of PROTOCOL.md section 1 where memcached takes
//! them, a digest where it does not (a key is at most 250 bytes there, without spaces or
//! control characters; a herdless key may be longer and hold any character).

use sha2::{Digest, Sha256};

use crate::error::Error;

/// The longest key memcached accepts.
const MAX_NAME: usize = 250;

/// The longest prefix: it leaves room for a digest name.
const MAX_PREFIX: usize = 64;

/// A name memcached takes as it is.
fn fits(name: &str) -> bool {
    name.len() <= MAX_NAME && name.bytes().all(|b| b > b' ' && b != 0x7f)
}

/// `name` if memcached takes it, else `<prefix>:#<sha-256 of name, hex>`: a name no herdless
/// key can spell otherwise (every other name goes on with `:{`).
fn item(prefix: &str, name: String) -> String {
    if fits(&name) {
        return name;
    }
    let digest = Sha256::digest(name.as_bytes());
    let mut s = String::with_capacity(prefix.len() + 2 + 64);
    s.push_str(prefix);
    s.push_str(":#");
    s.push_str(&crate::wall::hex(&digest));
    s
}

/// The item holding `key`'s entry (and, while a load runs, its lease).
pub(super) fn value(prefix: &str, key: &str) -> String {
    item(prefix, crate::keys::names(prefix, key).value)
}

/// The item holding the epoch of `namespace`.
pub(super) fn epoch(prefix: &str, namespace: &str) -> String {
    item(prefix, crate::keys::epoch_key(prefix, namespace))
}

/// A prefix memcached can carry in every name: 1 to 64 visible characters, without `{`, `}`
/// or `#`.
pub(super) fn check_prefix(prefix: &str) -> Result<(), Error> {
    let ok = !prefix.is_empty()
        && prefix.len() <= MAX_PREFIX
        && fits(prefix)
        && !prefix.contains(['{', '}', '#']);
    match ok {
        true => Ok(()),
        false => Err(Error::Config(format!(
            "memcached prefix {prefix:?}: 1 to {MAX_PREFIX} visible characters, without {{, }} or #"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_memcached_takes_stay_redis_names_the_others_are_digests() {
        assert_eq!(value("hl", "users:42"), "hl:{users}:v:users:42");
        assert_eq!(epoch("hl", "users"), "hl:{users}:e");
        let spaced = value("hl", "users:ada lovelace");
        assert!(
            spaced.starts_with("hl:#") && spaced.len() == 4 + 64,
            "{spaced}"
        );
        let long = value("hl", &format!("k:{}", "x".repeat(300)));
        assert!(long.starts_with("hl:#") && fits(&long));
        assert_ne!(long, value("hl", &format!("k:{}", "x".repeat(301))));
        assert!(fits(&epoch("hl", "a\u{7f}b")));
        for bad in ["", "a b", "a{b", "#", &"p".repeat(65)] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
        check_prefix("hl").unwrap();
    }
}
