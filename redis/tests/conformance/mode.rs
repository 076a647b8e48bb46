//! How the runner calls a cache: blocking (each caller a thread, loaders that block) or
//! async (each caller a task of a tokio runtime, loaders that await), so that every
//! scenario checks both of the Rust drivers of the call machine.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herdless::{Error, LoadContext, Loaded};
use serde_json::{Value, json};

use super::{Answer, Cache, loaded, ms, strings};

/// What a loader's context said: `{"reason", "previous", "meta"}` (checked by
/// `expect_context`).
pub type Seen = Arc<Mutex<Option<Value>>>;

/// The driver a scenario is played with.
pub enum Mode {
    /// The blocking API, a thread per caller.
    Blocking,
    /// The async API on a tokio runtime, a task per caller.
    Tokio(tokio::runtime::Runtime),
}

/// A caller started by a `load` step.
pub enum Caller {
    Thread(std::thread::JoinHandle<(Answer, Instant)>),
    Task(tokio::task::JoinHandle<(Answer, Instant)>),
}

impl Mode {
    /// The async mode.
    pub fn tokio() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        Mode::Tokio(rt)
    }

    /// The mode's name, in the runner's messages.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Blocking => "blocking",
            Mode::Tokio(_) => "tokio",
        }
    }

    /// Runs `f`'s future to its end (async mode) or calls its blocking twin.
    fn run<T>(&self, blocking: impl FnOnce() -> T, fut: impl std::future::Future<Output = T>) -> T {
        match self {
            Mode::Blocking => blocking(),
            Mode::Tokio(rt) => rt.block_on(fut),
        }
    }

    /// A `get_or_load` step: its loader counts itself, tells `seen` its context, takes the
    /// step's `ms`, then answers `value` (shaped by `answer`) or fails with `fail`.
    pub fn call(
        &self,
        cache: &Cache,
        step: &Value,
        loads: &Arc<AtomicUsize>,
        seen: &Seen,
    ) -> Answer {
        let key = step["key"].as_str().expect("key").to_owned();
        let load = Load::of(step, loads, seen);
        match self {
            Mode::Blocking => cache.get_or_load_with(&key, move |ctx| {
                std::thread::sleep(load.begin(&ctx));
                load.answer()
            }),
            Mode::Tokio(rt) => rt.block_on(call_async(cache.clone(), key, load)),
        }
    }

    /// A batch call (`get_or_load_many`): its loader answers each key it is asked for with
    /// the key's entry in `values` (`null`: absent), omits the keys `values` lacks, or
    /// fails. The answer is the array of values in the keys' order (`null` for an
    /// absence), or the first key's error.
    pub fn call_many(&self, cache: &Cache, step: &Value, loads: &Arc<AtomicUsize>) -> Answer {
        let many = LoadMany::of(step, loads);
        match self {
            Mode::Blocking => {
                let keys = many.keys.clone();
                let answers = cache.get_or_load_many(&keys, move |asked: &[String]| {
                    std::thread::sleep(many.begin());
                    many.answer(asked)
                });
                gathered(answers)
            }
            Mode::Tokio(rt) => rt.block_on(call_many_async(cache.clone(), many)),
        }
    }

    /// Starts `callers` concurrent calls of a `load` / `load_many` step: threads, or tasks
    /// of the runtime.
    pub fn start(
        self: &Arc<Self>,
        cache: &Cache,
        step: &Value,
        loads: &Arc<AtomicUsize>,
    ) -> Vec<Caller> {
        let many = step["op"] == "load_many";
        let callers = step["callers"].as_u64().unwrap_or(1);
        (0..callers)
            .map(|_| match &**self {
                Mode::Blocking => {
                    let (p, step, loads, mode) =
                        (cache.clone(), step.clone(), loads.clone(), self.clone());
                    Caller::Thread(std::thread::spawn(move || {
                        let got = match many {
                            true => mode.call_many(&p, &step, &loads),
                            false => mode.call(&p, &step, &loads, &Seen::default()),
                        };
                        (got, Instant::now())
                    }))
                }
                Mode::Tokio(rt) => {
                    let p = cache.clone();
                    let got: std::pin::Pin<Box<dyn std::future::Future<Output = Answer> + Send>> =
                        match many {
                            true => Box::pin(call_many_async(p, LoadMany::of(step, loads))),
                            false => {
                                let key = step["key"].as_str().expect("key").to_owned();
                                Box::pin(call_async(
                                    p,
                                    key,
                                    Load::of(step, loads, &Seen::default()),
                                ))
                            }
                        };
                    Caller::Task(rt.spawn(async move { (got.await, Instant::now()) }))
                }
            })
            .collect()
    }

    /// The answer of a started caller, and when it came.
    pub fn join(&self, caller: Caller) -> (Answer, Instant) {
        match (self, caller) {
            (_, Caller::Thread(h)) => h.join().expect("caller"),
            (Mode::Tokio(rt), Caller::Task(h)) => rt.block_on(h).expect("caller"),
            (Mode::Blocking, Caller::Task(_)) => unreachable!("a task of the async mode"),
        }
    }

    pub fn get(&self, p: &Cache, key: &str) -> Answer {
        self.run(|| p.get(key), p.get_async(key))
    }

    pub fn set(&self, p: &Cache, key: &str, value: Value, tags: Option<Vec<String>>) -> Answer {
        let r = match tags {
            Some(tags) => {
                let l = Loaded::value(value).tags(tags);
                self.run(
                    || p.set_with(key, l.clone()),
                    p.set_with_async(key, l.clone()),
                )
            }
            None => self.run(
                || p.set(key, value.clone()),
                p.set_async(key, value.clone()),
            ),
        };
        r.map(|()| None)
    }

    pub fn tags(&self, p: &Cache, tags: &[&str], soft: bool) -> Answer {
        let r = match soft {
            true => self.run(|| p.expire_tags(tags), p.expire_tags_async(tags)),
            false => self.run(|| p.invalidate_tags(tags), p.invalidate_tags_async(tags)),
        };
        r.map(|()| None)
    }

    pub fn invalidate(&self, p: &Cache, key: &str) -> Answer {
        self.run(|| p.invalidate(key), p.invalidate_async(key))
            .map(|_| None)
    }

    pub fn bump(&self, p: &Cache, ns: &str) -> Answer {
        self.run(|| p.bump(ns), p.bump_async(ns)).map(|_| None)
    }
}

/// A loader of a `get_or_load` step, in either mode.
struct Load {
    loads: Arc<AtomicUsize>,
    seen: Seen,
    value: Value,
    answer: Value,
    fail: Value,
    took: Duration,
}

impl Load {
    fn of(step: &Value, loads: &Arc<AtomicUsize>, seen: &Seen) -> Self {
        Self {
            loads: loads.clone(),
            seen: seen.clone(),
            value: step["value"].clone(),
            answer: step["answer"].clone(),
            fail: step["fail"].clone(),
            took: ms(step, "ms"),
        }
    }

    /// Counts the call and records its context; how long it takes.
    fn begin(&self, ctx: &LoadContext<Value>) -> Duration {
        self.loads.fetch_add(1, Ordering::SeqCst);
        let previous = ctx.previous();
        *self.seen.lock().unwrap() = Some(json!({
            "reason": ctx.reason().as_str(),
            "previous": previous.map_or(Value::Null, |p| p.value.clone()),
            "meta": previous.and_then(|p| p.meta.as_deref()),
        }));
        self.took
    }

    fn answer(self) -> Result<Loaded<Value>, std::io::Error> {
        match self.fail.as_str() {
            Some(m) => Err(std::io::Error::other(m.to_owned())),
            None => Ok(loaded(self.value, &self.answer)),
        }
    }
}

async fn call_async(cache: Cache, key: String, load: Load) -> Answer {
    cache
        .get_or_load_with_async(&key, move |ctx| {
            let took = load.begin(&ctx);
            async move {
                tokio::time::sleep(took).await;
                load.answer()
            }
        })
        .await
}

async fn call_many_async(cache: Cache, many: LoadMany) -> Answer {
    let keys = many.keys.clone();
    let many = Arc::new(many);
    let answers = cache
        .get_or_load_many_async(&keys, move |asked: Vec<String>| {
            let many = many.clone();
            async move {
                tokio::time::sleep(many.begin()).await;
                many.answer(&asked)
            }
        })
        .await;
    gathered(answers)
}

/// A batch's answers as one: the values in order, or the first key's error.
fn gathered(answers: Vec<Result<Option<Value>, Error>>) -> Answer {
    let mut out = Vec::with_capacity(answers.len());
    for a in answers {
        out.push(a?.unwrap_or(Value::Null));
    }
    Ok(Some(Value::Array(out)))
}

/// A batch loader of a `get_or_load_many` / `load_many` step, in either mode.
struct LoadMany {
    keys: Vec<String>,
    loads: Arc<AtomicUsize>,
    values: Value,
    fail: Value,
    took: Duration,
}

impl LoadMany {
    fn of(step: &Value, loads: &Arc<AtomicUsize>) -> Self {
        Self {
            keys: strings(&step["keys"]).expect("keys"),
            loads: loads.clone(),
            values: step["values"].clone(),
            fail: step["fail"].clone(),
            took: ms(step, "ms"),
        }
    }

    /// Counts the call; how long it takes.
    fn begin(&self) -> Duration {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.took
    }

    fn answer(&self, asked: &[String]) -> Result<Vec<(String, Option<Value>)>, std::io::Error> {
        match self.fail.as_str() {
            Some(m) => Err(std::io::Error::other(m.to_owned())),
            None => Ok(asked
                .iter()
                .filter_map(|k| {
                    let v = self.values.get(k)?;
                    Some((k.clone(), (!v.is_null()).then(|| v.clone())))
                })
                .collect()),
        }
    }
}
