//! How JS values live in the engine without crossing threads.
//!
//! The engine needs `V: Clone + Send + Sync`, and it may drop a `V` on any thread; a JS value
//! may only be touched on its JS thread. So the engine never holds a JS value: it holds a
//! [`Val`], an `Arc` of a [`Slot`] that is nothing but a number and a handle to a
//! thread-safe release list. The JS values themselves are kept by the cache's [`Table`]:
//! objects and functions by a napi reference each, other values (which Node-API before
//! version 10 cannot reference) in a cell of one JS array:
//!
//! - storing a value (a loader's answer, `set`) makes the reference or takes a free cell,
//!   on the JS thread; the engine gets the `Val`;
//! - serving a hit reads the reference (or the cell): no copy, no serialisation, the very
//!   same object every time;
//! - when the engine drops the last clone of a `Val` (eviction, replacement, expiry, a
//!   waiter's copy), on whatever thread, [`Slot`]'s `Drop` pushes its cell onto the release
//!   list. Only the JS thread empties it ([`Table::collect`], after every call that can
//!   release values): it deletes the reference or clears the cell, so the JS value can be
//!   garbage collected, and only then reuses the cell. A cell is therefore never reused
//!   while any `Val` still names it.
//!
//! The same mechanism carries a loader's rejection: the error object is stored like a value
//! and travels inside a [`JsFailure`], so every waiter is rejected with that very object.

use std::cell::{Cell as StdCell, RefCell};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use napi::{Result, sys};

use crate::copy::{Copier, Kind};
use crate::js::{self, Js, Ref, Type, Value};

/// Where a value lives: a cell of the table's array (any value), or a napi reference of its
/// own (objects and functions: one Node-API call to read instead of two), or the cache's own
/// copy of an object, of which each reader gets a new copy (`copyValues`, `crate::copy`).
#[derive(Clone, Copy)]
enum Cell {
    Index(u32),
    Ref(sys::napi_ref),
    Own(sys::napi_ref, Kind),
}

// SAFETY: a `Cell` is plain data; the napi reference it may name is only passed to Node-API
// by the `Table` (JS thread only). Other threads only move it onto the release list.
unsafe impl Send for Cell {}
// SAFETY: as above: shared `Cell`s are never dereferenced off the JS thread.
unsafe impl Sync for Cell {}

/// Cells whose last `Val` was dropped, waiting for the JS thread to clear them.
#[derive(Default)]
pub(crate) struct Released {
    any: AtomicBool,
    cells: Mutex<Vec<Cell>>,
}

impl Released {
    fn push(&self, cell: Cell) {
        self.cells
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cell);
        self.any.store(true, Ordering::Release);
    }

    fn take(&self) -> Vec<Cell> {
        if !self.any.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut *self.cells.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn len(&self) -> usize {
        self.cells.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// One value held by the engine.
pub(crate) struct Slot {
    cell: Cell,
    released: Arc<Released>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.released.push(self.cell);
    }
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cell {
            Cell::Index(i) => write!(f, "Slot(#{i})"),
            Cell::Ref(_) => f.write_str("Slot(ref)"),
            Cell::Own(..) => f.write_str("Slot(own copy)"),
        }
    }
}

/// What the engine stores (inside the fleet engine's `Versioned`): a shared handle to one
/// value.
///
/// It carries a copy of the slot's cell, so a hit reads where the value lives from the entry
/// itself: one cache line fewer to fetch per hit than going through the `Arc` (measured on
/// the `get` hit path, where the engine's memory traffic is most of the cost).
#[derive(Clone)]
pub(crate) struct Val {
    cell: Cell,
    slot: Arc<Slot>,
}

impl Val {
    /// Whether every reader of `self` and of `other` is handed one same JS value: the same
    /// stored value, not one of which each reader gets a copy of its own.
    pub(crate) fn read_as_one(&self, other: &Val) -> bool {
        Arc::ptr_eq(&self.slot, &other.slot) && !matches!(self.cell, Cell::Own(..))
    }
}

impl fmt::Debug for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.slot.fmt(f)
    }
}

/// The values of one cache: a JS array for primitives, napi references for objects, and
/// the array's free list. JS thread only (it lives in the cache's `Rc` state and holds raw
/// pointers, so it is neither `Send` nor `Sync`).
pub(crate) struct Table {
    env: sys::napi_env,
    array: Ref,
    /// Indices free for reuse (cleared cells).
    free: RefCell<Vec<u32>>,
    /// The array's length: the next index never used yet.
    len: StdCell<u32>,
    /// Values stored and values cleared so far (for leak tests).
    stored: StdCell<u64>,
    cleared: StdCell<u64>,
    released: Arc<Released>,
    /// Copies objects in and out (`copyValues`); `None`: objects are shared.
    copier: Option<Copier>,
}

impl Table {
    /// The values of a new cache; `copy`: its `copyValues` option.
    pub(crate) fn new(js: Js, copy: bool) -> Result<Self> {
        Ok(Self {
            copier: copy.then(|| Copier::new(js)).transpose()?,
            env: js.raw(),
            array: js.reference(js.array(0)?)?,
            free: RefCell::new(Vec::new()),
            len: StdCell::new(0),
            stored: StdCell::new(0),
            cleared: StdCell::new(0),
            released: Arc::new(Released::default()),
        })
    }

    /// Keeps `v`, or the cache's own copy of it when it is an object and values are copied
    /// (throwing a `TypeError` when it cannot be copied); the engine holds the returned
    /// handle.
    pub(crate) fn store(&self, js: Js, v: Value) -> Result<Val> {
        match (&self.copier, js.type_of(v)?) {
            (Some(c), Type::Object) => {
                let (own, kind) = c.own(js, v)?;
                Ok(self.keep(Cell::Own(js.raw_reference(own)?, kind)))
            }
            _ => self.store_shared(js, v),
        }
    }

    /// [`store`](Self::store) of a value in a loader's answer: what cannot be kept (a value
    /// that cannot be copied, a getter that throws) is the load's failure, not an exception
    /// left pending for the process.
    pub(crate) fn store_answer(
        &self,
        js: Js,
        v: Value,
    ) -> Result<std::result::Result<Val, JsFailure>> {
        match self.store(js, v) {
            Ok(val) => Ok(Ok(val)),
            Err(e) if e.status == napi::Status::PendingException => {
                let thrown = js.take_exception()?;
                Ok(Err(JsFailure::caught(js, self, thrown)?))
            }
            Err(e) => Err(e),
        }
    }

    /// Keeps `v` itself, never a copy: a thrown value every waiter gets as it is.
    pub(crate) fn store_shared(&self, js: Js, v: Value) -> Result<Val> {
        let cell = match js.type_of(v)? {
            Type::Object | Type::Function => Cell::Ref(js.raw_reference(v)?),
            _ => {
                let id = match self.free.borrow_mut().pop() {
                    Some(id) => id,
                    None => {
                        let id = self.len.get();
                        self.len.set(id + 1);
                        id
                    }
                };
                js.set_element(self.array.get(js)?, id, v)?;
                Cell::Index(id)
            }
        };
        Ok(self.keep(cell))
    }

    fn keep(&self, cell: Cell) -> Val {
        self.stored.set(self.stored.get() + 1);
        Val {
            cell,
            slot: Arc::new(Slot {
                cell,
                released: self.released.clone(),
            }),
        }
    }

    /// Whether readers of `v` get a copy of their own (so the JS front must not keep it).
    #[inline]
    pub(crate) fn copied(v: &Val) -> bool {
        matches!(v.cell, Cell::Own(..))
    }

    /// The JS value a handle names.
    #[inline]
    pub(crate) fn load(&self, js: Js, v: &Val) -> Result<Value> {
        match v.cell {
            Cell::Ref(r) => js.reference_value(r),
            Cell::Index(i) => self.load_index(js, i),
            Cell::Own(..) => self.read_own(js, v.cell).map_err(js::failed),
        }
    }

    /// [`load`](Self::load) for the hit path, which runs it under the engine's read lock:
    /// a failed Node-API call is answered as its status (returned in registers), and
    /// reading a primitive's cell stays out of line.
    #[inline(always)]
    pub(crate) fn read(&self, js: Js, v: &Val) -> std::result::Result<Value, sys::napi_status> {
        match v.cell {
            Cell::Ref(r) => js.reference_value_raw(r),
            Cell::Index(i) => self.read_index(js, i),
            Cell::Own(..) => self.read_own(js, v.cell),
        }
    }

    /// A new copy of the cache's own copy, for one reader.
    #[inline(never)]
    fn read_own(&self, js: Js, cell: Cell) -> std::result::Result<Value, sys::napi_status> {
        let (Cell::Own(r, kind), Some(c)) = (cell, &self.copier) else {
            return Err(sys::Status::napi_generic_failure);
        };
        c.hand_out(js, js.reference_value_raw(r)?, kind)
    }

    fn load_index(&self, js: Js, i: u32) -> Result<Value> {
        js.get_element(self.array.get(js)?, i)
    }

    #[inline(never)]
    fn read_index(&self, js: Js, i: u32) -> std::result::Result<Value, sys::napi_status> {
        self.load_index(js, i).map_err(|e| e.status.into())
    }

    /// Lets go of the values whose handles were all dropped, so they can be collected.
    pub(crate) fn collect(&self, js: Js) -> Result<()> {
        let cells = self.released.take();
        if cells.is_empty() {
            return Ok(());
        }
        let (array, undefined) = (self.array.get(js)?, js.undefined()?);
        self.cleared.set(self.cleared.get() + cells.len() as u64);
        let mut free = self.free.borrow_mut();
        for cell in cells {
            match cell {
                Cell::Ref(r) | Cell::Own(r, _) => js.delete_reference(r),
                Cell::Index(i) => {
                    js.set_element(array, i, undefined)?;
                    free.push(i);
                }
            }
        }
        Ok(())
    }

    /// Values held now (for leak tests).
    pub(crate) fn live(&self) -> u64 {
        self.stored.get() - self.cleared.get() - self.released.len() as u64
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // The cache's entries were dropped first (see `Inner`): let their values go.
        let _ = self.collect(Js(self.env));
    }
}

/// A JS exception or rejection (a loader's, a user codec's), kept as the original JS value
/// so every caller it reaches gets that very object.
pub(crate) struct JsFailure {
    pub(crate) value: Val,
    /// The error's message, for Rust-side display only.
    message: String,
}

impl JsFailure {
    /// Keeps the thrown or rejected value `e`.
    pub(crate) fn caught(js: Js, table: &Table, e: Value) -> Result<Self> {
        Ok(Self {
            value: table.store_shared(js, e)?,
            message: js::describe(js, e),
        })
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

/// What the L1 holds: a value with its version (`herdless_redis::Versioned`).
pub(crate) type Entry = herdless_redis::Versioned<Val>;
