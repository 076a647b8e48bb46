//! Herds: the `getOrLoad` callers of a key that wait for another caller's load, polled
//! together.
//!
//! The first caller whose lookup waits for a load is a task like any other (its waiter is
//! registered with the flight, with its waker and deadline: the group's anchor). Each later
//! caller that waits for that key while the anchor waits is a [`Call`] of its own, made
//! from its own lookup (so the engine counted it, and its waiter keeps its own arrival and
//! deadline), but is not polled until the anchor's task ends: a herd of 5,000 callers then
//! costs one registration, one waker and one wake-up instead of 5,000 of each. When the
//! anchor's task ends (the flight's outcome, or the anchor's own deadline), each member is
//! polled once: the machine answers it as it would have (the loaded value, a fail-safe
//! value, an error, its own timeout), and a member still waiting (its deadline is later
//! than the anchor's) or told to look up again becomes a task of its own from there.
//! Callers with an `AbortSignal` are never members (each must be able to leave alone).
//! Python's asyncio driver does the same per event loop (`bindings-python/src/driver/group.rs`).

use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use hashbrown::HashMap;
use herdless::Lookup;
use herdless_redis::call::{Answer as Answered, Call, Failure};
use napi::Result;

use super::{EResult, Entry, Inner, Node, NodeRt, State};
use crate::call::{Answer, CallOptions, Loader, Outcome};
use crate::errors;
use crate::js::{Js, Ref, Value};
use crate::value::Val;

/// The herds of a cache (JS thread only).
#[derive(Default)]
pub(super) struct Groups {
    /// By key: the herd whose anchor waits now.
    open: HashMap<String, Herd>,
    /// By task id: the key each anchor waits for.
    anchors: HashMap<u64, String>,
}

impl Groups {
    /// How many callers wait as members of a herd.
    pub(super) fn members(&self) -> usize {
        self.open.values().map(|h| h.members.len()).sum()
    }

    /// Lets every herd go (the cache is dropped).
    pub(super) fn clear(&mut self) {
        self.open.clear();
        self.anchors.clear();
    }
}

/// The callers of a key that wait with an anchor.
struct Herd {
    members: Vec<(Box<Call<Val, Node>>, Answer)>,
    /// The anchor's loader function (shared with the members that pass the same one).
    func: Rc<Ref>,
}

/// The engine's options of a call.
pub(super) fn engine(options: &CallOptions) -> herdless_redis::call::CallOptions {
    herdless_redis::call::CallOptions::default()
        .ttl(options.ttl)
        .tti(options.tti)
        .tags(options.tags.as_ref().map(|t| Arc::from(t.to_vec())))
}

impl Inner {
    /// Starts a `getOrLoad` call whose first lookup answered `first`: a member of the key's
    /// herd when `first` waits for a load and the key has an anchor, the anchor of a new
    /// herd when it waits and the key has none, else a task (see [`Inner::start`]).
    pub(crate) fn start_load(
        self: &Rc<Self>,
        js: Js,
        key: &str,
        loader: Value,
        options: CallOptions,
        answer: Answer,
        first: EResult<Lookup<Entry>>,
    ) -> Result<()> {
        let waits = matches!(first, Ok(Lookup::Wait(_))) && options.signal.is_none();
        if !waits {
            let loader = Loader::new(js, loader)?;
            return self.start(js, key.to_owned(), loader, options, answer, first);
        }
        // Held across the member's making, which runs no JS (so nothing can end the herd).
        let mut groups = self.groups.borrow_mut();
        if let Some(herd) = groups.open.get_mut(key) {
            let loader = Loader::new_as(js, loader, &herd.func)?;
            let call = Box::new(Call::new(&self.tt, key, first, loader, engine(&options)));
            herd.members.push((call, answer));
            return Ok(());
        }
        drop(groups);
        let loader = Loader::new(js, loader)?;
        let func = Rc::clone(loader.func());
        let call = Box::new(Call::new(&self.tt, key, first, loader, engine(&options)));
        let (id, task) = self.new_task(answer, State::One(call));
        self.put(id, task);
        {
            let mut groups = self.groups.borrow_mut();
            let herd = Herd {
                members: Vec::new(),
                func,
            };
            groups.open.insert(key.to_owned(), herd);
            groups.anchors.insert(id, key.to_owned());
        }
        let r = self.poll(js, id);
        self.run_woken(js)?;
        r
    }

    /// After task `id` ended: if it anchored a herd, answers the herd's members.
    pub(super) fn anchor_ended(self: &Rc<Self>, js: Js, id: u64) -> Result<()> {
        let members = {
            let mut groups = self.groups.borrow_mut();
            let Some(key) = groups.anchors.remove(&id) else {
                return Ok(());
            };
            groups
                .open
                .remove(&key)
                .map(|h| h.members)
                .unwrap_or_default()
        };
        let rt = NodeRt { js, inner: self };
        let mut cx = Context::from_waker(Waker::noop());
        let mut first_error = Ok(());
        // The value the last member was answered with: most members of a herd get the same
        // one, read from the table once (each still gets its own copy under `copyValues`).
        let mut last: Option<(Val, Value)> = None;
        for (mut call, mut answer) in members {
            self.fold_front();
            let r = match call.poll_call(&mut cx, &rt) {
                Poll::Ready(Ok(Some(v))) => match &last {
                    Some((same, value)) if same.read_as_one(&v) => answer.settle(js, Ok(*value)),
                    _ => self.table.load(js, &v).and_then(|value| {
                        last = Some((v, value));
                        answer.settle(js, Ok(value))
                    }),
                },
                Poll::Ready(a) => self.one_outcome(js, a).and_then(|o| answer.settle(js, o)),
                // Polled again at once with a waker of its own.
                Poll::Pending => self.begin(js, answer, None, || Ok(State::One(call))),
            };
            if first_error.is_ok() {
                first_error = r;
            }
        }
        first_error
    }

    /// What the caller of a one-key call is answered for what the machine answered.
    pub(super) fn one_outcome(&self, js: Js, r: Answered<Val, super::Raise>) -> Result<Outcome> {
        Ok(match r {
            Ok(Some(v)) => Ok(self.table.load(js, &v)?),
            Ok(None) => Ok(js.undefined()?),
            Err(Failure::Error(e)) => Err(errors::to_js(js, &self.table, &e)?),
            Err(Failure::Raise(x)) => Err(self.raised(js, x)?),
        })
    }
}
