//! A response as the cache keeps it ([`CachedResponse`]), and what may be kept for others
//! ([`Policy`]).

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName};
use http::{Response, StatusCode};

/// A response kept in the cache: its status, the headers that belong to it (never
/// `Set-Cookie`, never hop-by-hop ones), and its whole body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedResponse {
    /// The status.
    pub status: StatusCode,
    /// The headers kept with it.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// What a [`CacheLayer`](super::CacheLayer) keeps for other callers, and how it names
/// requests.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The namespace of its keys (default `http`): one namespace for every route, so
    /// request input never makes namespaces.
    pub namespace: Option<String>,
    /// Request headers the answer depends on: their values are part of the key, and a
    /// response may `Vary` on them (default: `Accept-Encoding`). A response that varies on
    /// another header (or on `*`) is not kept.
    pub vary: Vec<HeaderName>,
    /// Statuses kept (default: 2xx). Any other answers its own caller only.
    pub statuses: fn(StatusCode) -> bool,
    /// The largest body kept, in bytes (default 1 MiB): a longer one answers its own
    /// caller only, streamed.
    pub max_body: usize,
    /// Whether requests with a `Cookie` header are answered from the cache too (default
    /// false: they pass through, since their answer may be the user's own). Requests with
    /// `Authorization` always pass through.
    pub with_cookies: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            namespace: None,
            vary: vec![header::ACCEPT_ENCODING],
            statuses: |s| s.is_success(),
            max_body: 1 << 20,
            with_cookies: false,
        }
    }
}

/// Headers that describe one connection, not the response.
const HOP_BY_HOP: [HeaderName; 6] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    header::PROXY_AUTHENTICATE,
];

impl Policy {
    /// Whether the response whose head is `parts` may be kept for other callers, and for
    /// how long (`Some(None)`: the cache's ttl; `Some(Some(d))`: its `s-maxage` /
    /// `max-age`): never with `Set-Cookie`, `Cache-Control: private / no-store / no-cache`,
    /// a zero max-age, a status the policy does not keep, or a `Vary` on what the key does
    /// not hold.
    pub fn keeps(&self, parts: &http::response::Parts) -> Option<Option<Duration>> {
        // A header that is not text cannot be read, so what it says is not known: not kept.
        let mut headers = Vec::with_capacity(parts.headers.len());
        for (name, value) in &parts.headers {
            headers.push((name.as_str(), value.to_str().ok()?));
        }
        let vary: Vec<&str> = self.vary.iter().map(HeaderName::as_str).collect();
        super::keeps((self.statuses)(parts.status), headers, &vary, false)
    }
}

impl CachedResponse {
    /// The response of `parts` and `body`, with the headers that belong to it.
    pub fn new(parts: &http::response::Parts, body: Bytes) -> Self {
        let mut headers = parts.headers.clone();
        for h in HOP_BY_HOP.iter().chain([&header::SET_COOKIE]) {
            headers.remove(h);
        }
        Self {
            status: parts.status,
            headers,
            body,
        }
    }

    /// The response to send (`head`: without its body).
    pub fn to_response(&self, head: bool) -> Response<Bytes> {
        let mut r = Response::new(if head {
            Bytes::new()
        } else {
            self.body.clone()
        });
        *r.status_mut() = self.status;
        *r.headers_mut() = self.headers.clone();
        r
    }
}
