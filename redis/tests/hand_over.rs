//! `wait_timeout` through the fleet engine counts from a caller's first arrival, however many
//! leaders go away: five leaders cancelled 0.9 s apart (each one's fleet lock handed back,
//! a waiter taking the load over), two callers arriving at each hand-over, in two processes
//! (the other process's callers wait for the fleet lock); every caller is answered with a
//! timeout `wait_timeout` after its own arrival: not later (after the last hand-over), and
//! not earlier (when the caller it waited on in its process gave up). Real time, on the
//! in-memory tier (the same engine as on Redis).

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use herdless::driver::Timer;
use herdless::{Clock, Error, SystemClock};
use herdless_redis::memory::MemoryStore;
use herdless_redis::{Json, TieredCache, block_on};

const KEY: &str = "report:1";
const WAIT: Duration = Duration::from_secs(1);
/// How late an answer may come on a busy machine; the old per-hand-over deadline answered
/// 0.9 s late at least.
const SLACK: Duration = Duration::from_millis(400);

/// A cancel switch for one caller's future: once thrown, the future is dropped (as a
/// client that disconnects drops its request).
#[derive(Default)]
struct Cancel {
    thrown: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Cancel {
    fn throw(&self) {
        self.thrown.store(true, Ordering::SeqCst);
        if let Some(w) = self.waker.lock().unwrap().take() {
            w.wake();
        }
    }
}

/// `fut`, or `None` once `cancel` is thrown (then `fut` is dropped with this future).
async fn cancellable<F: Future>(fut: F, cancel: Arc<Cancel>) -> Option<F::Output> {
    let mut fut = pin!(fut);
    std::future::poll_fn(move |cx| {
        *cancel.waker.lock().unwrap() = Some(cx.waker().clone());
        if cancel.thrown.load(Ordering::SeqCst) {
            return Poll::Ready(None);
        }
        fut.as_mut().poll(cx).map(Some)
    })
    .await
}

/// Sleeps `d` of real time without blocking the task's thread (so it can be cancelled).
async fn sleep(d: Duration) {
    let at = SystemClock.now() + d;
    let mut timer = Timer::default();
    std::future::poll_fn(|cx| timer.poll_at(&SystemClock, at, cx)).await
}

/// When a caller called, and when and with what it was answered (`None`: cancelled).
type Answered = (Instant, Instant, Option<Result<Option<String>, Error>>);

struct Caller {
    cancel: Arc<Cancel>,
    thread: JoinHandle<Answered>,
}

#[test]
fn five_leaders_cancelled_in_turn_do_not_stretch_a_callers_wait() {
    let store = MemoryStore::new();
    let process = || -> TieredCache<String, Json> {
        TieredCache::builder(store.backend().build().unwrap(), Json)
            .wait_timeout(WAIT)
            .build()
            .unwrap()
    };
    let caches = [process(), process()];
    // The caller whose loader runs now: the leader to cancel next.
    let leading: Arc<Mutex<Option<usize>>> = Arc::default();
    let mut callers: Vec<Caller> = Vec::new();
    let arrive = |callers: &mut Vec<Caller>, n: usize| {
        for _ in 0..n {
            let (i, cancel) = (callers.len(), Arc::new(Cancel::default()));
            let cache = caches[i % caches.len()].clone();
            let (leading, c) = (leading.clone(), cancel.clone());
            let thread = std::thread::spawn(move || {
                let loader = move || async move {
                    *leading.lock().unwrap() = Some(i);
                    sleep(Duration::from_secs(30)).await;
                    Ok::<_, std::io::Error>(Some("never".to_string()))
                };
                let arrived = Instant::now();
                let answer = block_on(cancellable(cache.get_or_load_async(KEY, loader), c));
                (arrived, Instant::now(), answer.unwrap())
            });
            callers.push(Caller { cancel, thread });
        }
    };
    let started = Instant::now();
    arrive(&mut callers, 10);
    let mut cancelled = Vec::new();
    for round in 1..=5u32 {
        std::thread::sleep((started + Duration::from_millis(900) * round) - Instant::now());
        let leader = leading.lock().unwrap().take().expect("a caller leads");
        callers[leader].cancel.throw();
        cancelled.push(leader);
        arrive(&mut callers, 2);
    }
    std::thread::sleep(WAIT + SLACK);
    let last = leading.lock().unwrap().take();
    if let Some(i) = last {
        callers[i].cancel.throw();
    }
    for (i, c) in callers.into_iter().enumerate() {
        let (arrived, answered, answer) = c.thread.join().unwrap();
        if cancelled.contains(&i) || Some(i) == last {
            continue;
        }
        let waited = answered - arrived;
        match answer {
            Some(Err(Error::WaitTimeout { .. })) => assert!(
                waited >= WAIT - Duration::from_millis(10) && waited <= WAIT + SLACK,
                "caller {i} was answered {waited:?} after it arrived"
            ),
            other => panic!("caller {i} got {other:?} after {waited:?}"),
        }
    }
    let loads: u64 = caches.iter().map(|c| c.l1().metrics().total().loads).sum();
    assert_eq!(loads, 6, "one loader call per leader, none by a waiter");
}

#[test]
fn a_process_that_takes_a_load_over_gets_its_own_hard_timeout() {
    // Process A leads and its loader fails after 300 ms; process B, arriving 100 ms in,
    // waits for A's fleet lock, then leads itself with a loader of 250 ms. The hard timeout
    // (400 ms) bounds a load: B's runs from when B's loader starts (~300 ms), not from
    // when B arrived, so B is answered with its value, not `LoadTimeout` at ~500 ms.
    let store = MemoryStore::new();
    let process = || -> TieredCache<String, Json> {
        TieredCache::builder(store.backend().build().unwrap(), Json)
            .hard_timeout(Duration::from_millis(400))
            .wait_timeout(Duration::from_secs(5))
            .build()
            .unwrap()
    };
    let (a, b) = (process(), process());
    let leader = std::thread::spawn(move || {
        block_on(a.get_or_load_async("k:1", || async {
            sleep(Duration::from_millis(300)).await;
            Err::<Option<String>, _>(std::io::Error::other("origin down"))
        }))
    });
    std::thread::sleep(Duration::from_millis(100));
    let began = Instant::now();
    let got = block_on(b.get_or_load_async("k:1", || async {
        sleep(Duration::from_millis(250)).await;
        Ok::<_, std::io::Error>(Some("b".to_string()))
    }))
    .unwrap();
    let took = began.elapsed();
    assert!(matches!(leader.join().unwrap(), Ok(Err(_))));
    assert!(
        matches!(&got, Ok(Some(v)) if v == "b"),
        "{got:?} after {took:?}"
    );
    assert!(
        took >= Duration::from_millis(350),
        "B led before A failed: {took:?}"
    );
}
