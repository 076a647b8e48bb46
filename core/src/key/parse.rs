//! Reading a canonical key back into its parts.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::Write as _;

use super::error::KeyError;
use super::escape::{check_namespace, decode_str, escape_into, malformed};
use super::param::Param;

/// The namespace of `key`: the text before the first `:`, or the whole key if it has no `:`.
///
/// This is what the engine reads for `bump(namespace)` epochs and per-namespace metrics. For a
/// key made by [`KeyBuilder`](crate::KeyBuilder), it is exactly the namespace the builder was given.
pub fn namespace_of(key: &str) -> &str {
    // A byte loop, not `split_once(':')`: namespaces are short, and the `char` searcher's
    // setup cost more than the scan on every miss. `:` is ASCII, so the split is a boundary.
    match key.bytes().position(|b| b == b':') {
        Some(i) => &key[..i],
        None => key,
    }
}

/// Whether `key`'s namespace ([`namespace_of`]) is `name`, a namespace (no `:` in it),
/// without scanning `key` for its `:`: `key` is `name`, or starts with `name` and a `:`.
pub(crate) fn in_namespace(key: &str, name: &str) -> bool {
    debug_assert!(!name.contains(':'), "a namespace has no `:`");
    let key = key.as_bytes();
    key.starts_with(name.as_bytes()) && key.get(name.len()).is_none_or(|&b| b == b':')
}

/// The parts of a canonical key, as returned by [`parse`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParsedKey {
    /// The namespace.
    pub namespace: String,
    /// The schema version.
    pub version: u32,
    /// The entity, decoded.
    pub entity: String,
    /// The id's canonical text (decode it with [`Param::from_canonical`](crate::Param::from_canonical)),
    /// if the key has one.
    pub id: Option<String>,
    /// The parameters in key order: decoded name, canonical value text.
    pub params: Vec<(String, String)>,
}

impl ParsedKey {
    /// Writes the parts as a key, parameters in the order given (values must be canonical texts).
    /// For a `ParsedKey` returned by [`parse`], this is the parsed key.
    pub fn to_key(&self) -> String {
        let mut out = String::new();
        let _ = write!(out, "{}:v{}:", self.namespace, self.version);
        escape_into(&mut out, &self.entity);
        if let Some(id) = &self.id {
            out.push(':');
            out.push_str(id);
        }
        for (i, (name, value)) in self.params.iter().enumerate() {
            out.push(if i == 0 { '?' } else { '&' });
            escape_into(&mut out, name);
            out.push('=');
            out.push_str(value);
        }
        out
    }
}

/// Splits a key made by [`KeyBuilder::build`](crate::KeyBuilder::build) back into its parts. This is the inverse of
/// `build`. Text that no builder would produce is rejected, e.g. unsorted parameters,
/// lowercase escapes, `v01`, `#+1`.
pub fn parse(key: &str) -> Result<ParsedKey, KeyError> {
    let (path, query) = match key.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (key, None),
    };
    let mut parts = path.split(':');
    let namespace = parts.next().unwrap_or_default();
    check_namespace(namespace)?;
    let version = parts
        .next()
        .and_then(|v| v.strip_prefix('v'))
        .and_then(|v| v.parse::<u32>().ok().filter(|n| n.to_string() == v))
        .ok_or(malformed("missing or non-canonical version"))?;
    let entity = decode_str(parts.next().ok_or(malformed("missing entity"))?)?;
    if entity.is_empty() {
        return Err(KeyError::EmptyEntity);
    }
    let id = match parts.next() {
        Some(text) => Some(Param::from_canonical(text).map(|_| text.to_string())?),
        None => None,
    };
    if parts.next().is_some() {
        return Err(malformed("too many `:` separators"));
    }
    let mut params = Vec::new();
    let mut previous: Option<&str> = None;
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        let (name, value) = pair
            .split_once('=')
            .ok_or(malformed("parameter without `=`"))?;
        let decoded = decode_str(name)?;
        if decoded.is_empty() {
            return Err(KeyError::EmptyParamName);
        }
        match previous {
            Some(p) if p == name => return Err(KeyError::DuplicateParam { name: decoded }),
            Some(p) if p > name => return Err(malformed("parameters are not sorted by name")),
            _ => previous = Some(name),
        }
        Param::from_canonical(value)?;
        params.push((decoded, value.to_string()));
    }
    Ok(ParsedKey {
        namespace: namespace.to_string(),
        version,
        entity,
        id,
        params,
    })
}
