//! The cache key of an HTTP request, the same in every language (Rust's tower layer, Node's
//! Express and Fastify integrations, Python's): one namespace for every route, so that keys
//! made from request input never become namespaces (each its own epoch record and metric
//! label); the method and the path as the entity; the query in canonical order as the id;
//! what else the answer depends on as named parameters.

use base64::Engine;
use herdless::{KeyBuilder, KeyError};
use sha2::{Digest, Sha256};

/// The namespace of request keys unless told otherwise.
pub const HTTP_NAMESPACE: &str = "http";

/// A canonical query longer than this many bytes is kept as its SHA-256, so that the key
/// stays within the engine's length limit whatever the request sends.
pub const LONG_QUERY: usize = 256;

/// The cache key of a request: `method` (HEAD is answered by GET's entry), `path`, `query`
/// (without the `?`; its pairs decoded as forms are, sorted by name then value, and
/// encoded again, so `?b=2&a=1` and `?a=1&b=2` share an entry; longer than [`LONG_QUERY`]
/// bytes it becomes `sha256-<base64url digest>`), and `vary`: named parts the answer also
/// depends on (the user, a header's value). `namespace` defaults to [`HTTP_NAMESPACE`].
///
/// ```
/// use herdless_redis::http::request_key;
///
/// let a = request_key(None, "GET", "/search", "q=cache&page=2", &[]).unwrap();
/// let b = request_key(None, "HEAD", "/search", "page=2&q=cache", &[]).unwrap();
/// assert_eq!(a, b);
/// assert_eq!(a, "http:v1:GET%20/search:page%3D2%26q%3Dcache");
/// ```
pub fn request_key(
    namespace: Option<&str>,
    method: &str,
    path: &str,
    query: &str,
    vary: &[(&str, &str)],
) -> Result<String, KeyError> {
    let verb = if method.eq_ignore_ascii_case("HEAD") {
        "GET"
    } else {
        method
    };
    let entity = format!("{verb} {path}");
    let mut b = KeyBuilder::new(namespace.unwrap_or(HTTP_NAMESPACE)).entity(&entity);
    let query = canonical_query(query);
    if !query.is_empty() {
        b = b.id(query);
    }
    for (name, value) in vary {
        b = b.param(name, *value);
    }
    b.build()
}

/// `query`'s pairs (without the `?`), decoded, sorted by name then value, and encoded
/// again; kept as `sha256-<base64url digest>` past [`LONG_QUERY`] bytes. The id part of
/// [`request_key`].
pub fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    pairs.sort();
    let text = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    if text.len() <= LONG_QUERY {
        return text;
    }
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_canonical_and_long_ones_hashed() {
        assert_eq!(canonical_query("b=2&a=1&a=0"), "a=0&a=1&b=2");
        assert_eq!(canonical_query("q=a+b&x=%41"), "q=a+b&x=A");
        assert_eq!(canonical_query(""), "");
        let long = format!("q={}", "x".repeat(400));
        let h = canonical_query(&long);
        assert!(h.starts_with("sha256-") && h.len() < 60, "{h}");
        assert_ne!(h, canonical_query(&format!("q={}", "y".repeat(400))));
    }

    #[test]
    fn keys_are_the_ones_node_made_before_it_called_this() {
        // Node's lib/request-key.js (WHATWG URLSearchParams, node:crypto) on these requests.
        let k = |m, p, q| request_key(None, m, p, q, &[]).unwrap();
        assert_eq!(
            k("GET", "/search", "q=cache&page=2"),
            "http:v1:GET%20/search:page%3D2%26q%3Dcache"
        );
        assert_eq!(
            k("HEAD", "/s", "q=a+b&x=%41"),
            "http:v1:GET%20/s:q%3Da+b%26x%3DA"
        );
        let long = format!("q={}", "x".repeat(400));
        assert_eq!(
            k("GET", "/s", &long),
            "http:v1:GET%20/s:sha256-pCQZ504utqlCegb9QVIwlfSlbH4YpFfPAk1h9ELfOMQ"
        );
    }

    #[test]
    fn the_vary_parts_and_the_namespace_are_in_the_key() {
        let k = request_key(Some("pages"), "GET", "/p", "", &[("user", "7")]).unwrap();
        assert_eq!(k, "pages:v1:GET%20/p?user=7");
        let other = request_key(Some("pages"), "GET", "/p", "", &[("user", "8")]).unwrap();
        assert_ne!(k, other);
        assert_ne!(
            k,
            request_key(None, "POST", "/p", "", &[("user", "7")]).unwrap()
        );
    }
}
