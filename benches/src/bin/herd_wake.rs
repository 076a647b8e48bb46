//! A blocking herd woken at once: N threads (1,000 by default) ask for one key that was just
//! dropped, the loader takes long enough (50 ms) for all of them to be parked on the load,
//! and each thread notes when it has the value. The figure is the wake-up latency of each
//! waiter: the time from the loader returning the value (its publication, give or take the
//! store) to that thread holding it, pooled over every round, as p50 / p90 / p99 / max, and
//! the median over rounds of the last thread's latency (the whole herd served).
//!
//! Contenders, taking turns round by round in a rotating order so they see the same machine
//! load: herdless `get_or_load`, moka `get_with_by_ref`, quick_cache `get_or_insert_with`,
//! and two floors with no cache: `floor_unpark_each` (each thread parks until a flag is set;
//! the publisher sets it and unparks the threads one by one: the cost of waking N threads
//! from one thread) and `std_condvar` (a `Mutex<Option<u64>>` and `Condvar::notify_all`:
//! every woken thread takes the mutex to read the value, the serialised pattern).
//!
//! A thread that arrives after the publication got a hit, not a wake-up: it is counted as
//! `late` and left out of the latencies.
//!
//! `cargo run --release -p herdless-benches --bin herd_wake [threads] [rounds] [load_ms]`

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use herdless::Cache;

const KEY: &str = "herd:key";
const NOT_YET: u64 = u64::MAX;

/// The shared clock of a run: nanoseconds since `base`.
struct Stamps {
    base: Instant,
    /// When the value was published this round (`NOT_YET` before).
    published: AtomicU64,
}

impl Stamps {
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// The loader's last act: the value exists from here on.
    fn publish(&self) {
        self.published.store(self.now(), Ordering::SeqCst);
    }
}

/// One contender: `call` is what each thread runs (`t`: its index), `reset` what runs
/// between rounds while every thread is parked on the barrier.
struct Contender {
    name: &'static str,
    call: Box<dyn Fn(usize) -> u64 + Send + Sync>,
    reset: Box<dyn Fn() + Send + Sync>,
}

/// The floor that wakes threads one by one: the threads of the pool register their handle
/// once; a round's leader (thread 0) sleeps, sets the flag and unparks every other thread.
struct UnparkEach {
    ready: AtomicBool,
    threads: Mutex<Vec<Option<Thread>>>,
}

fn contenders(n: usize, load: Duration, stamps: &Arc<Stamps>) -> Vec<Contender> {
    let herdless: Cache<u64> = Cache::builder()
        .ttl(Duration::from_secs(3600))
        .build()
        .unwrap();
    let moka = moka::sync::Cache::<String, u64>::new(10_000);
    let quick = Arc::new(quick_cache::sync::Cache::<String, u64>::new(10_000));
    let unpark = Arc::new(UnparkEach {
        ready: AtomicBool::new(false),
        threads: Mutex::new(vec![None; n]),
    });
    let condvar = Arc::new((Mutex::new(None::<u64>), Condvar::new()));

    let (h1, m1, q1, u1, c1) = (
        herdless.clone(),
        moka.clone(),
        quick.clone(),
        unpark.clone(),
        condvar.clone(),
    );
    let (s1, s2, s3, s4, s5) = (
        stamps.clone(),
        stamps.clone(),
        stamps.clone(),
        stamps.clone(),
        stamps.clone(),
    );
    vec![
        Contender {
            name: "floor_unpark_each",
            call: Box::new(move |t| {
                let u = &unpark;
                if t == 0 {
                    std::thread::sleep(load);
                    s1.publish();
                    u.ready.store(true, Ordering::Release);
                    for th in u.threads.lock().unwrap().iter().flatten() {
                        th.unpark();
                    }
                } else {
                    let mut slots = u.threads.lock().unwrap();
                    if slots[t].is_none() {
                        slots[t] = Some(std::thread::current());
                    }
                    drop(slots);
                    while !u.ready.load(Ordering::Acquire) {
                        std::thread::park();
                    }
                }
                1
            }),
            reset: Box::new(move || u1.ready.store(false, Ordering::Release)),
        },
        Contender {
            name: "std_condvar",
            call: Box::new(move |t| {
                let (lock, cv) = &*condvar;
                if t == 0 {
                    std::thread::sleep(load);
                    s2.publish();
                    *lock.lock().unwrap() = Some(1);
                    cv.notify_all();
                    return 1;
                }
                let mut v = lock.lock().unwrap();
                loop {
                    if let Some(v) = *v {
                        return v;
                    }
                    v = cv.wait(v).unwrap();
                }
            }),
            reset: Box::new(move || *c1.0.lock().unwrap() = None),
        },
        Contender {
            name: "herdless_get_or_load",
            call: Box::new(move |_| {
                let s = s3.clone();
                herdless
                    .get_or_load(KEY, move || {
                        std::thread::sleep(load);
                        s.publish();
                        Ok::<_, Infallible>(Some(1))
                    })
                    .unwrap()
                    .unwrap()
            }),
            reset: Box::new(move || {
                h1.invalidate(KEY).unwrap();
            }),
        },
        Contender {
            name: "moka_get_with",
            call: Box::new(move |_| {
                moka.get_with_by_ref(KEY, || {
                    std::thread::sleep(load);
                    s4.publish();
                    1
                })
            }),
            reset: Box::new(move || m1.invalidate(KEY)),
        },
        Contender {
            name: "quick_cache_get_or_insert_with",
            call: Box::new(move |_| {
                quick
                    .get_or_insert_with(KEY, || {
                        std::thread::sleep(load);
                        s5.publish();
                        Ok::<_, Infallible>(1)
                    })
                    .unwrap()
            }),
            reset: Box::new(move || {
                q1.remove(KEY);
            }),
        },
    ]
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(nanos: u64) -> f64 {
    nanos as f64 / 1e6
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(1_000, |a| a.parse().expect("threads"));
    let rounds: usize = args.next().map_or(20, |a| a.parse().expect("rounds"));
    let load = Duration::from_millis(args.next().map_or(50, |a| a.parse().expect("load_ms")));

    let stamps = Arc::new(Stamps {
        base: Instant::now(),
        published: AtomicU64::new(NOT_YET),
    });
    let contenders = Arc::new(contenders(n, load, &stamps));
    let current = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(n + 1));
    let done = Arc::new(Barrier::new(n + 1));
    // Per thread: when it arrived and when it had the value, this round.
    let arrived: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let served: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());

    let threads: Vec<_> = (0..n)
        .map(|t| {
            let (contenders, current, stop, start, done, stamps, arrived, served) = (
                contenders.clone(),
                current.clone(),
                stop.clone(),
                start.clone(),
                done.clone(),
                stamps.clone(),
                arrived.clone(),
                served.clone(),
            );
            std::thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    loop {
                        start.wait();
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let c = &contenders[current.load(Ordering::Relaxed)];
                        arrived[t].store(stamps.now(), Ordering::Relaxed);
                        black_box((c.call)(t));
                        served[t].store(stamps.now(), Ordering::Relaxed);
                        done.wait();
                    }
                })
                .unwrap()
        })
        .collect();

    let k = contenders.len();
    let mut latencies: Vec<Vec<u64>> = vec![Vec::new(); k];
    let mut lasts: Vec<Vec<u64>> = vec![Vec::new(); k];
    let mut late = vec![0usize; k];
    // One warm-up round each (thread stacks, the floor's thread handles), then the rounds.
    for round in 0..rounds + 1 {
        for j in 0..k {
            let c = (j + round) % k;
            (contenders[c].reset)();
            stamps.published.store(NOT_YET, Ordering::SeqCst);
            current.store(c, Ordering::Relaxed);
            start.wait();
            done.wait();
            if round == 0 {
                continue;
            }
            let published = stamps.published.load(Ordering::SeqCst);
            assert_ne!(published, NOT_YET, "{}: nobody loaded", contenders[c].name);
            let mut last = 0;
            for t in 0..n {
                if arrived[t].load(Ordering::Relaxed) > published {
                    late[c] += 1;
                    continue;
                }
                let l = served[t].load(Ordering::Relaxed).saturating_sub(published);
                last = last.max(l);
                latencies[c].push(l);
            }
            lasts[c].push(last);
        }
    }
    stop.store(true, Ordering::Relaxed);
    start.wait();
    threads.into_iter().for_each(|t| t.join().unwrap());

    println!(
        "{n} threads, {rounds} rounds, load {} ms: wake-up latency from publication",
        load.as_millis()
    );
    println!("| contender | p50 | p90 | p99 | max | median last | late arrivals |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for c in 0..k {
        let l = &mut latencies[c];
        l.sort_unstable();
        lasts[c].sort_unstable();
        println!(
            "| {} | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} ms | {} |",
            contenders[c].name,
            ms(percentile(l, 0.5)),
            ms(percentile(l, 0.9)),
            ms(percentile(l, 0.99)),
            ms(l.last().copied().unwrap_or(0)),
            ms(percentile(&lasts[c], 0.5)),
            late[c],
        );
    }
}
