//! A small stampede, end to end: the naive herd is real, herdless collapses it to one call.

use std::time::Duration;

use herdless_demo::{Scenario, Strategy, plot, report, run};

fn small() -> Scenario {
    let ms = Duration::from_millis;
    Scenario {
        clients: 300,
        think: ms(10),
        origin: ms(100),
        ttl: ms(400),
        grace: ms(400),
        first_expiry: ms(100),
        duration: ms(1_200),
        out: std::env::temp_dir().join(format!("herdless-demo-{}.svg", std::process::id())),
        strategies: vec![
            Strategy::Naive,
            Strategy::SingleFlight,
            Strategy::StaleWhileRevalidate,
        ],
    }
}

#[test]
fn naive_herds_and_herdless_does_not() {
    let scenario = small();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let results: Vec<_> = scenario
        .strategies
        .iter()
        .map(|s| runtime.block_on(run(*s, &scenario)).unwrap())
        .collect();
    for r in &results {
        assert!(r.errors.is_empty(), "{:?}: {:?}", r.strategy, r.errors);
        assert!(
            r.requests() > 1_000,
            "{:?}: {} requests",
            r.strategy,
            r.requests()
        );
    }
    let [naive, single, swr] = &results[..] else {
        unreachable!()
    };

    // Every client that arrives while the key is missing calls the origin.
    assert!(naive.origin.peak > 10, "naive peak {}", naive.origin.peak);
    assert!(naive.origin.calls > 10 * single.origin.calls);

    // One call at a time, whatever the herd; everybody else waited for it.
    assert_eq!(single.origin.peak, 1);
    assert!(single.origin.calls >= 2, "the key expired at least twice");
    let m = single.metrics.as_ref().unwrap();
    assert!(m.coalesced_waiters > 0);

    // Nobody waits: past the TTL the old value is served while one refresh runs, and it is
    // never older than ttl + grace.
    assert_eq!(swr.origin.peak, 1);
    let m = swr.metrics.as_ref().unwrap();
    assert_eq!(m.misses, 1, "only the warm-up misses");
    assert!(m.stale_served > 0);
    assert!(swr.max_age <= scenario.ttl + scenario.grace);

    let table = report::table(&results);
    assert_eq!(table.lines().count(), 2 + results.len());
    plot::write(&scenario.out, &scenario, &results).unwrap();
    let svg = std::fs::read_to_string(&scenario.out).unwrap();
    let _ = std::fs::remove_file(&scenario.out);
    assert!(svg.starts_with("<svg"));
    for r in &results {
        assert!(svg.contains(r.strategy.name()), "{}", r.strategy.name());
    }
}
