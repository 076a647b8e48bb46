//! The engine's HTTP rules for Python's web integrations (`herdless.contrib.flask_caching`):
//! the cache key of a request and which responses may answer other callers, both decided in
//! `herdless_redis::http`, so Flask, Express, Fastify and the tower layer keep and name
//! responses alike.

use pyo3::prelude::*;

use crate::errors::key_error;

/// The cache key of a request (`herdless_redis::http::request_key`): HEAD shares GET's
/// entry, the query in canonical order (hashed past 256 bytes), `vary` as named parts.
#[pyfunction]
#[pyo3(signature = (namespace, method, path, query, vary = Vec::new()))]
pub(crate) fn http_request_key(
    py: Python<'_>,
    namespace: Option<&str>,
    method: &str,
    path: &str,
    query: &str,
    vary: Vec<(String, String)>,
) -> PyResult<String> {
    let vary: Vec<(&str, &str)> = vary.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    herdless_redis::http::request_key(namespace, method, path, query, &vary)
        .map_err(|e| key_error(py, e))
}

/// A query's pairs in canonical order (`herdless_redis::http::canonical_query`).
#[pyfunction]
pub(crate) fn http_canonical_query(query: &str) -> String {
    herdless_redis::http::canonical_query(query)
}

/// Whether a response may answer other callers (`herdless_redis::http::keeps`): `(False,
/// None)` if not, `(True, None)` for the cache's ttl, `(True, seconds)` for its own
/// `s-maxage` / `max-age`.
#[pyfunction]
#[pyo3(signature = (status_kept, headers, vary, keep_private = false))]
pub(crate) fn http_keeps(
    status_kept: bool,
    headers: Vec<(String, String)>,
    vary: Vec<String>,
    keep_private: bool,
) -> (bool, Option<f64>) {
    let vary: Vec<&str> = vary.iter().map(String::as_str).collect();
    let headers = headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
    match herdless_redis::http::keeps(status_kept, headers, &vary, keep_private) {
        None => (false, None),
        Some(ttl) => (true, ttl.map(|d| d.as_secs_f64())),
    }
}
