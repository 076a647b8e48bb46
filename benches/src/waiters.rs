//! The contenders of the async herd benchmarks (`miss_load`'s `waiters/async_tasks` and the
//! `herd_async` bin): N tokio tasks ask for one key that was just dropped; the loader
//! sleeps `load`. `floor` is the same round with no cache: the leading task sleeps, the
//! others return at once.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use herdless::Cache;

/// A boxed, sendable future.
pub type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;
/// One caller's call; the flag marks the caller that sleeps in `floor`.
pub type AsyncCall = Arc<dyn Fn(bool) -> Boxed<u64> + Send + Sync>;
/// Drops the key before a round.
pub type AsyncReset = Arc<dyn Fn() -> Boxed<()> + Send + Sync>;

/// `(name, call, reset)` for floor, herdless, quick_cache and moka; call it inside a tokio
/// runtime (moka's future cache wants one).
pub fn async_contenders(
    key: &'static str,
    load: Duration,
    capacity: usize,
) -> Vec<(&'static str, AsyncCall, AsyncReset)> {
    let herdless: Cache<u64> = Cache::builder()
        .ttl(Duration::from_secs(3600))
        .build()
        .unwrap();
    let quick = Arc::new(quick_cache::sync::Cache::<String, u64>::new(capacity));
    let moka = moka::future::Cache::<String, u64>::new(capacity as u64);
    let (h1, q1, m1) = (herdless.clone(), quick.clone(), moka.clone());
    vec![
        (
            "floor",
            Arc::new(move |leader| {
                Box::pin(async move {
                    if leader {
                        tokio::time::sleep(load).await;
                    }
                    1
                })
            }),
            Arc::new(|| Box::pin(async {})),
        ),
        (
            "herdless_get_or_load_async",
            Arc::new(move |_| {
                let h = herdless.clone();
                Box::pin(async move {
                    h.get_or_load_async(key, move || async move {
                        tokio::time::sleep(load).await;
                        Ok::<_, Infallible>(Some(1))
                    })
                    .await
                    .unwrap()
                    .unwrap()
                })
            }),
            Arc::new(move || {
                h1.invalidate(key).unwrap();
                Box::pin(async {})
            }),
        ),
        (
            "quick_cache_get_or_insert_async",
            Arc::new(move |_| {
                let q = quick.clone();
                Box::pin(async move {
                    q.get_or_insert_async(key, async {
                        tokio::time::sleep(load).await;
                        Ok::<_, Infallible>(1)
                    })
                    .await
                    .unwrap()
                })
            }),
            Arc::new(move || {
                q1.remove(key);
                Box::pin(async {})
            }),
        ),
        (
            "moka_future_get_with",
            Arc::new(move |_| {
                let m = moka.clone();
                Box::pin(async move {
                    m.get_with_by_ref(key, async {
                        tokio::time::sleep(load).await;
                        1
                    })
                    .await
                })
            }),
            Arc::new(move || {
                let m = m1.clone();
                Box::pin(async move { m.invalidate(key).await })
            }),
        ),
    ]
}
