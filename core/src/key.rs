//! Canonical, injective cache keys: the same logical request always builds the same key, and
//! different requests never share one.
//!
//! [`KeyBuilder`] turns a logical request into one string. The same logical request always
//! gives the same key, and two different requests never give the same key. [`parse`] is the
//! inverse of [`KeyBuilder::build`]. It accepts only canonical keys, so if `parse(k)` succeeds,
//! `k` is exactly the key some builder produces.
//!
//! # Format (wire protocol; the Python and Node bindings mirror it byte for byte)
//!
//! ```text
//! {namespace}:v{version}:{entity}[:{id}][?{name}={value}&{name}={value}...]
//! ```
//!
//! * `namespace`: required and non-empty, written raw. It may not contain a reserved character
//!   (see below), so the text before the first `:` ([`namespace_of`]) is exactly the namespace
//!   that was given, and the engine uses that text for `bump(namespace)` and for metrics.
//! * `version`: the schema version of the cached representation, in decimal with no leading
//!   zeros. The default is `1`.
//! * `entity`: a required, non-empty string, escaped.
//! * `id`: an optional value. If there is no id, the key has no third `:` (a listing page is
//!   `shop:v1:products?page=#2`). An id that is the empty string gives a trailing `:`.
//! * parameters: when there is at least one, `?` comes next, then `name=value` pairs joined by
//!   `&`. The pairs are sorted by escaped name in byte order. Names are non-empty and unique.
//!   An empty string value (`?q=`) is different from leaving the parameter out.
//!
//! ## Escaping
//!
//! The reserved characters are `%` `:` `?` `&` `=` `,` `#` `[` `]`, space, and the ASCII
//! control characters (U+0000 to U+001F and U+007F). Inside every string (entity, parameter
//! name, string value), each reserved character is written as `%XX`, where `XX` is the two-digit
//! uppercase hex of its byte. Every other character, non-ASCII included, is written raw as UTF-8.
//!
//! ## Values (typed: the integer `1`, the float `1.0` and the string `"1"` are three keys)
//!
//! | type | canonical text | examples |
//! |------|----------------|----------|
//! | string | the escaped text, untagged | `en`, `a%3Ab`, nothing (empty) |
//! | integer, any width | `#`, then decimal with no `+` and no leading zeros | `#42`, `#-7` |
//! | float | `#`, then the shortest round-trip scientific form (Rust `{:e}`) | `#1e0`, `#-2.5e-3` |
//! | bool / null | `#true`, `#false` / `#null` | |
//! | list (a set) | `#[`, elements sorted (byte order), deduplicated, `,`-joined, `]` | `#[#1,a]` |
//!
//! "Byte order" is the order of the UTF-8 bytes (not UTF-16 code units). Strings are compared
//! exactly as given: no Unicode normalisation, no case folding, no trimming.
//!
//! Strings escape `#`, so a value is typed exactly when it starts with `#`. A float is written as
//! the shortest decimal that round-trips: an optional `-`, one digit (non-zero unless the value
//! is 0), then `.` and the remaining digits if there are any (no trailing zeros), then `e` and
//! the exponent in decimal with no `+` and no leading zeros. So `1234.5` is `#1.2345e3`, which is
//! JavaScript's `toExponential()` without the `+`. `-0.0` is written as `0e0`. NaN and the
//! infinities are rejected. `#[]` is the empty list. A list whose only element is the empty
//! string is written `#[,]`, to tell it apart from the empty list. Lists nest up to 32 deep.
//!
//! ```
//! use herdless::key::{parse, KeyBuilder};
//!
//! let key = KeyBuilder::new("shop").entity("products").param("page", 2).build().unwrap();
//! assert_eq!(key, "shop:v1:products?page=#2");
//! let parsed = parse(&key).unwrap();
//! assert_eq!((parsed.entity.as_str(), parsed.id), ("products", None));
//! ```

use alloc::borrow::Cow;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write as _};

/// How deeply lists may nest in a key, both when building and when parsing. A binding that
/// turns its language's values into [`Param`]s checks the depth before it descends, so a
/// hostile nesting (or a cycle) fails cleanly instead of overflowing the stack.
pub const MAX_DEPTH: usize = 32;

/// The most values one key value may hold, counting every list item at every depth. A
/// binding counts while it converts, so lists that share sub-lists (`a = [b, b]`,
/// `b = [c, c]`, ...) cannot make it build an exponentially large value.
pub const MAX_VALUES: usize = 65_536;

/// Whether `c` must be percent-encoded inside a component.
fn is_reserved(c: char) -> bool {
    matches!(c, '%' | ':' | '?' | '&' | '=' | ',' | '#' | '[' | ']' | ' ') || c.is_ascii_control()
}

fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        if is_reserved(c) {
            let _ = write!(out, "%{:02X}", u32::from(c));
        } else {
            out.push(c);
        }
    }
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

fn malformed(reason: &'static str) -> KeyError {
    KeyError::Malformed { reason }
}

/// Percent-decodes `text` leniently; callers check canonicity by re-encoding.
fn unescape(text: &str) -> Result<String, KeyError> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let hi = chars.next().and_then(|c| c.to_digit(16));
        let lo = chars.next().and_then(|c| c.to_digit(16));
        match (hi, lo) {
            (Some(h), Some(l)) if h < 8 => out.extend(char::from_u32(h * 16 + l)),
            _ => return Err(malformed("bad percent escape")),
        }
    }
    Ok(out)
}

/// Decodes an escaped string component, accepting only its canonical spelling.
fn decode_str(text: &str) -> Result<String, KeyError> {
    let s = unescape(text)?;
    if escape(&s) == text {
        Ok(s)
    } else {
        Err(malformed("string is not escaped canonically"))
    }
}

/// A value in a key: an id or a parameter value. Values are typed (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq)]
pub enum Param<'a> {
    /// A string, written escaped and untagged.
    Str(Cow<'a, str>),
    /// An integer of any width, written `#` then decimal.
    Int(i128),
    /// A finite float, written `#` then its shortest round-trip scientific form.
    Float(f64),
    /// A boolean, written `#true` or `#false`.
    Bool(bool),
    /// An unordered set: elements are sorted canonically and deduplicated.
    List(Vec<Param<'a>>),
    /// An explicit null (also what `None` converts to), written `#null`.
    Null,
}

impl Param<'_> {
    /// The canonical text of this value, as it appears in a key.
    ///
    /// Fails with [`KeyError::InvalidFloat`] for a NaN or infinite float, with
    /// [`KeyError::TooDeep`] for lists nested more than [`MAX_DEPTH`] deep, and with
    /// [`KeyError::TooManyValues`] past [`MAX_VALUES`] values.
    pub fn to_canonical(&self) -> Result<String, KeyError> {
        let mut out = String::new();
        let mut left = MAX_VALUES;
        self.encode_into(&mut out, 0, &mut left)?;
        Ok(out)
    }

    fn encode_into(
        &self,
        out: &mut String,
        depth: usize,
        left: &mut usize,
    ) -> Result<(), KeyError> {
        *left = left.checked_sub(1).ok_or(KeyError::TooManyValues)?;
        match self {
            Param::Str(s) => escape_into(out, s),
            Param::Int(i) => {
                let _ = write!(out, "#{i}");
            }
            Param::Float(f) if !f.is_finite() => return Err(KeyError::InvalidFloat),
            Param::Float(f) => {
                let f = if *f == 0.0 { 0.0 } else { *f };
                let _ = write!(out, "#{f:e}");
            }
            Param::Bool(b) => out.push_str(if *b { "#true" } else { "#false" }),
            Param::Null => out.push_str("#null"),
            Param::List(_) if depth >= MAX_DEPTH => return Err(KeyError::TooDeep),
            Param::List(items) => {
                let mut texts = Vec::with_capacity(items.len());
                for item in items {
                    let mut text = String::new();
                    item.encode_into(&mut text, depth + 1, left)?;
                    texts.push(text);
                }
                texts.sort_unstable();
                texts.dedup();
                out.push_str("#[");
                if texts.len() == 1 && texts[0].is_empty() {
                    out.push(',');
                }
                out.push_str(&texts.join(","));
                out.push(']');
            }
        }
        Ok(())
    }

    /// Decodes a value's canonical text (as found in [`ParsedKey`]). This is the inverse of
    /// [`Param::to_canonical`]. Text that is not canonical is rejected, e.g. `#01` or `%3a`.
    pub fn from_canonical(text: &str) -> Result<Param<'static>, KeyError> {
        let value = decode_value(text, 0)?;
        if value.to_canonical()? == text {
            Ok(value)
        } else {
            Err(malformed("value is not in canonical form"))
        }
    }
}

/// Decodes a value leniently. [`Param::from_canonical`] checks that it is canonical.
fn decode_value(text: &str, depth: usize) -> Result<Param<'static>, KeyError> {
    let Some(rest) = text.strip_prefix('#') else {
        return Ok(Param::Str(Cow::Owned(unescape(text)?)));
    };
    Ok(match rest {
        "null" => Param::Null,
        "true" => Param::Bool(true),
        "false" => Param::Bool(false),
        _ if rest.starts_with('[') => {
            let inner = rest[1..]
                .strip_suffix(']')
                .ok_or(malformed("unterminated list"))?;
            if depth >= MAX_DEPTH {
                return Err(KeyError::TooDeep);
            }
            let mut items = Vec::new();
            if inner == "," {
                items.push(Param::Str(Cow::Borrowed("")));
            } else if !inner.is_empty() {
                let (mut level, mut start) = (0usize, 0);
                for (i, b) in inner.bytes().enumerate() {
                    match b {
                        b'[' => level += 1,
                        b']' => level = level.checked_sub(1).ok_or(malformed("unbalanced list"))?,
                        b',' if level == 0 => {
                            items.push(decode_value(&inner[start..i], depth + 1)?);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                items.push(decode_value(&inner[start..], depth + 1)?);
            }
            Param::List(items)
        }
        _ if rest.contains('e') => Param::Float(rest.parse().map_err(|_| malformed("bad float"))?),
        _ => Param::Int(rest.parse().map_err(|_| malformed("bad integer"))?),
    })
}

macro_rules! param_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Param<'_> {
            fn from(v: $t) -> Self {
                // Lossless: every listed type fits in an i128.
                Param::Int(v as i128)
            }
        }
    )*};
}
param_from_int!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, usize);

impl<'a> From<&'a str> for Param<'a> {
    fn from(v: &'a str) -> Self {
        Param::Str(Cow::Borrowed(v))
    }
}
impl<'a> From<&'a String> for Param<'a> {
    fn from(v: &'a String) -> Self {
        Param::Str(Cow::Borrowed(v))
    }
}
impl From<String> for Param<'_> {
    fn from(v: String) -> Self {
        Param::Str(Cow::Owned(v))
    }
}
impl<'a> From<Cow<'a, str>> for Param<'a> {
    fn from(v: Cow<'a, str>) -> Self {
        Param::Str(v)
    }
}
impl From<bool> for Param<'_> {
    fn from(v: bool) -> Self {
        Param::Bool(v)
    }
}
impl From<f64> for Param<'_> {
    fn from(v: f64) -> Self {
        Param::Float(v)
    }
}
/// Widened exactly to `f64`: `0.1f32` keys as `#1.0000000149011612e-1`.
impl From<f32> for Param<'_> {
    fn from(v: f32) -> Self {
        Param::Float(f64::from(v))
    }
}
/// `None` is [`Param::Null`].
impl<'a, T: Into<Param<'a>>> From<Option<T>> for Param<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Param::Null, Into::into)
    }
}
impl<'a, T: Into<Param<'a>>> From<Vec<T>> for Param<'a> {
    fn from(v: Vec<T>) -> Self {
        Param::List(v.into_iter().map(Into::into).collect())
    }
}
impl<'a, T: Into<Param<'a>>, const N: usize> From<[T; N]> for Param<'a> {
    fn from(v: [T; N]) -> Self {
        Param::List(v.into_iter().map(Into::into).collect())
    }
}
impl<'a, T: Clone + Into<Param<'a>>> From<&'a [T]> for Param<'a> {
    fn from(v: &'a [T]) -> Self {
        Param::List(v.iter().cloned().map(Into::into).collect())
    }
}

/// Why a key could not be built or parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The namespace is empty.
    EmptyNamespace,
    /// The namespace contains a reserved character (`:`, `%`, space, ...).
    InvalidNamespace {
        /// The namespace as given.
        namespace: String,
    },
    /// The entity was not set, or is empty.
    EmptyEntity,
    /// A parameter has an empty name.
    EmptyParamName,
    /// Two parameters have the same name.
    DuplicateParam {
        /// The repeated name.
        name: String,
    },
    /// A float is NaN or infinite.
    InvalidFloat,
    /// Lists are nested more than [`MAX_DEPTH`] deep.
    TooDeep,
    /// A key value holds more than [`MAX_VALUES`] values.
    TooManyValues,
    /// [`parse`] was given text that is not a canonical key.
    Malformed {
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::EmptyNamespace => f.write_str("cache key namespace is empty"),
            KeyError::InvalidNamespace { namespace } => write!(
                f,
                "cache key namespace {namespace:?} contains a reserved character"
            ),
            KeyError::EmptyEntity => f.write_str("cache key entity is missing or empty"),
            KeyError::EmptyParamName => f.write_str("cache key parameter has an empty name"),
            KeyError::DuplicateParam { name } => {
                write!(f, "cache key parameter {name:?} is given more than once")
            }
            KeyError::InvalidFloat => f.write_str("cache key value is a NaN or infinite float"),
            KeyError::TooDeep => write!(f, "cache key lists are nested more than {MAX_DEPTH} deep"),
            KeyError::TooManyValues => {
                write!(f, "a cache key value holds more than {MAX_VALUES} values")
            }
            KeyError::Malformed { reason } => write!(f, "malformed cache key: {reason}"),
        }
    }
}

impl core::error::Error for KeyError {}

/// Builds canonical keys (see the [module docs](self) for the format).
///
/// Setters can be chained in any order. Calling `version`, `entity` or `id` again replaces the
/// earlier value. Errors (a bad float, a duplicate parameter, ...) are reported by
/// [`build`](Self::build).
///
/// ```
/// use herdless::key::{KeyBuilder, Param};
///
/// let key = KeyBuilder::new("users")
///     .version(2)
///     .entity("profile")
///     .id(42)
///     .param("lang", "en")
///     .param("fields", ["name", "email"])
///     .param("team", Param::Null)
///     .build()
///     .unwrap();
/// assert_eq!(key, "users:v2:profile:#42?fields=#[email,name]&lang=en&team=#null");
/// assert_eq!(herdless::key::namespace_of(&key), "users");
/// ```
#[derive(Clone, Debug)]
pub struct KeyBuilder {
    namespace: String,
    version: u32,
    entity: String,
    /// Canonical text of the id.
    id: Option<String>,
    /// Raw name and canonical text of the value.
    params: Vec<(String, String)>,
    /// The first error met by a setter.
    error: Option<KeyError>,
}

impl KeyBuilder {
    /// Starts a key in `namespace`, with schema version 1. The namespace must be non-empty and
    /// must contain no reserved character. Otherwise [`build`](Self::build) fails.
    pub fn new(namespace: &str) -> Self {
        KeyBuilder {
            namespace: namespace.to_string(),
            version: 1,
            entity: String::new(),
            id: None,
            params: Vec::new(),
            error: None,
        }
    }

    /// Sets the schema version of the cached representation. Bump it when the cached format
    /// changes, so that old entries are never read.
    pub fn version(mut self, v: u32) -> Self {
        self.version = v;
        self
    }

    /// Sets the entity (required, non-empty), e.g. `"user"`.
    pub fn entity(mut self, entity: &str) -> Self {
        self.entity = entity.to_string();
        self
    }

    /// Sets the id (optional). A key with no id is different from every key with an id.
    pub fn id<'a>(mut self, id: impl Into<Param<'a>>) -> Self {
        match id.into().to_canonical() {
            Ok(text) => self.id = Some(text),
            Err(e) => self.fail(e),
        }
        self
    }

    /// Adds the parameter `name` (non-empty, unique). The order of calls does not matter.
    pub fn param<'a>(mut self, name: &str, value: impl Into<Param<'a>>) -> Self {
        if name.is_empty() {
            self.fail(KeyError::EmptyParamName);
        }
        match value.into().to_canonical() {
            Ok(text) => self.params.push((name.to_string(), text)),
            Err(e) => self.fail(e),
        }
        self
    }

    fn fail(&mut self, e: KeyError) {
        self.error.get_or_insert(e);
    }

    /// The canonical key, or the first problem found.
    pub fn build(&self) -> Result<String, KeyError> {
        check_namespace(&self.namespace)?;
        if self.entity.is_empty() {
            return Err(KeyError::EmptyEntity);
        }
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let mut params = self.params.clone();
        params.sort_by_cached_key(|(name, _)| escape(name));
        if let Some(w) = params.windows(2).find(|w| w[0].0 == w[1].0) {
            let name = w[0].0.clone();
            return Err(KeyError::DuplicateParam { name });
        }
        let (namespace, entity) = (self.namespace.clone(), self.entity.clone());
        let (version, id) = (self.version, self.id.clone());
        Ok(ParsedKey {
            namespace,
            version,
            entity,
            id,
            params,
        }
        .to_key())
    }
}

fn check_namespace(namespace: &str) -> Result<(), KeyError> {
    if namespace.is_empty() {
        Err(KeyError::EmptyNamespace)
    } else if namespace.chars().any(is_reserved) {
        Err(KeyError::InvalidNamespace {
            namespace: namespace.to_string(),
        })
    } else {
        Ok(())
    }
}

/// The namespace of `key`: the text before the first `:`, or the whole key if it has no `:`.
///
/// This is what the engine reads for `bump(namespace)` epochs and per-namespace metrics. For a
/// key made by [`KeyBuilder`], it is exactly the namespace the builder was given.
pub fn namespace_of(key: &str) -> &str {
    key.split_once(':').map_or(key, |(namespace, _)| namespace)
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
    /// The id's canonical text (decode it with [`Param::from_canonical`]), if the key has one.
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

/// Splits a key made by [`KeyBuilder::build`] back into its parts. This is the inverse of
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

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::{BTreeMap, BTreeSet};
    use alloc::vec;

    fn kb() -> KeyBuilder {
        KeyBuilder::new("ns").entity("e")
    }

    fn id_key<'a>(p: impl Into<Param<'a>>) -> String {
        kb().id(p).build().unwrap()
    }

    #[test]
    fn format_and_param_order() {
        let a = kb()
            .id("x")
            .param("b", 2)
            .param("a", true)
            .param("c", "")
            .build()
            .unwrap();
        let b = kb()
            .param("c", "")
            .param("a", true)
            .id("x")
            .param("b", 2)
            .build()
            .unwrap();
        assert_eq!(a, "ns:v1:e:x?a=#true&b=#2&c=");
        assert_eq!(a, b);
        assert_ne!(
            a,
            kb().id("x").param("a", true).param("b", 2).build().unwrap()
        );
        assert_eq!(kb().version(7).build().unwrap(), "ns:v7:e");
        assert_eq!(id_key(""), "ns:v1:e:");
        assert_eq!(namespace_of("ns:v1:e"), "ns");
        assert_eq!(namespace_of("plain"), "plain");
    }

    #[test]
    fn values_are_normalised_and_typed() {
        assert_eq!(id_key(1u8), id_key(1i128));
        assert_eq!(id_key(1usize), "ns:v1:e:#1");
        assert_eq!(id_key(-0.0), id_key(0.0));
        assert_eq!(id_key(1.5), "ns:v1:e:#1.5e0");
        assert_eq!(id_key(None::<i32>), id_key(Param::Null));
        let typed = [
            id_key(1),
            id_key("1"),
            id_key("01"),
            id_key(1.0),
            id_key(true),
            id_key("#1"),
        ];
        assert_eq!(typed.iter().collect::<BTreeSet<_>>().len(), typed.len());
        for bad in "#01 #+1 #-0 #1E0 #1.0e0 #1e+0 %3a %41 #nan #[b,a] #[a,a] #[,,] #[".split(' ') {
            assert!(Param::from_canonical(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lists_are_sets() {
        assert_eq!(id_key(vec![3, 1, 2, 3]), id_key([1, 2, 3]));
        assert_eq!(id_key(&["b", "a"][..]), "ns:v1:e:#[a,b]");
        assert_eq!(id_key(Vec::<i32>::new()), "ns:v1:e:#[]");
        assert_eq!(id_key([""]), "ns:v1:e:#[,]");
        assert_eq!(id_key(["", "a"]), "ns:v1:e:#[,a]");
        assert_ne!(id_key(["a,b"]), id_key(["a", "b"]));
        assert_ne!(id_key([vec!["a", "b"]]), id_key(["a", "b"]));
        let mut deep = Param::List(vec![]);
        for _ in 0..MAX_DEPTH {
            deep = Param::List(vec![deep]);
        }
        assert_eq!(kb().id(deep).build(), Err(KeyError::TooDeep));
        let wide = Param::List((0..MAX_VALUES as i64).map(Param::from).collect());
        assert_eq!(kb().id(wide).build(), Err(KeyError::TooManyValues));
        let fits = Param::List((0..MAX_VALUES as i64 - 1).map(Param::from).collect());
        assert!(kb().id(fits).build().is_ok());
    }

    #[test]
    fn separators_cannot_forge() {
        let k = |e: &str, id: &str| KeyBuilder::new("n").entity(e).id(id).build().unwrap();
        assert_ne!(k("a:b", "c"), k("a", "b:c"));
        assert_eq!(k("a:b", "c"), "n:v1:a%3Ab:c");
        let one = kb().param("q", "x&y=z").build().unwrap();
        assert_ne!(one, kb().param("q", "x").param("y", "z").build().unwrap());
        assert_eq!(one, "ns:v1:e?q=x%26y%3Dz");
        assert_ne!(
            kb().param("a=b", "c").build(),
            kb().param("a", "b=c").build()
        );
        assert_ne!(
            id_key("a?b=c"),
            kb().id("a").param("b", "c").build().unwrap()
        );
    }

    #[test]
    fn errors() {
        let dup = kb().param("a", 1).param("b", 2).param("a", 1).build();
        assert_eq!(dup, Err(KeyError::DuplicateParam { name: "a".into() }));
        assert_eq!(
            KeyBuilder::new("").entity("e").build(),
            Err(KeyError::EmptyNamespace)
        );
        assert!(matches!(
            KeyBuilder::new("a:b").entity("e").build(),
            Err(KeyError::InvalidNamespace { .. })
        ));
        assert_eq!(KeyBuilder::new("ns").build(), Err(KeyError::EmptyEntity));
        assert_eq!(kb().param("", 1).build(), Err(KeyError::EmptyParamName));
        assert_eq!(kb().id(f64::NAN).build(), Err(KeyError::InvalidFloat));
        assert_eq!(
            kb().param("x", [f64::INFINITY]).build(),
            Err(KeyError::InvalidFloat)
        );
        let bad = "ns ns:v1 ns:1:e ns:v01:e ns:v1: ns:v1:e:a:b ns:v1:e? ns:v1:e?b=1&a=1 \
            ns:v1:e?a=1&a=1 ns:v1:e?a ns:v1:e?=x ns:v1:e?a=b=c ns:v1:e%3a n%41:v1:e";
        for key in bad.split_whitespace().chain([""]) {
            assert!(parse(key).is_err(), "{key}");
        }
    }

    #[test]
    fn parse_round_trips() {
        let builders = [
            kb(),
            KeyBuilder::new("ünï")
                .version(0)
                .entity("ç:%")
                .id("日本 語")
                .param("ß", "🦀"),
            kb().version(u32::MAX)
                .id(i128::MIN)
                .param("f", -1e-300)
                .param("n", Param::Null),
            kb().id(vec![
                Param::from("a"),
                1.into(),
                2.5.into(),
                vec![""].into(),
            ])
            .param("s", " "),
            kb().id(u64::MAX)
                .param("\u{0}\n\u{7f}", "[#],=&?")
                .param("e", ""),
        ];
        for b in builders {
            let key = b.build().unwrap();
            let parsed = parse(&key).unwrap();
            assert_eq!(parsed.to_key(), key);
            assert_eq!(parsed.namespace, namespace_of(&key));
            if let Some(id) = &parsed.id {
                assert_eq!(
                    &Param::from_canonical(id).unwrap().to_canonical().unwrap(),
                    id
                );
            }
        }
        let p = parse("ünï:v0:ç%3A%25:日本%20語?ß=🦀").unwrap();
        assert_eq!(
            (p.entity.as_str(), p.id.as_deref()),
            ("ç:%", Some("日本%20語"))
        );
        assert_eq!(p.params, vec![("ß".into(), "🦀".into())]);
    }

    /// A logical value, compared independently of the encoding.
    #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
    enum L {
        Str(String),
        Int(i128),
        Float(u64),
        Bool(bool),
        Null,
        List(BTreeSet<L>),
    }

    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }

        fn string(&mut self) -> String {
            const PIECES: &[&str] = &[
                "a", "b", ":", "?", "&", "=", "%", "%3A", ",", "#", "[", "]", " ", "\n", "é", "🦀",
            ];
            (0..self.below(4))
                .map(|_| PIECES[self.below(PIECES.len())])
                .collect()
        }

        fn value(&mut self, depth: usize) -> (Param<'static>, L) {
            const FLOATS: [f64; 6] = [0.0, -0.0, 1.0, -2.5, 1e300, 5e-324];
            match self.below(if depth < 2 { 7 } else { 6 }) {
                0 | 1 => {
                    let s = self.string();
                    (s.clone().into(), L::Str(s))
                }
                2 => {
                    let i = self.below(21) as i128 - 10;
                    (i.into(), L::Int(i))
                }
                3 => {
                    let f = FLOATS[self.below(FLOATS.len())];
                    (f.into(), L::Float(if f == 0.0 { 0 } else { f.to_bits() }))
                }
                4 => {
                    let b = self.below(2) == 0;
                    (b.into(), L::Bool(b))
                }
                5 => (Param::Null, L::Null),
                _ => {
                    let items: Vec<_> = (0..self.below(4)).map(|_| self.value(depth + 1)).collect();
                    let set = items.iter().map(|(_, l)| l.clone()).collect();
                    (
                        Param::List(items.into_iter().map(|(p, _)| p).collect()),
                        L::List(set),
                    )
                }
            }
        }
    }

    type Logical = (u32, String, Option<L>, BTreeMap<String, L>);

    #[test]
    fn random_injectivity() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut by_key: BTreeMap<String, Logical> = BTreeMap::new();
        let mut by_logical: BTreeMap<Logical, String> = BTreeMap::new();
        for _ in 0..5000 {
            let (version, entity) = (rng.below(2) as u32, rng.string());
            let mut b = KeyBuilder::new("ns").version(version).entity(&entity);
            let mut id = None;
            if rng.below(3) != 0 {
                let (p, l) = rng.value(0);
                (b, id) = (b.id(p), Some(l));
            }
            let (mut params, mut duplicate, mut empty_name) = (BTreeMap::new(), false, false);
            for _ in 0..rng.below(4) {
                let (name, (p, l)) = (rng.string(), rng.value(0));
                b = b.param(&name, p);
                empty_name |= name.is_empty();
                duplicate |= params.insert(name, l).is_some();
            }
            let key = match b.build() {
                Ok(key) => key,
                Err(KeyError::EmptyEntity) if entity.is_empty() => continue,
                Err(KeyError::EmptyParamName) if empty_name => continue,
                Err(KeyError::DuplicateParam { .. }) if duplicate => continue,
                Err(e) => panic!("unexpected {e:?}"),
            };
            let parsed = parse(&key).unwrap();
            assert_eq!(parsed.to_key(), key);
            assert_eq!((parsed.version, &parsed.entity), (version, &entity));
            let names: BTreeSet<_> = parsed.params.iter().map(|(n, _)| n).collect();
            assert_eq!(names, params.keys().collect());
            assert_eq!(parsed.params.len(), params.len());
            let logical = (version, entity, id, params);
            assert_eq!(
                by_key.entry(key.clone()).or_insert_with(|| logical.clone()),
                &logical
            );
            assert_eq!(by_logical.entry(logical).or_insert(key.clone()), &key);
        }
        assert!(by_key.len() > 2000, "only {} distinct keys", by_key.len());
    }
}
