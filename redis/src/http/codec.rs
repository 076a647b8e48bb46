//! [`ResponseCodec`]: a kept response's bytes in the shared tier.

use bytes::Bytes;
use http::StatusCode;
use http::header::{HeaderMap, HeaderName, HeaderValue};

use super::response::CachedResponse;
use super::store::Cached;
use crate::codec::{Codec, CodecError};

/// A [`Cached`] response's bytes in the shared tier: the status (2 bytes, big-endian), the
/// number of headers (4), each header's name and value (4-byte length, then the bytes),
/// then the body.
#[derive(Clone, Copy, Debug, Default)]
pub struct ResponseCodec;

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// Reads a length-prefixed field at `*at`.
fn take<'a>(b: &'a [u8], at: &mut usize) -> Result<&'a [u8], CodecError> {
    let short = || CodecError::new("a cached response cut short");
    let len = b.get(*at..*at + 4).ok_or_else(short)?;
    let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
    let field = b.get(*at + 4..(*at + 4).checked_add(len).ok_or_else(short)?);
    *at += 4 + len;
    field.ok_or_else(short)
}

impl Codec<Cached> for ResponseCodec {
    fn encode(&self, c: &Cached) -> Result<Vec<u8>, CodecError> {
        let Cached::Response(r) = c else {
            // Never stored ("no cache"): a private answer is its caller's alone.
            return Err(CodecError::new("a private response is never shared"));
        };
        let mut out = Vec::with_capacity(r.body.len() + 64);
        out.extend_from_slice(&r.status.as_u16().to_be_bytes());
        out.extend_from_slice(&(r.headers.len() as u32).to_be_bytes());
        for (name, value) in &r.headers {
            put(&mut out, name.as_str().as_bytes());
            put(&mut out, value.as_bytes());
        }
        out.extend_from_slice(&r.body);
        Ok(out)
    }

    fn decode(&self, b: &[u8]) -> Result<Cached, CodecError> {
        let bad = |e: &dyn std::fmt::Display| CodecError::new(format!("a cached response: {e}"));
        let head = b.get(..6).ok_or_else(|| bad(&"cut short"))?;
        let status =
            StatusCode::from_u16(u16::from_be_bytes([head[0], head[1]])).map_err(|e| bad(&e))?;
        let n = u32::from_be_bytes(head[2..6].try_into().expect("4 bytes")) as usize;
        // Each header takes at least 8 bytes: a count beyond that is not a response.
        if n > b.len() / 8 {
            return Err(bad(&"too many headers"));
        }
        let (mut at, mut headers) = (6, HeaderMap::with_capacity(n));
        for _ in 0..n {
            let name = HeaderName::from_bytes(take(b, &mut at)?).map_err(|e| bad(&e))?;
            let value = HeaderValue::from_bytes(take(b, &mut at)?).map_err(|e| bad(&e))?;
            headers.append(name, value);
        }
        let body = Bytes::copy_from_slice(b.get(at..).unwrap_or_default());
        Ok(Cached::Response(CachedResponse {
            status,
            headers,
            body,
        }))
    }
}
