//! The engine's HTTP rules for Node's web integrations (`herdless/express`,
//! `herdless/fastify`, the NestJS interceptor): the canonical query of a request key and
//! which replies may answer other callers, both decided in `herdless_redis::http`, so Node,
//! Python's Flask helper and Rust's tower layer keep and name responses alike.

use napi_derive::napi;

/// What `httpKeeps` decided about a reply.
#[napi(object)]
pub struct HttpKeep {
    /// Whether the reply may answer other callers.
    pub keep: bool,
    /// Its own lifetime in milliseconds (`s-maxage`, else `max-age`), if it says one and
    /// may be kept; otherwise absent (the cache's ttl applies).
    pub ttl_ms: Option<f64>,
}

/// `httpCanonicalQuery(query)`: a query's pairs (without the `?`) decoded, sorted by name
/// then value and encoded again; `sha256-<base64url>` past 256 bytes. The id part of a
/// request key (`herdless_redis::http::canonical_query`).
#[napi]
pub fn http_canonical_query(query: String) -> String {
    herdless_redis::http::canonical_query(&query)
}

/// `httpKeeps(statusKept, headers, vary, keepPrivate?)`: whether a reply may answer other
/// callers (`herdless_redis::http::keeps`). Not kept: `Set-Cookie`, `Cache-Control:
/// no-store / no-cache`, `private` unless `keepPrivate`, a zero max-age, a status the
/// integration does not keep (`statusKept: false`), a `Vary` on `*` or on a request header
/// that is not in `vary` (the headers whose values the key holds). `headers`: the reply's
/// `[name, value]` pairs (an array value is one pair per element).
#[napi(
    ts_args_type = "statusKept: boolean, headers: Array<[string, string]>, vary: string[], keepPrivate?: boolean"
)]
pub fn http_keeps(
    status_kept: bool,
    headers: Vec<Vec<String>>,
    vary: Vec<String>,
    keep_private: Option<bool>,
) -> HttpKeep {
    let pairs = headers.iter().map(|h| {
        (
            h.first().map_or("", String::as_str),
            h.get(1).map_or("", String::as_str),
        )
    });
    let vary: Vec<&str> = vary.iter().map(String::as_str).collect();
    match herdless_redis::http::keeps(status_kept, pairs, &vary, keep_private.unwrap_or(false)) {
        None => HttpKeep {
            keep: false,
            ttl_ms: None,
        },
        Some(ttl) => HttpKeep {
            keep: true,
            ttl_ms: ttl.map(|d| d.as_secs_f64() * 1000.0),
        },
    }
}
