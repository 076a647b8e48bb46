//! Benchmarks of herdless live in `benches/` (criterion) and `src/bin/` (the figures that are
//! not timings: hit ratio, memory per entry, peak RSS); this library holds what they share.

pub mod hit;
pub mod policies;
pub mod traces;
pub mod waiters;
pub mod zipf;

use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Keys `"bench:0"`, `"bench:1"`, ... as used by every benchmark.
pub fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("bench:{i}")).collect()
}

/// A fixed-seed trace of `len` reads over `keys` keys (indices `0..keys`), Zipf-distributed
/// with exponent `alpha`: index 0 is the most popular. The same seed gives every contender
/// the same trace.
pub fn zipf_trace(keys: usize, alpha: f64, len: usize, seed: u64) -> Vec<u32> {
    let zipf = Zipf::new(keys as f64, alpha).expect("valid Zipf parameters");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    // Zipf draws ranks 1..=keys; every contender hashes the key names, so rank order says
    // nothing about where a key lands.
    (0..len).map(|_| zipf.sample(&mut rng) as u32 - 1).collect()
}

/// A criterion measurement of the CPU time of the measuring thread
/// (`CLOCK_THREAD_CPUTIME_ID`) instead of wall time: time the thread spends preempted by
/// other processes on a shared machine is not counted, so single-threaded ratios hold
/// better under load. Cache and TLB pollution by those processes still shows.
pub struct ThreadCpuTime;

fn thread_cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock id exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

static WALL: WallTime = WallTime;

impl Measurement for ThreadCpuTime {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        thread_cpu_now()
    }
    fn end(&self, start: Duration) -> Duration {
        thread_cpu_now().saturating_sub(start)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, d: &Duration) -> f64 {
        d.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        WALL.formatter()
    }
}

/// Peak resident set size of this process so far (`VmHWM` in `/proc/self/status`), bytes.
pub fn peak_rss() -> Option<u64> {
    status_field("VmHWM:")
}

/// Resident set size of this process now (`VmRSS`), bytes.
pub fn rss() -> Option<u64> {
    status_field("VmRSS:")
}

fn status_field(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(name))?;
    let kb: u64 = line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_traces_are_reproducible_and_skewed() {
        let a = zipf_trace(1_000, 1.0, 10_000, 7);
        assert_eq!(a, zipf_trace(1_000, 1.0, 10_000, 7));
        assert!(a.iter().all(|&i| i < 1_000));
        let mut counts = vec![0u32; 1_000];
        a.iter().for_each(|&i| counts[i as usize] += 1);
        counts.sort_unstable_by(|x, y| y.cmp(x));
        // The most popular key of a Zipf(1.0) over 1,000 keys draws about 13% of reads.
        assert!(counts[0] > 800 && counts[0] < 2_000, "{}", counts[0]);
    }
}
