//! The example service over real HTTP (a server on a local port, raw HTTP/1.1 requests):
//! a herd of requests across two servers sharing one tier costs one handler call; nothing a
//! response or a request says is private reaches another caller.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use herdless_example_axum::{Catalog, app, memory_cache};
use herdless_redis::TieredCache;
use herdless_redis::http::{Cached, ResponseCodec, ResponseStore};
use herdless_redis::memory::MemoryStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves `app` on a free local port; its address.
async fn serve<S: ResponseStore>(cache: S, catalog: Catalog) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app(cache, catalog)).await });
    addr
}

/// One request (`extra`: more header lines); the status line, the headers (lower-case
/// names) and the body.
async fn request(
    addr: &str,
    method: &str,
    path: &str,
    extra: &str,
) -> (String, Vec<(String, String)>, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let body = match header(&headers, "transfer-encoding") {
        Some("chunked") => unchunked(body),
        _ => body.to_owned(),
    };
    (status, headers, body)
}

/// A chunked body's data.
fn unchunked(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    out
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn tiered(store: &MemoryStore) -> TieredCache<Cached, ResponseCodec> {
    let backend = store.backend().build().unwrap();
    TieredCache::builder(backend, ResponseCodec)
        .ttl(Duration::from_secs(60))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_herd_across_two_servers_of_one_fleet_costs_one_handler_call() {
    let store = MemoryStore::new();
    let catalog = Catalog::default();
    let a = serve(tiered(&store), catalog.clone()).await;
    let b = serve(tiered(&store), catalog.clone()).await;
    let herd: Vec<_> = (0..40)
        .map(|i| {
            let addr = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { request(&addr, "GET", "/products/7", "").await })
        })
        .collect();
    for h in herd {
        let (status, _, body) = h.await.unwrap();
        assert!(status.contains("200"), "{status}");
        assert_eq!(body, r#"{"id":7,"name":"product 7"}"#);
    }
    assert_eq!(catalog.product_calls.load(Ordering::SeqCst), 1);
    // Later readers, a canonical query in another order, and HEAD: still one call.
    let (_, headers, _) = request(&b, "GET", "/products/7", "").await;
    assert_eq!(header(&headers, "content-type"), Some("application/json"));
    request(&a, "GET", "/products/8?b=2&a=1", "").await;
    request(&b, "GET", "/products/8?a=1&b=2", "").await;
    let (status, _, body) = request(&a, "HEAD", "/products/8?a=1&b=2", "").await;
    assert!(
        status.contains("200") && body.is_empty(),
        "{status} {body:?}"
    );
    assert_eq!(catalog.product_calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cookie_set_for_one_caller_never_reaches_another() {
    let catalog = Catalog::default();
    let addr = serve(memory_cache(), catalog.clone()).await;
    let herd: Vec<_> = (0..10)
        .map(|_| {
            let addr = addr.clone();
            tokio::spawn(async move { request(&addr, "GET", "/account", "").await })
        })
        .collect();
    let mut cookies = HashSet::new();
    for h in herd {
        let (status, headers, body) = h.await.unwrap();
        assert!(status.contains("200"));
        let cookie = header(&headers, "set-cookie").expect("each caller its own session");
        // The welcome text and the cookie are the same call's.
        let n = body.strip_prefix("welcome, visitor ").unwrap();
        assert_eq!(cookie, format!("session=s{n}; HttpOnly"));
        assert!(cookies.insert(cookie.to_owned()), "{cookie} served twice");
    }
    assert_eq!(catalog.account_calls.load(Ordering::SeqCst), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_answers_other_methods_and_credentials_pass_through() {
    let catalog = Catalog::default();
    let addr = serve(memory_cache(), catalog.clone()).await;
    let (_, _, one) = request(&addr, "GET", "/live", "").await;
    let (_, _, two) = request(&addr, "GET", "/live", "").await;
    assert_ne!(one, two, "Cache-Control: private is not kept");
    request(&addr, "POST", "/orders", "Content-Length: 0\r\n").await;
    request(&addr, "POST", "/orders", "Content-Length: 0\r\n").await;
    assert_eq!(catalog.product_calls.load(Ordering::SeqCst), 2);
    request(&addr, "GET", "/products/1", "").await;
    request(&addr, "GET", "/products/1", "Authorization: Bearer x\r\n").await;
    request(&addr, "GET", "/products/1", "Cookie: session=s1\r\n").await;
    assert_eq!(
        catalog.product_calls.load(Ordering::SeqCst),
        5,
        "with credentials: the handler"
    );
    // Accept-Encoding selects a variant of its own.
    request(&addr, "GET", "/products/1", "Accept-Encoding: gzip\r\n").await;
    request(&addr, "GET", "/products/1", "Accept-Encoding: gzip\r\n").await;
    assert_eq!(catalog.product_calls.load(Ordering::SeqCst), 6);
}
