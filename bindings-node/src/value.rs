//! How JS values live in the engine without crossing threads.
//!
//! The engine needs `V: Clone + Send + Sync`, and it may drop a `V` on any thread; a JS value
//! may only be touched on its JS thread. So the engine never holds a JS value: it holds a
//! [`Val`], an `Arc` of a [`Slot`] that is nothing but a number and a handle to a
//! thread-safe release list. The JS values themselves sit in one JS array per cache (the
//! [`Table`], held by a napi reference), at the slot's index:
//!
//! - storing a value (a loader's answer, `set`) takes a free index on the JS thread and
//!   writes the value there; the engine gets the `Val`;
//! - serving a hit reads the array at that index: one Node-API call, no copy, no
//!   serialisation, the very same object every time;
//! - when the engine drops the last clone of a `Val` (eviction, replacement, expiry, a
//!   waiter's copy), on whatever thread, [`Slot`]'s `Drop` pushes its index onto the release
//!   list. Only the JS thread empties it ([`Table::collect`], after every call that can
//!   release values): it clears the array cell, so the JS value can be garbage collected,
//!   and only then reuses the index. An index is therefore never reused while any `Val`
//!   still names it.
//!
//! The same mechanism carries a loader's rejection: the error object is stored like a value
//! and travels inside a [`JsFailure`], so every waiter is rejected with that very object.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use napi::Result;

use crate::js::{Js, Ref, Value};

/// Indices whose last `Val` was dropped, waiting for the JS thread to clear them.
#[derive(Default)]
pub(crate) struct Released {
    any: AtomicBool,
    ids: Mutex<Vec<u32>>,
}

impl Released {
    fn push(&self, id: u32) {
        self.ids.lock().unwrap_or_else(|e| e.into_inner()).push(id);
        self.any.store(true, Ordering::Release);
    }

    fn take(&self) -> Vec<u32> {
        if !self.any.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut *self.ids.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// One cell of a cache's value table.
pub(crate) struct Slot {
    id: u32,
    released: Arc<Released>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.released.push(self.id);
    }
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Slot({})", self.id)
    }
}

/// What the engine stores: a shared handle to one cell of the value table.
pub(crate) type Val = Arc<Slot>;

/// The JS array holding a cache's values, and its free list. JS thread only (it lives in
/// the cache's `Rc` state and holds a napi reference, so it is neither `Send` nor `Sync`).
pub(crate) struct Table {
    array: Ref,
    /// Indices free for reuse (cleared cells).
    free: RefCell<Vec<u32>>,
    /// The array's length: the next index never used yet.
    len: Cell<u32>,
    released: Arc<Released>,
}

impl Table {
    pub(crate) fn new(js: Js) -> Result<Self> {
        Ok(Self {
            array: js.reference(js.array(0)?)?,
            free: RefCell::new(Vec::new()),
            len: Cell::new(0),
            released: Arc::new(Released::default()),
        })
    }

    /// Puts `v` in a free cell; the engine holds the returned handle.
    pub(crate) fn store(&self, js: Js, v: Value) -> Result<Val> {
        let id = match self.free.borrow_mut().pop() {
            Some(id) => id,
            None => {
                let id = self.len.get();
                self.len.set(id + 1);
                id
            }
        };
        js.set_element(self.array.get(js)?, id, v)?;
        Ok(Arc::new(Slot {
            id,
            released: self.released.clone(),
        }))
    }

    /// The JS value a handle names.
    #[inline]
    pub(crate) fn load(&self, js: Js, v: &Val) -> Result<Value> {
        js.get_element(self.array.get(js)?, v.id)
    }

    /// Clears the cells whose handles were all dropped, so their JS values can be collected.
    pub(crate) fn collect(&self, js: Js) -> Result<()> {
        let ids = self.released.take();
        if ids.is_empty() {
            return Ok(());
        }
        let (array, undefined) = (self.array.get(js)?, js.undefined()?);
        for &id in &ids {
            js.set_element(array, id, undefined)?;
        }
        self.free.borrow_mut().extend(ids);
        Ok(())
    }

    /// Cells holding a value now (for leak tests).
    pub(crate) fn live(&self) -> u32 {
        let pending = self
            .released
            .ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len();
        self.len.get() - self.free.borrow().len() as u32 - pending as u32
    }
}

/// A loader's rejection, kept as the original JS value so every waiter gets that object.
pub(crate) struct JsFailure {
    pub(crate) value: Val,
    /// The error's message, for Rust-side display and metrics only.
    message: String,
}

impl JsFailure {
    pub(crate) fn new(value: Val, message: String) -> Self {
        Self { value, message }
    }
}

impl fmt::Debug for JsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsFailure")
            .field("message", &self.message)
            .finish()
    }
}

impl fmt::Display for JsFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JsFailure {}
