//! The loader's context across processes (two backends with their own connections stand
//! for two processes): lifetimes chosen by the loader hold fleet-wide, its metadata is kept
//! in the shared entry (format 2) and handed to the next load in any process, "not
//! modified" republishes the previous value with its lifetime restarted, "no cache" stores
//! nothing anywhere.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use herdless::{LoadReason, Loaded};
use herdless_redis::{Json, RedisBackend, TieredCache};

fn cache(url: &str, prefix: &str) -> TieredCache<String, Json> {
    let b = RedisBackend::builder(url)
        .prefix(prefix)
        .build()
        .expect("backend");
    TieredCache::builder(b, Json)
        .ttl(Duration::from_secs(60))
        .grace(Duration::from_secs(30))
        .jitter(0.0)
        .build()
        .expect("cache")
}

type Seen = Arc<Mutex<Vec<(LoadReason, Option<String>, Option<String>)>>>;

/// A loader that records what its context said and answers `answer`.
fn loader(
    seen: &Seen,
    answer: Loaded<String>,
) -> impl FnOnce(herdless::LoadContext<String>) -> Result<Loaded<String>, std::io::Error>
+ Send
+ 'static
+ use<> {
    let seen = seen.clone();
    move |ctx| {
        let prev = ctx.previous();
        let (value, meta) = (
            prev.map(|p| p.value.clone()),
            prev.and_then(|p| p.meta.as_deref().map(str::to_owned)),
        );
        seen.lock().unwrap().push((ctx.reason(), value, meta));
        Ok(answer)
    }
}

#[test]
fn each_entry_lives_its_loaders_ttl_in_every_process() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("ctx");
    let (a, b) = (cache(&srv.url(), &p), cache(&srv.url(), &p));
    let seen = Seen::default();
    let draft = Loaded::value("draft".to_string()).ttl(Duration::from_millis(300));
    let page = Loaded::value("page".to_string()).ttl(Duration::from_secs(3600));
    a.get_or_load_with("doc:draft", loader(&seen, draft))
        .unwrap();
    a.get_or_load_with("doc:page", loader(&seen, page)).unwrap();
    let shared = a.fleet().read_blocking("doc:draft").unwrap().unwrap();
    assert_eq!(shared.ttl, Some(Duration::from_millis(300)));
    let left = shared.fresh_until_ms - herdless_redis::now_ms();
    assert!(
        left <= 300,
        "the draft's shared entry is fresh for {left} ms"
    );
    let page = a.fleet().read_blocking("doc:page").unwrap().unwrap();
    assert!(page.fresh_until_ms - herdless_redis::now_ms() > 3_500_000);

    std::thread::sleep(Duration::from_millis(400));
    // In the other process: the draft is past its life (served stale, within grace, while
    // one refresh runs), the page is fresh and read without a load.
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    let page = b
        .get_or_load("doc:page", move || {
            *c.lock().unwrap() += 1;
            Ok::<_, std::io::Error>(Some("reloaded".to_string()))
        })
        .unwrap();
    assert_eq!((page.as_deref(), *calls.lock().unwrap()), (Some("page"), 0));
    let read = b.fleet().read_blocking("doc:draft").unwrap().unwrap();
    assert!(
        read.fresh_until_ms <= herdless_redis::now_ms(),
        "the draft is still fresh"
    );
}

#[test]
fn not_modified_restarts_the_shared_entry_and_keeps_its_etag_across_processes() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("ctx");
    let (a, b) = (cache(&srv.url(), &p), cache(&srv.url(), &p));
    let seen = Seen::default();
    let first = Loaded::value("v1".to_string())
        .ttl(Duration::from_millis(300))
        .meta("\"e1\"");
    assert_eq!(
        a.get_or_load_with("doc:1", loader(&seen, first))
            .unwrap()
            .as_deref(),
        Some("v1")
    );
    assert_eq!(
        a.fleet()
            .read_blocking("doc:1")
            .unwrap()
            .unwrap()
            .meta
            .as_deref(),
        Some("\"e1\"")
    );
    std::thread::sleep(Duration::from_millis(400));
    // The other process finds the shared entry stale: serves it at once, and its refresh
    // is told the value and its ETag, and answers 304.
    let v = b
        .get_or_load_with("doc:1", loader(&seen, Loaded::not_modified()))
        .unwrap();
    assert_eq!(v.as_deref(), Some("v1"));
    let mut restarted = None;
    for _ in 0..200 {
        let e = a.fleet().read_blocking("doc:1").unwrap().unwrap();
        if e.fresh_until_ms > herdless_redis::now_ms() {
            restarted = Some(e);
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let e = restarted.expect("the not-modified refresh republished the entry");
    assert_eq!(e.value.as_deref(), Some(&b"\"v1\""[..]));
    assert_eq!(e.meta.as_deref(), Some("\"e1\""), "the ETag is kept");
    assert_eq!(
        e.ttl,
        Some(Duration::from_millis(300)),
        "the loader's ttl is kept"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], (LoadReason::First, None, None));
    assert_eq!(
        seen[1],
        (
            LoadReason::Refresh,
            Some("v1".into()),
            Some("\"e1\"".into())
        )
    );
    assert_eq!(b.metrics().0.total().not_modified, 1);
}

#[test]
fn no_cache_answers_and_stores_nothing_in_either_tier() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("ctx");
    let (a, b) = (cache(&srv.url(), &p), cache(&srv.url(), &p));
    let seen = Seen::default();
    let once = Loaded::value("once".to_string()).no_cache();
    assert_eq!(
        a.get_or_load_with("k:1", loader(&seen, once))
            .unwrap()
            .as_deref(),
        Some("once")
    );
    assert!(a.fleet().read_blocking("k:1").unwrap().is_none());
    let again = Loaded::value("twice".to_string());
    assert_eq!(
        b.get_or_load_with("k:1", loader(&seen, again))
            .unwrap()
            .as_deref(),
        Some("twice")
    );
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn a_format_1_entry_still_reads_and_a_newer_format_is_a_counted_miss() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("ctx");
    let a = cache(&srv.url(), &p);
    a.get_or_load("k:1", || Ok::<_, std::io::Error>(Some("plain".to_string())))
        .unwrap();
    let e = a.fleet().read_blocking("k:1").unwrap().unwrap();
    assert_eq!((e.ttl, e.meta.clone()), (None, None), "written as format 1");
    let b = cache(&srv.url(), &p);
    assert_eq!(b.get("k:1").unwrap().as_deref(), Some("plain"));
    // A format this build does not know (a later one): a miss, counted, and reloaded.
    let mut bytes = herdless_redis::wire::encode(&e);
    bytes[2] = 3;
    let backend = RedisBackend::builder(srv.url()).prefix(&p).build().unwrap();
    let name = backend.names("k:2").value;
    let mut c = srv.client();
    let _: () = redis::cmd("SET")
        .arg(&name)
        .arg(bytes)
        .query(&mut c)
        .unwrap();
    let v = b
        .get_or_load("k:2", || {
            Ok::<_, std::io::Error>(Some("loaded".to_string()))
        })
        .unwrap();
    assert_eq!(v.as_deref(), Some("loaded"));
    assert!(b.metrics().1.corrupt_entries >= 1);
}
