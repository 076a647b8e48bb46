//! The typed values of a key (ids and parameter values) and their canonical text.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;

use super::error::{KeyError, MAX_DEPTH, MAX_VALUES};
use super::escape::{escape_into, malformed, unescape};

/// A value in a key: an id or a parameter value. Values are typed (see the
/// [key format](crate::key)).
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

    /// Decodes a value's canonical text (as found in a [`ParsedKey`](crate::key::ParsedKey)). This is the inverse of
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
