//! Tags: a product page depends on its product, its seller and its category; invalidating
//! any of them drops exactly the pages that carry it, in O(1). Hard invalidation serves
//! nothing older (not even fail-safe), soft expiry keeps stale copies for grace and
//! fail-safe with one refresh, a load racing an invalidation never stores, and the bounds
//! (tags per entry, tag bytes, tag records) hold without resurrecting anything.

mod common;

use common::{OriginDown, Sim, secs};
use herdless::{Cache, Error, HitState, Loaded, Lookup, MAX_TAG_BYTES, ManualClock};

/// A cache on a manual clock, without jitter or background work.
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

/// Three product pages and an untagged home page.
fn shop(cache: &Cache<String>) {
    let pages = [
        ("page:lamp", ["product:42", "seller:7", "category:3"]),
        ("page:chair", ["product:43", "seller:7", "category:4"]),
        ("page:desk", ["product:44", "seller:8", "category:3"]),
    ];
    for (key, tags) in pages {
        cache.set_tagged(key, key.to_string(), &tags).unwrap();
    }
    cache.set("page:home", "home".to_string()).unwrap();
}

fn alive(cache: &Cache<String>) -> Vec<&'static str> {
    ["page:lamp", "page:chair", "page:desk", "page:home"]
        .into_iter()
        .filter(|k| cache.get(k).is_some())
        .collect()
}

#[test]
fn each_invalidation_drops_exactly_the_pages_carrying_the_tag() {
    for (tag, left) in [
        ("product:42", vec!["page:chair", "page:desk", "page:home"]),
        ("seller:7", vec!["page:desk", "page:home"]),
        ("category:3", vec!["page:chair", "page:home"]),
        (
            "product:99",
            vec!["page:lamp", "page:chair", "page:desk", "page:home"],
        ),
    ] {
        let clock = ManualClock::new();
        let cache = cache(&clock);
        shop(&cache);
        cache.invalidate_tag(tag).unwrap();
        assert_eq!(alive(&cache), left, "after invalidate_tag({tag})");
        // A page written after the invalidation, with the same tag, lives.
        cache.set_tagged("page:lamp", "v2".into(), &[tag]).unwrap();
        assert_eq!(cache.get("page:lamp"), text("v2"));
    }
}

#[test]
fn a_loader_attaches_tags_and_a_batch_drops_them_together() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    for (key, tags) in [
        ("page:a", ["product:1", "seller:1"]),
        ("page:b", ["product:2", "seller:2"]),
    ] {
        let v = cache
            .get_or_load_with(key, move |ctx| {
                assert!(ctx.previous().is_none());
                Ok::<_, OriginDown>(Loaded::value(key.to_string()).tags(tags))
            })
            .unwrap();
        assert_eq!(v.as_deref(), Some(key));
    }
    let peek = cache.peek("page:a").unwrap();
    assert_eq!(
        peek.tags,
        ["product:1".into(), "seller:1".into()] as [Box<str>; 2]
    );
    cache.invalidate_tags(["seller:1", "product:2"]).unwrap();
    assert!(cache.peek("page:a").is_none() && cache.peek("page:b").is_none());
    let m = cache.metrics();
    assert_eq!(m.tag_invalidations, 2);
    assert_eq!(m.tags, 4, "records are kept, not scanned");
}

#[test]
fn hard_invalidation_serves_nothing_older_not_even_fail_safe() {
    let clock = ManualClock::new();
    let cache: Cache<String> = Cache::builder()
        .clock(clock.clone())
        .ttl(secs(60))
        .grace(secs(30))
        .max_stale(secs(600))
        .jitter(0.0)
        .beta(0.0)
        .without_spawner()
        .build()
        .unwrap();
    cache
        .set_tagged("page:lamp", "old".into(), &["product:42"])
        .unwrap();
    cache.invalidate_tag("product:42").unwrap();
    assert_eq!(cache.get("page:lamp"), None);
    assert!(cache.peek("page:lamp").is_none());
    let got = cache.get_or_load_with("page:lamp", |ctx| {
        assert!(
            ctx.previous().is_none(),
            "no previous value survives a hard invalidation"
        );
        Err::<Loaded<String>, _>(OriginDown(1))
    });
    assert!(
        matches!(got, Err(Error::Load(_))),
        "no fail-safe value: {got:?}"
    );
    let t = cache.metrics().total();
    assert_eq!((t.failsafe_served, t.stale_served, t.hits), (0, 0, 0));
    assert_eq!(
        cache.metrics().entries,
        0,
        "the dead entry was removed at the lookup"
    );
}

#[test]
fn soft_expiry_serves_stale_within_grace_while_one_refresh_runs() {
    let sim = Sim::new();
    let cache: Cache<String> = sim
        .builder()
        .ttl(secs(60))
        .grace(secs(30))
        .jitter(0.0)
        .beta(0.0)
        .build()
        .unwrap();
    cache
        .set_tagged("page:lamp", "old".into(), &["product:42"])
        .unwrap();
    cache.expire_tag("product:42").unwrap();
    assert_eq!(cache.peek("page:lamp").unwrap().state, HitState::Stale);
    assert_eq!(
        cache.get("page:lamp"),
        text("old"),
        "get serves stale within grace"
    );

    let Lookup::Hit(hit) = cache.lookup("page:lamp").unwrap() else {
        panic!("a stale entry is served")
    };
    assert_eq!(
        (hit.value.as_deref(), hit.state),
        (Some("old"), HitState::Stale)
    );
    let refresh = hit.refresh.expect("one refresh runs");
    let Lookup::Hit(again) = cache.lookup("page:lamp").unwrap() else {
        panic!("still served stale")
    };
    assert!(again.refresh.is_none(), "only one refresh");
    let previous = refresh
        .previous()
        .expect("the stale value is the previous one");
    assert_eq!(previous.tags(), ["product:42".into()] as [Box<str>; 1]);
    // "Not modified" keeps the value and its tags, born after the expiry: fresh again.
    refresh.complete_loaded(Ok(Loaded::not_modified())).unwrap();
    let peek = cache.peek("page:lamp").unwrap();
    assert_eq!(
        (peek.state, peek.value.as_deref()),
        (HitState::Fresh, Some("old"))
    );
    assert_eq!(peek.tags, ["product:42".into()] as [Box<str>; 1]);
    let m = cache.metrics();
    assert_eq!((m.tag_expirations, m.total().refreshes), (1, 1));
}

#[test]
fn soft_expiry_without_grace_leaves_a_fail_safe_value() {
    let clock = ManualClock::new();
    let cache: Cache<String> = Cache::builder()
        .clock(clock.clone())
        .ttl(secs(60))
        .max_stale(secs(600))
        .jitter(0.0)
        .beta(0.0)
        .without_spawner()
        .build()
        .unwrap();
    cache
        .set_tagged("page:lamp", "old".into(), &["product:42"])
        .unwrap();
    cache.expire_tag("product:42").unwrap();
    assert_eq!(cache.peek("page:lamp").unwrap().state, HitState::FailSafe);
    assert_eq!(
        cache.get("page:lamp"),
        None,
        "not servable without a failed load"
    );
    let got = cache.get_or_load("page:lamp", || Err::<Option<String>, _>(OriginDown(1)));
    assert_eq!(
        got.unwrap(),
        text("old"),
        "the fail-safe value answers a failed load"
    );
    assert_eq!(cache.metrics().total().failsafe_served, 1);

    // Without fail-safe, an expired tag is an expired entry: a miss.
    let plain = self::cache(&clock);
    plain
        .set_tagged("page:lamp", "old".into(), &["product:42"])
        .unwrap();
    plain.expire_tag("product:42").unwrap();
    assert!(plain.peek("page:lamp").is_none());
}

#[test]
fn a_load_racing_invalidate_tag_answers_its_callers_but_never_stores() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let Lookup::Lead(guard) = cache.lookup("page:lamp").unwrap() else {
        panic!("a miss leads")
    };
    // The price changes while the page renders from the old price.
    cache.invalidate_tag("product:42").unwrap();
    let answer = guard
        .complete_loaded(Ok(
            Loaded::value("old price".into()).tags(["product:42", "seller:7"])
        ))
        .unwrap();
    assert_eq!(answer, text("old price"), "the load answers its callers");
    assert!(
        cache.peek("page:lamp").is_none(),
        "its older value is not stored"
    );

    // A load that began after the invalidation is stored.
    let Lookup::Lead(guard) = cache.lookup("page:lamp").unwrap() else {
        panic!("still a miss")
    };
    guard
        .complete_loaded(Ok(Loaded::value("new price".into()).tag("product:42")))
        .unwrap();
    assert_eq!(cache.get("page:lamp"), text("new price"));
}

#[test]
fn a_load_racing_an_invalidation_of_a_tag_nobody_carried_yet_is_not_stored() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let Lookup::Lead(guard) = cache.lookup("page:new").unwrap() else {
        panic!("a miss leads")
    };
    // No entry carries product:77 yet: no record is made...
    cache.invalidate_tag("product:77").unwrap();
    assert_eq!(cache.metrics().tags, 0);
    // ...but the running load that attaches it later is still dropped.
    guard
        .complete_loaded(Ok(Loaded::value("stale".into()).tag("product:77")))
        .unwrap();
    assert!(cache.peek("page:new").is_none());
    // The rule is conservative: a racing first load of another new tag is dropped too.
    let Lookup::Lead(guard) = cache.lookup("page:other").unwrap() else {
        panic!("a miss leads")
    };
    cache.invalidate_tag("product:78").unwrap();
    guard
        .complete_loaded(Ok(Loaded::value("x".into()).tag("unrelated:1")))
        .unwrap();
    assert!(cache.peek("page:other").is_none());
    // Writes and loads that begin afterwards are stored.
    cache
        .set_tagged("page:new", "fresh".into(), &["product:77"])
        .unwrap();
    assert_eq!(cache.get("page:new"), text("fresh"));
}

#[test]
fn get_peek_lookup_and_metrics_agree_after_an_invalidation() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    cache
        .set_tagged("page:lamp", "lamp".into(), &["product:42"])
        .unwrap();
    assert_eq!(cache.get("page:lamp"), text("lamp"));
    cache.invalidate_tag("product:42").unwrap();
    assert!(cache.peek("page:lamp").is_none());
    assert_eq!(cache.get("page:lamp"), None);
    assert!(matches!(
        cache.lookup("page:lamp").unwrap(),
        Lookup::Lead(_)
    ));
    let m = cache.metrics();
    let t = m.total();
    assert_eq!((t.hits, t.misses), (1, 2));
    assert_eq!(m.tag_invalidations, 1);
    let text = cache.prometheus();
    assert!(
        text.contains("herdless_tag_invalidations_total 1"),
        "{text}"
    );
    assert!(text.contains("herdless_tags 1"));
}

#[test]
fn bad_tags_are_refused_and_duplicates_count_once() {
    let clock = ManualClock::new();
    let cache: Cache<String> = Cache::builder()
        .clock(clock.clone())
        .max_tags_per_entry(2)
        .without_spawner()
        .build()
        .unwrap();
    let set = |tags: Vec<String>| cache.set_with("k", Loaded::value("v".into()).tags(tags));
    assert!(matches!(set(vec![String::new()]), Err(Error::EmptyTag)));
    let long = "t".repeat(MAX_TAG_BYTES + 1);
    assert!(matches!(
        set(vec![long.clone()]),
        Err(Error::TagTooLong { len, max: MAX_TAG_BYTES }) if len == MAX_TAG_BYTES + 1
    ));
    assert!(matches!(
        set(vec!["a".into(), "b".into(), "c".into()]),
        Err(Error::TooManyTags { count: 3, max: 2 })
    ));
    assert!(cache.peek("k").is_none(), "nothing written");
    // A huge list is refused once a third distinct tag shows up, not after comparing every
    // pair of its 200,000 names.
    let huge: Vec<String> = (0..200_000).map(|i| format!("t{i}")).collect();
    assert!(matches!(
        set(huge),
        Err(Error::TooManyTags {
            count: 200_000,
            max: 2
        })
    ));
    set(vec!["a".into(), "b".into(), "a".into()]).unwrap();
    assert_eq!(
        cache.peek("k").unwrap().tags,
        ["a".into(), "b".into()] as [Box<str>; 2]
    );
    assert!(matches!(cache.invalidate_tag(""), Err(Error::EmptyTag)));
    assert!(matches!(
        cache.invalidate_tags(["a", long.as_str()]),
        Err(Error::TagTooLong { .. })
    ));
    assert!(
        cache.peek("k").is_some(),
        "a batch with a bad tag invalidates nothing"
    );
    // A loader's bad tags fail its load; nothing is stored.
    let got = cache.get_or_load_with("j", |_| {
        Ok::<_, OriginDown>(Loaded::value("v".to_string()).tags(["x", "y", "z"]))
    });
    assert!(matches!(got, Err(Error::TooManyTags { .. })));
    assert!(cache.peek("j").is_none());
    assert_eq!(cache.metrics().total().load_errors, 1);
    assert!(matches!(
        cache.set_with("k", Loaded::not_modified()),
        Err(Error::NoPrevious)
    ));
}

#[test]
fn a_retired_tag_record_never_resurrects_its_entries() {
    let clock = ManualClock::new();
    let cache: Cache<String> = Cache::builder()
        .clock(clock.clone())
        .max_tags(2)
        .jitter(0.0)
        .without_spawner()
        .build()
        .unwrap();
    cache
        .set_tagged("page:old", "old".into(), &["t:old"])
        .unwrap();
    cache.set_tagged("page:a", "a".into(), &["t:a"]).unwrap();
    // A third tag retires one record (the clock hand spares each once, then takes t:old).
    cache.set_tagged("page:b", "b".into(), &["t:b"]).unwrap();
    let m = cache.metrics();
    assert_eq!((m.tags, m.retired_tags), (2, 1));
    let gone: Vec<_> = ["page:old", "page:a"]
        .into_iter()
        .filter(|k| cache.peek(k).is_none())
        .collect();
    assert_eq!(
        gone.len(),
        1,
        "exactly the retired tag's entry is a miss: {gone:?}"
    );
    assert!(cache.peek("page:b").is_some());
    // The retired name gets a new record; its old entry stays dead.
    let retired = if gone[0] == "page:old" {
        "t:old"
    } else {
        "t:a"
    };
    cache.set_tagged("page:c", "c".into(), &[retired]).unwrap();
    assert!(
        cache.peek(gone[0]).is_none(),
        "a forgotten tag resurrected its entry"
    );
    assert_eq!(cache.get("page:c"), text("c"));
}

#[test]
fn a_load_racing_a_retired_invalidated_tag_is_not_stored() {
    let clock = ManualClock::new();
    let cache: Cache<String> = Cache::builder()
        .clock(clock.clone())
        .max_tags(1)
        .without_spawner()
        .build()
        .unwrap();
    cache.set_tagged("page:x", "x".into(), &["t:x"]).unwrap();
    let Lookup::Lead(guard) = cache.lookup("page:y").unwrap() else {
        panic!("a miss leads")
    };
    cache.invalidate_tag("t:x").unwrap();
    // Another tag's use retires t:x's record, invalidation stamp and all.
    cache.set_tagged("page:z", "z".into(), &["t:z"]).unwrap();
    assert_eq!(cache.metrics().retired_tags, 1);
    guard
        .complete_loaded(Ok(Loaded::value("old".into()).tag("t:x")))
        .unwrap();
    assert!(
        cache.peek("page:y").is_none(),
        "the forgotten stamp still counts"
    );
}

#[test]
fn a_hundred_thousand_entries_sharing_a_tag_all_drop() {
    let clock = ManualClock::new();
    let cache: Cache<u32> = Cache::builder()
        .clock(clock.clone())
        .capacity(200_000)
        .without_spawner()
        .build()
        .unwrap();
    for i in 0..100_000u32 {
        cache
            .set_tagged(&format!("item:{i}"), i, &["catalog"])
            .unwrap();
    }
    cache.set("other:1", 1).unwrap();
    assert_eq!(cache.metrics().entries, 100_001);
    cache.invalidate_tag("catalog").unwrap();
    assert!((0..100_000u32).all(|i| cache.peek(&format!("item:{i}")).is_none()));
    assert_eq!(cache.get("other:1"), Some(1));
    assert_eq!(cache.metrics().tags, 1);
}

#[test]
fn a_not_modified_answer_keeps_the_tags_unless_it_sets_new_ones() {
    let clock = ManualClock::new();
    let cache: Cache<String> = Cache::builder()
        .clock(clock.clone())
        .ttl(secs(60))
        .max_stale(secs(600))
        .jitter(0.0)
        .beta(0.0)
        .without_spawner()
        .build()
        .unwrap();
    let tags = |c: &Cache<String>| c.peek("page:lamp").map(|p| p.tags);
    let refresh = |answer: Loaded<String>| {
        clock.advance(secs(61));
        cache
            .get_or_load_with("page:lamp", move |ctx| {
                assert!(ctx.previous().is_some_and(|p| p.value == "lamp"));
                Ok::<_, OriginDown>(answer)
            })
            .unwrap()
    };
    cache
        .set_tagged("page:lamp", "lamp".into(), &["product:42"])
        .unwrap();
    refresh(Loaded::not_modified());
    assert_eq!(tags(&cache), Some(vec!["product:42".into()]));
    refresh(Loaded::not_modified().tags(["product:43"]));
    assert_eq!(tags(&cache), Some(vec!["product:43".into()]));
    cache.invalidate_tag("product:42").unwrap();
    assert_eq!(
        cache.get("page:lamp"),
        text("lamp"),
        "the old tag no longer applies"
    );
}

#[test]
fn a_dropped_racing_load_displaces_nothing() {
    let clock = ManualClock::new();
    let cache: Cache<String> = Cache::builder()
        .clock(clock.clone())
        .ttl(secs(60))
        .max_stale(secs(600))
        .jitter(0.0)
        .beta(0.0)
        .without_spawner()
        .build()
        .unwrap();
    cache.set("page:lamp", "v0".into()).unwrap();
    clock.advance(secs(61));
    let Lookup::Lead(guard) = cache.lookup("page:lamp").unwrap() else {
        panic!("an expired entry leads a load")
    };
    cache.invalidate_tag("product:42").unwrap();
    guard
        .complete_loaded(Ok(Loaded::value("v1".into()).tag("product:42")))
        .unwrap();
    let peek = cache
        .peek("page:lamp")
        .expect("the fail-safe copy is still there");
    assert_eq!(
        (peek.value.as_deref(), peek.state),
        (Some("v0"), HitState::FailSafe)
    );
}

#[test]
fn a_long_tag_list_keeps_the_first_of_each_in_order() {
    let clock = ManualClock::new();
    let cache: Cache<String> = Cache::builder()
        .clock(clock.clone())
        .max_tags_per_entry(40)
        .without_spawner()
        .build()
        .unwrap();
    let set = |tags: Vec<String>| cache.set_with("k", Loaded::value("v".into()).tags(tags));
    // 80 names, each of 40 twice: past the short lists that are compared pairwise.
    let names = |distinct: usize| -> Vec<String> {
        (0..distinct)
            .rev()
            .chain(0..distinct)
            .map(|i| format!("t{i}"))
            .collect()
    };
    set(names(40)).unwrap();
    let kept: Vec<Box<str>> = (0..40).rev().map(|i| format!("t{i}").into()).collect();
    assert_eq!(cache.peek("k").unwrap().tags, kept);
    assert!(matches!(
        set(names(41)),
        Err(Error::TooManyTags { count: 82, max: 40 })
    ));
}

#[test]
fn a_huge_invalidation_list_is_deduplicated_without_comparing_every_pair() {
    // What a shared tier checks before stamping: no bound on the count, so 300,000 names
    // (100,000 distinct) read from a request must not cost 300,000^2 / 2 compares.
    let mut names: Vec<Box<str>> = (0..3)
        .flat_map(|_| (0..100_000).map(|i| format!("tag:{i}").into()))
        .collect();
    herdless::driver::check_tags(&mut names, usize::MAX).unwrap();
    assert_eq!(names.len(), 100_000);
    assert!(
        names
            .iter()
            .enumerate()
            .all(|(i, n)| **n == *format!("tag:{i}"))
    );
    let clock = ManualClock::new();
    let cache = cache(&clock);
    shop(&cache);
    let mut many: Vec<String> = (0..200_000).map(|i| format!("other:{i}")).collect();
    many.push("seller:7".into());
    cache.invalidate_tags(&many).unwrap();
    assert_eq!(alive(&cache), ["page:desk", "page:home"]);
}
