//! The loader's context and its answer: lifetimes chosen per entry by the loader (a draft
//! lives seconds, a published page an hour), a conditional refresh answered "not modified"
//! (the previous value kept, its lifetime restarted, its ETag handed to the next load), an
//! answer for the callers only ("no cache"), and the answers the engine refuses.

mod common;

use std::sync::{Arc, Mutex};

use common::{Origin, OriginDown, Sim, ms, secs};
use herdless::{Cache, Error, HitState, LoadReason, Loaded, MAX_META_BYTES, ManualClock};

/// A cache on a manual clock, without jitter (lifetimes are exact) or background work.
fn cache(clock: &ManualClock) -> Cache<String> {
    Cache::builder()
        .clock(clock.clone())
        .ttl(secs(60))
        .jitter(0.0)
        .beta(0.0)
        .without_spawner()
        .build()
        .unwrap()
}

fn text(s: &str) -> Option<String> {
    Some(s.to_string())
}

#[test]
fn each_entry_lives_the_ttl_its_loader_chose() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let load = |key: &str, ttl| {
        cache
            .get_or_load_with(key, move |_| {
                Ok::<_, OriginDown>(Loaded::value("doc".to_string()).ttl(ttl))
            })
            .unwrap()
    };
    assert_eq!(load("doc:draft", secs(1)), text("doc"));
    assert_eq!(load("doc:published", secs(3600)), text("doc"));
    let draft = cache.peek("doc:draft").unwrap();
    assert_eq!(draft.fresh_until, secs(1));
    assert_eq!(cache.peek("doc:published").unwrap().fresh_until, secs(3600));

    clock.advance(ms(1_001));
    assert!(
        cache.peek("doc:draft").is_none(),
        "the draft outlived its 1 s"
    );
    assert_eq!(cache.get("doc:published"), text("doc"));
    clock.advance(secs(3598));
    assert_eq!(
        cache.get("doc:published"),
        text("doc"),
        "the page expired early"
    );
    clock.advance(secs(2));
    assert!(
        cache.peek("doc:published").is_none(),
        "the page outlived its hour"
    );
}

#[test]
fn a_loader_may_choose_grace_and_the_negative_ttl_too() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    cache
        .get_or_load_with("page:1", |_| {
            Ok::<_, OriginDown>(Loaded::value("p".into()).ttl(secs(10)).grace(secs(5)))
        })
        .unwrap();
    cache
        .get_or_load_with("page:404", |_| {
            Ok::<_, OriginDown>(Loaded::absent().negative_ttl(secs(1)))
        })
        .unwrap();
    clock.advance(secs(12));
    let stale = cache.peek("page:1").unwrap();
    assert_eq!(
        (stale.state, stale.stale_until),
        (HitState::Stale, secs(15))
    );
    assert!(
        cache.peek("page:404").is_none(),
        "the absence outlived its 1 s"
    );
}

/// An origin that answers the way an HTTP server answers `If-None-Match`: a 304 when the
/// caller's ETag is current, else the body with its ETag.
struct Document {
    body: Mutex<(String, String)>,
    bodies_sent: Mutex<usize>,
}

impl Document {
    fn get(&self, if_none_match: Option<&str>) -> Option<(String, String)> {
        let (body, etag) = self.body.lock().unwrap().clone();
        if if_none_match == Some(etag.as_str()) {
            return None; // 304 Not Modified
        }
        *self.bodies_sent.lock().unwrap() += 1;
        Some((body, etag))
    }
}

fn conditional(
    doc: &Arc<Document>,
) -> impl FnOnce(herdless::LoadContext<String>) -> Result<Loaded<String>, OriginDown>
+ Send
+ 'static
+ use<> {
    let doc = doc.clone();
    move |ctx| {
        let etag = ctx.previous().and_then(|p| p.meta.as_deref());
        Ok(match doc.get(etag) {
            None => Loaded::not_modified(),
            Some((body, etag)) => Loaded::value(body).meta(etag),
        })
    }
}

#[test]
fn not_modified_keeps_the_value_restarts_its_lifetime_and_counts_as_a_load() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let doc = Arc::new(Document {
        body: Mutex::new(("v1 body".into(), "\"e1\"".into())),
        bodies_sent: Mutex::new(0),
    });
    assert_eq!(
        cache.get_or_load_with("doc:1", conditional(&doc)).unwrap(),
        text("v1 body")
    );
    assert_eq!(cache.peek("doc:1").unwrap().meta.as_deref(), Some("\"e1\""));

    // Past its ttl: the next load is told the value, its age and its ETag, and answers 304.
    clock.advance(secs(61));
    let seen = Arc::new(Mutex::new(None));
    let (seen2, doc2) = (seen.clone(), doc.clone());
    let v = cache
        .get_or_load_with("doc:1", move |ctx| {
            let p = ctx
                .previous()
                .expect("the expired entry is the previous one");
            *seen2.lock().unwrap() = Some((ctx.reason(), p.value.clone(), p.age));
            conditional(&doc2)(ctx)
        })
        .unwrap();
    assert_eq!(v, text("v1 body"));
    assert_eq!(
        *seen.lock().unwrap(),
        Some((LoadReason::First, "v1 body".to_string(), secs(61)))
    );
    let kept = cache.peek("doc:1").unwrap();
    assert_eq!(kept.age, secs(0), "the lifetime restarted");
    assert_eq!(kept.fresh_until, secs(61 + 60));
    assert_eq!(kept.meta.as_deref(), Some("\"e1\""), "the ETag is kept");
    assert_eq!(*doc.bodies_sent.lock().unwrap(), 1, "the 304 sent no body");
    let c = cache.metrics().total();
    assert_eq!((c.loads, c.not_modified), (2, 1));

    // Changed at the origin: the next load transfers the new body and its new ETag.
    *doc.body.lock().unwrap() = ("v2 body".into(), "\"e2\"".into());
    clock.advance(secs(61));
    assert_eq!(
        cache.get_or_load_with("doc:1", conditional(&doc)).unwrap(),
        text("v2 body")
    );
    assert_eq!(cache.peek("doc:1").unwrap().meta.as_deref(), Some("\"e2\""));
    assert_eq!(*doc.bodies_sent.lock().unwrap(), 2);
}

#[test]
fn a_not_modified_refresh_keeps_the_loaders_own_ttl_unless_it_sets_another() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    cache
        .get_or_load_with("doc:2", |_| {
            Ok::<_, OriginDown>(Loaded::value("x".into()).ttl(secs(5)).meta("m"))
        })
        .unwrap();
    clock.advance(secs(6));
    cache
        .get_or_load_with("doc:2", |_| Ok::<_, OriginDown>(Loaded::not_modified()))
        .unwrap();
    assert_eq!(cache.peek("doc:2").unwrap().fresh_until, secs(6 + 5));
    clock.advance(secs(6));
    cache
        .get_or_load_with("doc:2", |_| {
            Ok::<_, OriginDown>(Loaded::not_modified().ttl(secs(100)))
        })
        .unwrap();
    let p = cache.peek("doc:2").unwrap();
    assert_eq!(
        (p.fresh_until, p.meta.as_deref()),
        (secs(12 + 100), Some("m"))
    );
}

#[test]
fn a_stale_refresh_is_told_its_reason_and_answers_not_modified_in_the_background() {
    let mut sim = Sim::new();
    let cache: Cache<u64> = sim
        .builder()
        .ttl(secs(10))
        .grace(secs(5))
        .jitter(0.0)
        .beta(0.0)
        .build()
        .unwrap();
    let origin = Origin::new();
    let first = {
        let cache = cache.clone();
        sim.spawn(async move {
            let load = |_| async { Ok::<_, OriginDown>(Loaded::value(7).meta("e7")) };
            cache.get_or_load_with_async("n:1", load).await
        })
    };
    sim.run();
    assert_eq!(first.take().unwrap(), Some(7));
    sim.advance(secs(11));
    let reasons = Arc::new(Mutex::new(Vec::new()));
    let call = {
        let (cache, reasons, origin) = (cache.clone(), reasons.clone(), origin.clone());
        sim.spawn(async move {
            cache
                .get_or_load_with_async("n:1", move |ctx| async move {
                    let _call = origin.enter();
                    let p = ctx.previous().unwrap();
                    reasons
                        .lock()
                        .unwrap()
                        .push((ctx.reason(), p.value, p.meta.clone()));
                    Ok::<_, OriginDown>(Loaded::not_modified())
                })
                .await
        })
    };
    sim.run();
    assert_eq!(call.take().unwrap(), Some(7), "the stale value, at once");
    assert_eq!(
        *reasons.lock().unwrap(),
        vec![(LoadReason::Refresh, 7, Some("e7".into()))]
    );
    let p = cache.peek("n:1").unwrap();
    assert_eq!(
        (p.state, p.age, p.value),
        (HitState::Fresh, secs(0), Some(7))
    );
    assert_eq!(origin.calls(), 1);
}

#[test]
fn no_cache_answers_the_callers_and_stores_nothing() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    cache.set("k:1", "old".into()).unwrap();
    clock.advance(secs(61));
    let v = cache
        .get_or_load_with("k:1", |_| {
            Ok::<_, OriginDown>(Loaded::value("once".into()).no_cache())
        })
        .unwrap();
    assert_eq!(v, text("once"));
    assert!(cache.peek("k:1").is_none(), "nothing stored");
    let v = cache
        .get_or_load_with("k:2", |_| {
            Ok::<_, OriginDown>(Loaded::value("twice".into()).no_cache())
        })
        .unwrap();
    assert_eq!(v, text("twice"));
    assert!(cache.peek("k:2").is_none());
    assert_eq!(cache.metrics().total().loads, 2);
}

#[test]
fn the_engine_refuses_not_modified_without_a_previous_value_and_oversized_meta() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let err = cache
        .get_or_load_with("k:1", |_| Ok::<_, OriginDown>(Loaded::not_modified()))
        .unwrap_err();
    assert!(matches!(err, Error::NoPrevious), "{err:?}");
    let long = "e".repeat(MAX_META_BYTES + 1);
    let err = cache
        .get_or_load_with("k:1", move |_| {
            Ok::<_, OriginDown>(Loaded::value("v".into()).meta(long))
        })
        .unwrap_err();
    assert!(
        matches!(err, Error::MetaTooLong { len, max } if len == MAX_META_BYTES + 1 && max == MAX_META_BYTES),
        "{err:?}"
    );
    assert!(cache.peek("k:1").is_none());
    assert_eq!(cache.metrics().total().load_errors, 2);
    let ok = "e".repeat(MAX_META_BYTES);
    cache
        .get_or_load_with("k:1", move |_| {
            Ok::<_, OriginDown>(Loaded::value("v".into()).meta(ok))
        })
        .unwrap();
}

#[test]
fn the_old_loaders_still_work_beside_the_context_aware_ones() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let v = cache
        .get_or_load("k:1", || Ok::<_, OriginDown>(text("plain")))
        .unwrap();
    assert_eq!(v, text("plain"));
    clock.advance(secs(61));
    let v = cache
        .get_or_load_with("k:1", |ctx| {
            assert_eq!(ctx.key(), "k:1");
            let p = ctx.previous().expect("the plain value is the previous one");
            assert_eq!(p.meta, None);
            Ok::<_, OriginDown>(Loaded::from(Some(p.value.clone() + "+")))
        })
        .unwrap();
    assert_eq!(v, text("plain+"));
}
