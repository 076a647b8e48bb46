//! The hot-key export: a tiny JSON array (`[{"key":"users:1","count":120,"misses":3}]`),
//! written and parsed by hand, so the core stays free of dependencies and `no_std`, and the
//! format is small enough to own. Bad input is an error with its byte offset, never a panic;
//! nothing recurses.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use super::top_k::HotKey;

/// Hot keys as JSON: `[{"key":"...","count":N,"misses":M}, ...]`.
pub(crate) fn to_json(keys: &[HotKey]) -> String {
    let mut out = String::from("[");
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"key\":\"");
        for ch in k.key.chars() {
            match ch {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => {
                    let _ = fmt::Write::write_fmt(&mut out, format_args!("\\u{:04x}", c as u32));
                }
                c => out.push(c),
            }
        }
        let _ = fmt::Write::write_fmt(
            &mut out,
            format_args!("\",\"count\":{},\"misses\":{}}}", k.count, k.misses),
        );
    }
    out.push(']');
    out
}

/// Why an exported hot-key list could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HotKeysJsonError {
    /// Byte offset of the problem.
    pub offset: usize,
    /// What was expected there.
    pub expected: &'static str,
}

impl fmt::Display for HotKeysJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid hot-key JSON at byte {}: expected {}",
            self.offset, self.expected
        )
    }
}

impl core::error::Error for HotKeysJsonError {}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err<T>(&self, expected: &'static str) -> Result<T, HotKeysJsonError> {
        Err(HotKeysJsonError {
            offset: self.i,
            expected,
        })
    }
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, b: u8, expected: &'static str) -> Result<(), HotKeysJsonError> {
        self.ws();
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            Ok(())
        } else {
            self.err(expected)
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }
    fn hex4(&mut self) -> Result<u32, HotKeysJsonError> {
        let digits = self.s.get(self.i..self.i + 4);
        let v = digits
            .and_then(|d| core::str::from_utf8(d).ok())
            .and_then(|d| u32::from_str_radix(d, 16).ok());
        match v {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => self.err("four hex digits"),
        }
    }
    fn string(&mut self) -> Result<String, HotKeysJsonError> {
        self.eat(b'"', "a string")?;
        let mut out = String::new();
        loop {
            let start = self.i;
            while self.i < self.s.len() && !matches!(self.s[self.i], b'"' | b'\\') {
                if self.s[self.i] < 0x20 {
                    return self.err("no control character in a string");
                }
                self.i += 1;
            }
            match core::str::from_utf8(&self.s[start..self.i]) {
                Ok(part) => out.push_str(part),
                Err(_) => return self.err("UTF-8"),
            }
            match self.s.get(self.i) {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = self.s.get(self.i).copied();
                    self.i += 1;
                    let ch = match c {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if self.s.get(self.i..self.i + 2) != Some(b"\\u") {
                                    return self.err("a low surrogate");
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return self.err("a low surrogate");
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            match char::from_u32(code) {
                                Some(c) => c,
                                None => return self.err("a valid \\u escape"),
                            }
                        }
                        _ => {
                            self.i -= 1;
                            return self.err("a valid escape");
                        }
                    };
                    out.push(ch);
                }
                _ => return self.err("a closing quote"),
            }
        }
    }
    fn number(&mut self) -> Result<u64, HotKeysJsonError> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        let digits = core::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        match digits.parse() {
            Ok(n) => Ok(n),
            Err(_) => {
                self.i = start;
                self.err("a non-negative integer")
            }
        }
    }
    fn entry(&mut self) -> Result<HotKey, HotKeysJsonError> {
        self.eat(b'{', "an object")?;
        let (mut key, mut count, mut misses) = (None, None, None);
        loop {
            let at = self.i;
            let field = self.string()?;
            self.eat(b':', "':'")?;
            match field.as_str() {
                "key" if key.is_none() => key = Some(self.string()?),
                "count" if count.is_none() => count = Some(self.number()?),
                "misses" if misses.is_none() => misses = Some(self.number()?),
                _ => {
                    self.i = at;
                    return self.err("one of \"key\", \"count\", \"misses\", once each");
                }
            }
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    break;
                }
                _ => return self.err("',' or '}'"),
            }
        }
        match (key, count) {
            (Some(key), Some(count)) => Ok(HotKey {
                key,
                count,
                misses: misses.unwrap_or(0),
            }),
            _ => self.err("both \"key\" and \"count\""),
        }
    }
}

/// Reads what [`to_json`] wrote.
pub(crate) fn from_json(json: &str) -> Result<Vec<HotKey>, HotKeysJsonError> {
    let mut p = Parser {
        s: json.as_bytes(),
        i: 0,
    };
    p.eat(b'[', "'['")?;
    let mut out = Vec::new();
    if p.peek() == Some(b']') {
        p.i += 1;
    } else {
        loop {
            out.push(p.entry()?);
            match p.peek() {
                Some(b',') => p.i += 1,
                Some(b']') => {
                    p.i += 1;
                    break;
                }
                _ => return p.err("',' or ']'"),
            }
        }
    }
    if p.peek().is_some() {
        return p.err("the end of the input");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_with_escapes() {
        let keys = alloc::vec![
            HotKey {
                key: "a:\"q\"\\\n\u{1}é😀".into(),
                count: 7,
                misses: 2
            },
            HotKey {
                key: "b:1".into(),
                count: 1,
                misses: 0
            },
        ];
        let json = to_json(&keys);
        assert_eq!(from_json(&json).unwrap(), keys);
        assert_eq!(from_json(" [ ] ").unwrap(), Vec::new());
        let k = from_json(r#"[{"count":3,"key":"x\u00e9\ud83d\ude00"}]"#).unwrap();
        assert_eq!(k[0].key, "xé😀");
        for bad in [
            "",
            "[",
            "[{}]",
            "[{\"key\":\"a\"}]",
            "[{\"key\":\"a\",\"count\":-1}]",
            "[{\"key\":\"a\",\"count\":1,\"x\":1}]",
            "[{\"key\":\"a\",\"count\":1}] x",
            "[{\"key\":\"a\\q\",\"count\":1}]",
        ] {
            assert!(from_json(bad).is_err(), "{bad}");
        }
    }
}
