//! The oracle of the soak tests (core/tests/soak.rs on memory, redis/tests/soak.rs on Redis):
//! an origin that versions every key, and the checks every value read must pass.
//!
//! ## The model
//!
//! The origin holds a version per key, starting at 1. A writer changes a key by raising its
//! version and then telling the cache (`set` the new version, or `invalidate`), or not
//! telling it at all (the origin changed behind the cache's back: only expiry bounds how
//! long the old version is served), or changes a whole namespace by raising every key's
//! version and then `bump`ing it. Writers of one
//! key are serialised (a per-key lock), as a database row would serialise them, so "the
//! version the origin last wrote" is well defined. The origin records, for each version,
//! when it stopped being current (`superseded_at`; never, for the current one).
//!
//! A loader reads the key's current version at some moment during the load. Some loads
//! fail, and some outlast the hard timeout (their results are discarded).
//!
//! Every value a read returns, version `v` of key `k`, read by a call that started at
//! `t0`, is checked:
//!
//! 1. **Staleness bound.** `v` was current at most `bound` before `t0`, i.e.
//!    `superseded_at(k, v) >= t0 - bound`, with `bound = ttl * (1 + j/2) +
//!    max(grace, max_stale) + hard_timeout (+ the tier's own slack)`: a value is written to
//!    the cache no later than the end of its load (at most `hard_timeout` after it read the
//!    origin), is fresh for at most `ttl * (1 + j/2)` and then served stale for at most
//!    `grace`, or as a fail-safe value up to `max_stale` past its TTL. A read returns
//!    within the call, after `t0`, so testing against `t0` never blames the cache for the
//!    test's own scheduling delays.
//! 2. **Ordering.** A read that starts after a `set`, `invalidate` or `bump` of its key
//!    *returned* (in the same process: another process learns of it by notification)
//!    returns a version at least as new as the one that write made current. (Fail-safe
//!    values are entries of the key still in the cache; a write removes or replaces them,
//!    so this holds for them too.)
//! 3. **Origin truth.** A version is never one the origin did not write (never above the
//!    key's current version at the end of the read).
//!
//! `superseded_at` is kept for the last [`RING`] versions of each key (memory stays
//! constant however long the soak runs); a version older than that was superseded before
//! the oldest one kept, which proves a violation when even that one is out of bounds, and
//! is counted as `unverifiable` otherwise (the soak asserts there are none).

#![allow(dead_code)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Versions of a key whose supersession time is kept.
pub const RING: usize = 64;

struct KeyState {
    /// The current version.
    current: u64,
    /// `superseded_at[v % RING]` for the last RING versions below `current`, as nanoseconds
    /// since the origin's start.
    superseded_at: [u64; RING],
}

/// The versioned origin and the checker.
pub struct Origin {
    start: Instant,
    keys: Vec<Mutex<KeyState>>,
    /// Per key: the version the last `set`/`invalidate`/`bump` made current, raised once the
    /// cache call returned (per process; index by `floor_index`).
    floors: Vec<AtomicU64>,
    processes: usize,
    pub loads: AtomicU64,
    pub reads_checked: AtomicU64,
    pub violations: AtomicU64,
    pub unverifiable: AtomicU64,
    first_violation: Mutex<Option<String>>,
}

impl Origin {
    pub fn new(keys: usize, processes: usize) -> Self {
        Self {
            start: Instant::now(),
            keys: (0..keys)
                .map(|_| {
                    Mutex::new(KeyState {
                        current: 1,
                        superseded_at: [0; RING],
                    })
                })
                .collect(),
            floors: (0..keys * processes).map(|_| AtomicU64::new(0)).collect(),
            processes,
            loads: AtomicU64::new(0),
            reads_checked: AtomicU64::new(0),
            violations: AtomicU64::new(0),
            unverifiable: AtomicU64::new(0),
            first_violation: Mutex::new(None),
        }
    }

    pub fn keys(&self) -> usize {
        self.keys.len()
    }

    /// Nanoseconds since the origin started.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// What a loader reads.
    pub fn read(&self, k: usize) -> u64 {
        self.loads.fetch_add(1, Ordering::Relaxed);
        self.keys[k].lock().unwrap().current
    }

    /// Writes key `k`: raises its version, runs `tell_cache` (set / invalidate) with the new
    /// version while holding the key's write lock, and, when the cache call succeeded,
    /// raises the floor of `process`.
    pub fn write(&self, process: usize, k: usize, tell_cache: impl FnOnce(u64) -> bool) {
        let mut st = self.keys[k].lock().unwrap();
        let old = st.current;
        st.superseded_at[(old as usize) % RING] = self.now();
        st.current = old + 1;
        if tell_cache(old + 1) {
            self.floors[k * self.processes + process].fetch_max(old + 1, Ordering::AcqRel);
        }
    }

    /// Writes every key of `keys` (a namespace), then runs `bump` once with all of them
    /// locked.
    pub fn write_all(&self, process: usize, keys: &[usize], bump: impl FnOnce() -> bool) {
        let mut locked: Vec<_> = keys
            .iter()
            .map(|&k| (k, self.keys[k].lock().unwrap()))
            .collect();
        let now = self.now();
        for (_, st) in locked.iter_mut() {
            let old = st.current;
            st.superseded_at[(old as usize) % RING] = now;
            st.current = old + 1;
        }
        if bump() {
            for (k, st) in &locked {
                self.floors[k * self.processes + process].fetch_max(st.current, Ordering::AcqRel);
            }
        }
    }

    /// The floor a read of `k` in `process` starting now must respect.
    pub fn floor(&self, process: usize, k: usize) -> u64 {
        self.floors[k * self.processes + process].load(Ordering::Acquire)
    }

    /// Checks version `v` of key `k`, read by a call that started at `t0` (from
    /// [`now`](Self::now)) with `floor` (from [`floor`](Self::floor), taken before the call).
    pub fn check(&self, k: usize, v: u64, t0: u64, floor: u64, bound: Duration) {
        self.reads_checked.fetch_add(1, Ordering::Relaxed);
        let bound = bound.as_nanos() as u64;
        let st = self.keys[k].lock().unwrap();
        let fail = |why: String| {
            self.violations.fetch_add(1, Ordering::Relaxed);
            let mut first = self.first_violation.lock().unwrap();
            if first.is_none() {
                *first = Some(why);
            }
        };
        if v == 0 || v > st.current {
            return fail(format!(
                "key {k}: version {v} was never written (current {})",
                st.current
            ));
        }
        if v < floor {
            return fail(format!(
                "key {k}: version {v} read after a write of version {floor} returned"
            ));
        }
        if v == st.current {
            return; // still current
        }
        let oldest_kept = st.current.saturating_sub(RING as u64).max(1);
        let limit = t0.saturating_sub(bound);
        if v >= oldest_kept {
            let at = st.superseded_at[(v as usize) % RING];
            if at < limit {
                fail(format!(
                    "key {k}: version {v} superseded {} ms before the read began; bound {} ms",
                    (t0 - at) / 1_000_000,
                    bound / 1_000_000
                ));
            }
        } else if st.superseded_at[(oldest_kept as usize) % RING] < limit {
            fail(format!(
                "key {k}: version {v} is older than {oldest_kept}, itself out of bounds"
            ));
        } else {
            self.unverifiable.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn first_violation(&self) -> Option<String> {
        self.first_violation.lock().unwrap().clone()
    }
}

/// Resident set size of this process, in bytes (Linux; 0 elsewhere).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The soak's length: `HERDLESS_SOAK_SECONDS`, else `default`.
pub fn soak_duration(default: u64) -> Duration {
    Duration::from_secs(
        std::env::var("HERDLESS_SOAK_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}

/// A small xorshift for the workers (no shared state, no dependency).
pub struct Rand(pub u64);

impl Rand {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A key index skewed towards the low keys (a hot set), as real traffic is.
    pub fn skewed(&mut self, n: usize) -> usize {
        let a = self.below(n as u64);
        let b = self.below(n as u64);
        a.min(b) as usize
    }
}

/// The origin's error in the soak.
#[derive(Debug)]
pub struct LoadFailed;

impl std::fmt::Display for LoadFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("origin failed")
    }
}

impl std::error::Error for LoadFailed {}

/// The soak's loader of key `k` for a draw `roll` in 0..100: 5 % fail, 2 % outlast the
/// hard timeout, the rest take 0-2 ms.
pub fn loader(
    origin: std::sync::Arc<Origin>,
    k: usize,
    roll: u64,
) -> impl FnOnce() -> Result<Option<u64>, LoadFailed> {
    move || {
        let sleep = match roll {
            0..5 => return Err(LoadFailed),
            5..7 => 200,
            _ => roll % 3,
        };
        std::thread::sleep(Duration::from_millis(sleep));
        Ok(Some(origin.read(k)))
    }
}
