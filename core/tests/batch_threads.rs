//! Batch loads (`get_or_load_many`) on threads: concurrent batches sharing keys never wait
//! on each other, load each key once, and a loader's panic reaches every waiter.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use herdless::{Cache, Error};

fn key(n: usize) -> String {
    format!("p:{n}")
}

fn value_of(key: &str) -> u64 {
    key[2..].parse::<u64>().unwrap() * 10
}

type Found = HashMap<String, Option<u64>>;

#[test]
fn twenty_threads_of_fifty_keys_each_load_every_key_once() {
    let cache = Cache::<u64>::builder()
        .ttl(Duration::from_secs(600))
        .build()
        .unwrap();
    let per_key = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let calls = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(20));
    let threads: Vec<_> = (0..20)
        .map(|c| {
            let (cache, per_key, calls, start) =
                (cache.clone(), per_key.clone(), calls.clone(), start.clone());
            thread::spawn(move || {
                // Every other caller asks in reverse order: batches that share keys in
                // opposite orders must not wait on each other.
                let mut keys: Vec<_> = (0..50).map(|j| key((c * 5 + j) % 100)).collect();
                if c % 2 == 1 {
                    keys.reverse();
                }
                start.wait();
                let answers = cache.get_or_load_many(&keys, move |misses: &[String]| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let mut seen = per_key.lock().unwrap();
                    for k in misses {
                        *seen.entry(k.clone()).or_default() += 1;
                    }
                    drop(seen);
                    thread::sleep(Duration::from_millis(20));
                    Ok::<_, std::io::Error>(
                        misses
                            .iter()
                            .map(|k| (k.clone(), Some(value_of(k))))
                            .collect::<Found>(),
                    )
                });
                for (k, a) in keys.iter().zip(answers) {
                    assert_eq!(a.unwrap(), Some(value_of(k)), "{k}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let per_key = per_key.lock().unwrap();
    assert_eq!(per_key.len(), 100);
    assert!(
        per_key.values().all(|&n| n == 1),
        "each key loaded once: {per_key:?}"
    );
    assert!(calls.load(Ordering::SeqCst) <= 20);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}

#[test]
fn a_panicking_loader_fails_its_waiters_and_is_re_raised() {
    let cache = Cache::<u64>::new();
    let (started, in_loader) = mpsc::channel();
    let (release, go) = mpsc::channel::<()>();
    let go = Mutex::new(go);
    let batch = {
        let cache = cache.clone();
        thread::spawn(move || {
            catch_unwind(AssertUnwindSafe(|| {
                cache.get_or_load_many(
                    [key(1), key(2)],
                    move |_: &[String]| -> Result<Found, Error> {
                        started.send(()).unwrap();
                        go.lock().unwrap().recv().unwrap();
                        panic!("the origin client broke")
                    },
                )
            }))
        })
    };
    in_loader.recv().unwrap();
    let waiter = {
        let cache = cache.clone();
        thread::spawn(move || cache.get_or_load(&key(2), || Ok::<_, Error>(Some(0))))
    };
    // The waiter is parked on key 2's flight before the loader panics.
    while cache.metrics().total().coalesced_waiters == 0 {
        thread::sleep(Duration::from_millis(1));
    }
    release.send(()).unwrap();
    assert!(batch.join().unwrap().is_err(), "the panic is re-raised");
    match waiter.join().unwrap() {
        Err(Error::LoaderPanicked { message }) => {
            assert_eq!(message.as_deref(), Some("the origin client broke"));
        }
        other => panic!("the waiter got {other:?}"),
    }
    let again = cache.get_or_load_many([key(1)], |keys: &[String]| {
        Ok::<_, Error>(keys.iter().map(|k| (k.clone(), Some(1))).collect::<Found>())
    });
    assert_eq!(
        again[0].as_ref().unwrap(),
        &Some(1),
        "the next call loads again"
    );
}

#[test]
fn a_failing_loader_answers_its_typed_error_for_each_missing_key() {
    let cache = Cache::<u64>::new();
    cache.set("p:1", 10).unwrap();
    let answers = cache.get_or_load_many(["p:1", "p:2", "p:3"], |_: &[String]| {
        Err::<Found, _>(std::io::Error::other("database down"))
    });
    assert_eq!(answers[0].as_ref().unwrap(), &Some(10));
    for a in &answers[1..] {
        match a {
            Err(Error::Load(e)) => assert_eq!(e.to_string(), "database down"),
            other => panic!("{other:?}"),
        }
    }
}
