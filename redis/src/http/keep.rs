//! Which responses may answer other callers, decided once for every language's web
//! integrations (the tower layer, Node's Express, Fastify and NestJS helpers, Python's
//! Flask): a response that is one client's alone is never kept for others.

use core::time::Duration;

/// Whether a response may be kept for other callers, and for how long: `None` if not
/// (`Set-Cookie`, `Cache-Control: no-store / no-cache`, `private` unless `keep_private`, a
/// zero `max-age`, a status the integration does not keep (`status_kept: false`), a
/// `Vary` on `*` or on a header the key does not hold, or a `Cache-Control` / `Vary` that
/// does not parse); `Some(None)` for the cache's ttl; `Some(Some(d))` for the response's
/// own `s-maxage` (preferred) or `max-age`.
///
/// `headers` are the response's (name, value) pairs, names in any case; `vary` the request
/// headers the key holds (the integration puts their values in the key).
///
/// ```
/// use herdless_redis::http::keeps;
///
/// let kept = |h: &[(&str, &str)]| keeps(true, h.iter().copied(), &["accept-encoding"], false);
/// assert_eq!(kept(&[("content-type", "text/html")]), Some(None));
/// assert_eq!(kept(&[("Cache-Control", "public, max-age=30")]), Some(Some(std::time::Duration::from_secs(30))));
/// assert_eq!(kept(&[("set-cookie", "sessionid=abc")]), None);
/// assert_eq!(kept(&[("cache-control", "private")]), None);
/// assert_eq!(kept(&[("vary", "Cookie")]), None);
/// assert_eq!(kept(&[("vary", "Accept-Encoding")]), Some(None));
/// ```
pub fn keeps<'a>(
    status_kept: bool,
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    vary: &[&str],
    keep_private: bool,
) -> Option<Option<Duration>> {
    if !status_kept {
        return None;
    }
    let mut max_age = None;
    let mut s_maxage = None;
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("set-cookie") {
            return None;
        }
        if name.eq_ignore_ascii_case("cache-control") {
            for directive in value.split(',') {
                let d = directive.trim().to_ascii_lowercase();
                match d.as_str() {
                    "no-store" | "no-cache" => return None,
                    "private" if !keep_private => return None,
                    _ => {}
                }
                if let Some(n) = d.strip_prefix("s-maxage=") {
                    s_maxage = Some(n.trim_matches('"').parse::<u64>().ok()?);
                } else if let Some(n) = d.strip_prefix("max-age=") {
                    max_age = Some(n.trim_matches('"').parse::<u64>().ok()?);
                }
            }
        } else if name.eq_ignore_ascii_case("vary") {
            for header in value.split(',').map(str::trim).filter(|h| !h.is_empty()) {
                if header == "*" || !vary.iter().any(|v| v.eq_ignore_ascii_case(header)) {
                    return None;
                }
            }
        }
    }
    match s_maxage.or(max_age) {
        Some(0) => None,
        Some(s) => Some(Some(Duration::from_secs(s))),
        None => Some(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(h: &[(&str, &str)]) -> Option<Option<Duration>> {
        keeps(
            true,
            h.iter().copied(),
            &["Accept-Encoding", "Accept-Language"],
            false,
        )
    }

    #[test]
    fn a_response_of_one_client_is_never_kept() {
        assert_eq!(kept(&[("Set-Cookie", "a=1")]), None);
        assert_eq!(kept(&[("cache-control", "Private, max-age=60")]), None);
        assert_eq!(kept(&[("cache-control", "no-store")]), None);
        assert_eq!(kept(&[("cache-control", "no-cache")]), None);
        assert_eq!(kept(&[("cache-control", "max-age=0")]), None);
        assert_eq!(keeps(false, [], &[], false), None);
        assert_eq!(
            keeps(true, [("cache-control", "private")], &[], true),
            Some(None)
        );
    }

    #[test]
    fn s_maxage_wins_over_max_age_in_any_order() {
        let d = |s| Some(Some(Duration::from_secs(s)));
        assert_eq!(kept(&[("cache-control", "max-age=5, s-maxage=50")]), d(50));
        assert_eq!(kept(&[("cache-control", "s-maxage=50, max-age=5")]), d(50));
        assert_eq!(kept(&[("cache-control", "max-age=\"7\"")]), d(7));
        assert_eq!(kept(&[("cache-control", "max-age=soon")]), None);
    }

    #[test]
    fn vary_is_honoured_only_on_what_the_key_holds() {
        assert_eq!(
            kept(&[("vary", "accept-encoding, Accept-Language")]),
            Some(None)
        );
        assert_eq!(kept(&[("vary", "*")]), None);
        assert_eq!(kept(&[("vary", "Accept-Encoding, Cookie")]), None);
        assert_eq!(kept(&[("vary", "")]), Some(None));
    }
}
