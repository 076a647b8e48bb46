//! N tokio tasks (5,000 by default) on one flight, the contenders taking turns round by
//! round in a rotating order so they see the same machine load (criterion's
//! `waiters/async_tasks` runs each contender for seconds on end, and the machine's load
//! moves in between). A round: the key is dropped, N tasks are spawned on a 2-worker
//! runtime and all ask for it, the loader sleeps 1 ms; the time is until every task has
//! the value. Reported per contender: the lowest, median and 90th-percentile round, the
//! median over rounds of its ratio to moka's time in the same round, and the median CPU time
//! of the process per round (both workers and any helper thread, such as the timer thread:
//! the work done, which the machine's load moves less than the wall time).
//!
//! `cargo run --release -p herdless-benches --bin herd_async [tasks] [rounds]`

use std::hint::black_box;
use std::time::{Duration, Instant};

use herdless_benches::waiters::async_contenders;

/// CPU time of the whole process so far.
fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock id exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(5_000, |a| a.parse().expect("tasks"));
    let rounds: usize = args.next().map_or(100, |a| a.parse().expect("rounds"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let contenders = {
        let _in_runtime = rt.enter();
        async_contenders("herd:key", Duration::from_millis(1), 10_000)
    };
    let k = contenders.len();
    let moka = contenders
        .iter()
        .position(|(name, _, _)| name.starts_with("moka"))
        .unwrap();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); k];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); k];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); k];
    // The first rounds warm up (allocator, runtime, caches) and are not counted.
    let warm = 5;
    for round in 0..rounds + warm {
        let mut this = vec![0.0; k];
        let mut this_cpu = vec![0.0; k];
        for j in 0..k {
            let c = (j + round) % k;
            let (_, call, reset) = &contenders[c];
            rt.block_on(reset());
            let began = Instant::now();
            let cpu_began = process_cpu();
            rt.block_on(async {
                let tasks: Vec<_> = (0..n).map(|t| tokio::spawn(call(t == 0))).collect();
                for t in tasks {
                    black_box(t.await.unwrap());
                }
            });
            this[c] = began.elapsed().as_secs_f64() * 1e3;
            this_cpu[c] = (process_cpu() - cpu_began).as_secs_f64() * 1e3;
        }
        if round >= warm {
            for c in 0..k {
                times[c].push(this[c]);
                ratios[c].push(this[c] / this[moka]);
                cpu[c].push(this_cpu[c]);
            }
        }
    }
    println!("{n} tokio tasks on one flight, 2 workers, load 1 ms, {rounds} rounds");
    println!("| contender | lowest | median | p90 | median ratio to moka | median CPU |");
    println!("|---|---:|---:|---:|---:|---:|");
    for c in 0..k {
        let t = &mut times[c];
        println!(
            "| {} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2}x | {:.2} ms |",
            contenders[c].0,
            percentile(t, 0.0),
            percentile(t, 0.5),
            percentile(t, 0.9),
            percentile(&mut ratios[c], 0.5),
            percentile(&mut cpu[c], 0.5),
        );
    }
}
