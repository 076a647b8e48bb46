//! `cache.on(name, listener)`, `off`, `once` and the `onEvent` option: the engine's events
//! (`herdless::Builder::listener`) told to JS listeners.
//!
//! Every cache gives the engine a listener closure, muted (`Cache::set_listening`) while no
//! JS listener is registered, so a cache nobody listens to makes no event at all. The
//! closure runs on the engine's drain (any thread) and only hands the event to the JS
//! thread ([`Wake::send_event`]): the engine never waits for JS, and an event the channel
//! cannot take is dropped and counted. On the JS thread each listener is called with one
//! `{ kind, key, error? }` object; one that throws is reported with `process.emitWarning`
//! (an event has no caller to reject), and the others are still called.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use herdless::{Event, EventKind};
use napi::Result;

use crate::errors::type_error;
use crate::js::{Js, Type, Value, WeakRef};
use crate::wake::Wake;

/// An event's name in Node (camelCase, as `CacheEventName` in index.d.ts).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Name {
    Evict,
    Expire,
    LoadError,
    FailSafe,
}

const NAMES: [(&str, Name); 4] = [
    ("evict", Name::Evict),
    ("expire", Name::Expire),
    ("loadError", Name::LoadError),
    ("failSafe", Name::FailSafe),
];

impl Name {
    pub(crate) fn of(kind: EventKind) -> Option<Self> {
        Some(match kind {
            EventKind::Evicted => Name::Evict,
            EventKind::Expired => Name::Expire,
            EventKind::LoadFailed => Name::LoadError,
            EventKind::FailSafe => Name::FailSafe,
            // A kind this binding does not know yet is not told.
            _ => return None,
        })
    }

    pub(crate) fn as_str(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, n)| *n == self)
            .map_or("", |(s, _)| s)
    }

    /// The `event` argument of `on`/`off`/`once`, or a `TypeError`
    /// (`HERDLESS_INVALID_ARGUMENT`).
    pub(crate) fn parse(js: Js, v: Value) -> Result<Self> {
        let known = || {
            let names: Vec<String> = NAMES.iter().map(|(s, _)| format!("'{s}'")).collect();
            names.join(", ")
        };
        if js.type_of(v)? != Type::String {
            let got = js.type_of(v)?.name();
            let message = format!("the event name must be a string, got {got}");
            return Err(type_error(js, &message));
        }
        let s = js.get_string(v)?;
        match NAMES.iter().find(|(n, _)| *n == s) {
            Some((_, name)) => Ok(*name),
            None => Err(type_error(
                js,
                &format!("unknown event {s:?} (known: {})", known()),
            )),
        }
    }
}

/// The listener closure the engine is built with: it hands each event to the JS thread.
pub(crate) fn engine_listener(wake: Arc<Wake>) -> impl Fn(Event) + Send + Sync + 'static {
    move |e| wake.send_event(e)
}

struct Listener {
    /// `None`: every event (the `onEvent` option).
    name: Option<Name>,
    /// Its function's key in the store.
    id: f64,
    once: bool,
}

/// The JS listeners of one cache. JS thread only.
pub(crate) struct Listeners {
    list: RefCell<Vec<Listener>>,
    next_id: Cell<f64>,
    /// Id -> function: a `Map` that the cache object holds (under a hidden property) and
    /// this only sees. Held strongly from here, a listener that refers to its cache (as
    /// most do) would keep the cache alive for good.
    store: WeakRef,
}

impl Listeners {
    /// The listeners of the cache object `owner` (which keeps their store).
    pub(crate) fn new(js: Js, owner: Value) -> Result<Self> {
        let map = js.construct(js.get(js.global()?, "Map")?, &[])?;
        js.hide(owner, "herdless.listeners", map)?;
        Ok(Self {
            list: RefCell::new(Vec::new()),
            next_id: Cell::new(0.0),
            store: js.weak_reference(map)?,
        })
    }

    /// Adds `f` (checked to be a function); `name` `None` for every event.
    pub(crate) fn add(&self, js: Js, name: Option<Name>, f: Value, once: bool) -> Result<()> {
        if js.type_of(f)? != Type::Function {
            return Err(type_error(js, "the listener must be a function"));
        }
        let Some(store) = self.store.get(js)? else {
            return Ok(());
        };
        let id = self.next_id.get() + 1.0;
        self.next_id.set(id);
        js.call_method(store, "set", &[js.number(id)?, f])?;
        self.list.borrow_mut().push(Listener { name, id, once });
        Ok(())
    }

    /// Removes the most recently added registration of `f` for `name`, as EventEmitter's
    /// `off` does; nothing when there is none.
    pub(crate) fn remove(&self, js: Js, name: Name, f: Value) -> Result<()> {
        let Some(store) = self.store.get(js)? else {
            return Ok(());
        };
        let ids: Vec<f64> = self
            .list
            .borrow()
            .iter()
            .rev()
            .filter(|l| l.name == Some(name))
            .map(|l| l.id)
            .collect();
        for id in ids {
            let id = js.number(id)?;
            if js.strict_equals(js.call_method(store, "get", &[id])?, f)? {
                let id = js.get_number(id)?;
                self.list.borrow_mut().retain(|l| l.id != id);
                js.call_method(store, "delete", &[js.number(id)?])?;
                break;
            }
        }
        Ok(())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.borrow().is_empty()
    }

    /// The functions to call for `name`, taking `once` registrations out. The list is not
    /// borrowed while they run: a listener may call `on` or `off`.
    pub(crate) fn take(&self, js: Js, name: Name) -> Result<Vec<Value>> {
        let Some(store) = self.store.get(js)? else {
            return Ok(Vec::new());
        };
        let mut due = Vec::new();
        self.list.borrow_mut().retain(|l| {
            let hit = l.name.is_none_or(|n| n == name);
            if hit {
                due.push((l.id, l.once));
            }
            !(hit && l.once)
        });
        let mut fs = Vec::with_capacity(due.len());
        for (id, once) in due {
            let id = js.number(id)?;
            fs.push(js.call_method(store, "get", &[id])?);
            if once {
                js.call_method(store, "delete", &[id])?;
            }
        }
        Ok(fs)
    }
}
