//! Benchmarks of herdless live in `benches/`; this library only holds what they share.

/// Keys `"bench:0"`, `"bench:1"`, ... as used by every benchmark.
pub fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("bench:{i}")).collect()
}
