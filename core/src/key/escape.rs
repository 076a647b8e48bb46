//! Percent-escaping of the reserved characters inside a key's strings, and its canonical
//! inverse.

use alloc::string::{String, ToString};
use core::fmt::Write as _;

use super::error::KeyError;

/// Whether `c` must be percent-encoded inside a component.
pub(crate) fn is_reserved(c: char) -> bool {
    matches!(c, '%' | ':' | '?' | '&' | '=' | ',' | '#' | '[' | ']' | ' ') || c.is_ascii_control()
}

pub(crate) fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        if is_reserved(c) {
            let _ = write!(out, "%{:02X}", u32::from(c));
        } else {
            out.push(c);
        }
    }
}

pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

pub(crate) fn malformed(reason: &'static str) -> KeyError {
    KeyError::Malformed { reason }
}

/// Percent-decodes `text` leniently; callers check canonicity by re-encoding.
pub(crate) fn unescape(text: &str) -> Result<String, KeyError> {
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
pub(crate) fn decode_str(text: &str) -> Result<String, KeyError> {
    let s = unescape(text)?;
    if escape(&s) == text {
        Ok(s)
    } else {
        Err(malformed("string is not escaped canonically"))
    }
}

/// A namespace is non-empty and holds no reserved character, so it is written raw.
pub(crate) fn check_namespace(namespace: &str) -> Result<(), KeyError> {
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
