//! `HL_MODE=batch`: at `HL_START_AT_MS`, `HL_CALLERS` concurrent batches
//! (`get_or_load_many_async`), caller `c` of process `HL_INDEX` asking for the 50 keys
//! `<HL_KEY>:<n>`, n = (HL_INDEX * HL_CALLERS + c) * 5 + j mod 100, j < 50 (neighbours
//! share 45). The loader sleeps `HL_LOADER_MS` and counts each key it loads with HINCRBY
//! on the hash `HL_COUNTER`. Prints `RESULT calls=.. ok=.. wrong=.. err=..` (`wrong`:
//! answers that are not the key's value).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herdless_redis::{RedisBackend, now_ms};

use super::{env, num, setup};

pub fn run(backend: RedisBackend, key: String, lease: Duration, wait: Duration) {
    let callers = num("HL_CALLERS", 5) as usize;
    let index = num("HL_INDEX", 0) as usize;
    let loader_ms = num("HL_LOADER_MS", 100);
    let start_at = num("HL_START_AT_MS", now_ms());
    let counter = env("HL_COUNTER").expect("HL_COUNTER");
    let (cache, rt) = setup(&backend, lease, wait);
    let calls = Arc::new(AtomicU64::new(0));
    let answers = rt.block_on(async {
        std::thread::sleep(Duration::from_millis(start_at.saturating_sub(now_ms())));
        let tasks: Vec<_> = (0..callers)
            .map(|c| {
                let keys: Vec<String> = (0..50)
                    .map(|j| format!("{key}:{}", ((index * callers + c) * 5 + j) % 100))
                    .collect();
                let (cache, calls, counter, backend) = (
                    cache.clone(),
                    calls.clone(),
                    counter.clone(),
                    backend.clone(),
                );
                tokio::spawn(async move {
                    let loader = move |asked: Vec<String>| {
                        let (calls, counter, backend) =
                            (calls.clone(), counter.clone(), backend.clone());
                        async move {
                            calls.fetch_add(1, Ordering::SeqCst);
                            for k in &asked {
                                let mut incr = redis::cmd("HINCRBY");
                                incr.arg(&counter).arg(k).arg(1);
                                backend.query::<i64>(incr).await?;
                            }
                            tokio::time::sleep(Duration::from_millis(loader_ms)).await;
                            Ok::<_, herdless_redis::Error>(
                                asked
                                    .iter()
                                    .map(|k| (k.clone(), Some(format!("v-{k}"))))
                                    .collect::<Vec<_>>(),
                            )
                        }
                    };
                    let got = cache.get_or_load_many_async(&keys, loader).await;
                    keys.into_iter().zip(got).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.extend(t.await.expect("caller task"));
        }
        out
    });
    let (mut ok, mut wrong, mut errors) = (0, 0, Vec::new());
    for (k, a) in &answers {
        match a {
            Ok(Some(v)) if *v == format!("v-{k}") => ok += 1,
            Ok(_) => wrong += 1,
            Err(e) => errors.push(format!("{k}: {e}")),
        }
    }
    println!(
        "RESULT calls={} ok={ok} wrong={wrong} err={} first_error={:?}",
        calls.load(Ordering::SeqCst),
        errors.len(),
        errors.first()
    );
}
