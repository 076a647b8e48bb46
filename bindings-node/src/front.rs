//! The front's engine side: which answers the JS front (`lib/front.js`) may keep, the hits
//! it served, and the write generation it is checked against.
//!
//! The JS front is a `Map` from key to `{ value, slot }`. A front hit is the `Map` lookup
//! plus one call of [`hit`](Front::hit) with the slot, here, where the decision is the
//! engine's: the write generation has not moved since the answers were read, and the
//! engine's hit-path clock is before the slot's deadline ([`herdless::Cache::steady_until`]:
//! fresh, and beyond XFetch's and refresh-ahead's reach). Why a call and not a clock read
//! in JS: in Node 20 `performance.now()` costs 90-106 ns and `Atomics.load` 16-34 ns, against
//! 33 ns of CPU for this whole call (the binding's BENCHMARKS.md, "Issue 17"); and reading
//! the engine's own coarse clock, the one its hit path judges freshness with, makes
//! the front expire exactly when the engine's hit path would, never later.
//!
//! Counts: a front hit adds one to its slot here; the slots are folded into the engine
//! ([`herdless::Cache::credit_hits`]: hit counter, hot-key samples, the eviction mark)
//! before every other call into the engine from this cache (so every reader of counters,
//! the detector's ticks and every write that could evict see them), and every
//! [`FOLD_EVERY`] hits.

use std::cell::{Cell, RefCell};
use std::ptr;

use napi::{Result, sys};

use crate::js::{Js, Ref, Value};
use crate::value::Entry;

/// Folds at least this often (front hits), bounding the work of one fold and keeping the
/// per-slot counts far from overflow.
const FOLD_EVERY: u32 = 1 << 16;

/// Fills only after this many reads into the engine under one write generation: a cache
/// written every few reads would otherwise pay a fill (and its loss at the next write) on
/// almost every read, and be slower than without a front (BENCHMARKS.md of the binding).
const FILL_AFTER: u32 = 32;

/// One kept answer's engine side.
#[derive(Default)]
struct Slot {
    key: Option<Box<str>>,
    /// The engine clock's deadline of the answer ([`herdless::Cache::steady_until`]).
    until: u64,
    /// Front hits not yet folded into the engine.
    hits: u32,
}

/// The front of one cache (JS thread only).
pub(crate) struct Front {
    slots: RefCell<Box<[Slot]>>,
    /// The next slot to reuse: the front forgets in insertion order (a hot key comes back
    /// on its next read, at the cost of one call into the engine).
    hand: Cell<usize>,
    /// The write generation the answers of the JS map were read under.
    last: Cell<u64>,
    /// Reads into the engine since the generation last moved (see [`FILL_AFTER`]).
    stable: Cell<u32>,
    /// The JS map may hold answers (it is emptied only then).
    holding: Cell<bool>,
    /// Front hits not yet folded.
    pending: Cell<u32>,
    /// The slots with hits not yet folded (a fold visits these, not every slot: a cache
    /// written between a few front hits folds at each write).
    dirty: RefCell<Vec<u32>>,
    /// `info[0]`: the slot the last call filled (-1: none). An `Int32Array` the JS front
    /// reads after each call; `data` is its memory, kept alive by `buffer`.
    data: *mut i32,
    buffer: Ref,
    /// The JS front's `Map` of answers, emptied here when the generation moves (so it
    /// never holds values the engine let go beyond the next call into this cache).
    map: Ref,
    /// `Map.prototype.clear`.
    clear: Ref,
    /// `[value]`: the value a `getOrLoad` hit filled (its answer is a promise).
    stash: Ref,
}

impl Front {
    /// A front of `capacity` answers.
    pub(crate) fn new(js: Js, capacity: usize) -> Result<Front> {
        let mut data = ptr::null_mut();
        let mut buffer = ptr::null_mut();
        // SAFETY: JS thread; the out-pointers are valid.
        let status = unsafe { sys::napi_create_arraybuffer(js.raw(), 8, &mut data, &mut buffer) };
        if status != sys::Status::napi_ok {
            return Err(crate::js::failed(status));
        }
        let data = data.cast::<i32>();
        // SAFETY: 8 bytes, aligned (V8 aligns backing stores), ours to write.
        unsafe { data.write(-1) };
        let slots = (0..capacity.max(1)).map(|_| Slot::default()).collect();
        let map = js.construct(js.get(js.global()?, "Map")?, &[])?;
        Ok(Front {
            slots: RefCell::new(slots),
            hand: Cell::new(0),
            last: Cell::new(0),
            stable: Cell::new(0),
            holding: Cell::new(false),
            pending: Cell::new(0),
            dirty: RefCell::new(Vec::new()),
            data,
            buffer: js.reference(buffer)?,
            map: js.reference(map)?,
            clear: js.reference(js.get(map, "clear")?)?,
            stash: js.reference(js.array(1)?)?,
        })
    }

    /// What the JS front needs: `info` (an `Int32Array(1)`), `stash` (`[value]`) and the
    /// `Map` (the hit function is made by `crate::fast`).
    pub(crate) fn handles(&self, js: Js) -> Result<(Value, Value, Value)> {
        let mut info = ptr::null_mut();
        // SAFETY: JS thread; the buffer is alive (we hold it).
        let status = unsafe {
            sys::napi_create_typedarray(
                js.raw(),
                sys::TypedarrayType::int32_array,
                1,
                self.buffer.get(js)?,
                0,
                &mut info,
            )
        };
        if status != sys::Status::napi_ok {
            return Err(crate::js::failed(status));
        }
        Ok((info, self.stash.get(js)?, self.map.get(js)?))
    }

    fn set_info(&self, i: usize, v: i32) {
        // SAFETY: `data` is the 8 bytes of `buffer`, alive while we hold it; JS thread only.
        unsafe { self.data.add(i).write(v) };
    }

    /// Folds the front's hits into the engine's counts.
    pub(crate) fn fold(&self, l1: &herdless::Cache<Entry>) {
        if self.pending.get() == 0 {
            return;
        }
        self.pending.set(0);
        let mut slots = self.slots.borrow_mut();
        for i in self.dirty.borrow_mut().drain(..) {
            let Some(slot) = slots.get_mut(i as usize) else {
                continue;
            };
            if slot.hits > 0 {
                if let Some(key) = &slot.key {
                    l1.credit_hits(key, u64::from(slot.hits));
                }
                slot.hits = 0;
            }
        }
    }

    /// Folds, then notes the generation and, when it moved, empties the JS map: every
    /// answer it holds was read under the generation noted before.
    pub(crate) fn sync(&self, js: Js, l1: &herdless::Cache<Entry>) -> Result<()> {
        self.fold(l1);
        let g = l1.generation().unwrap_or(0);
        if g != self.last.get() {
            if self.holding.replace(false) {
                // `Map.prototype.clear` cannot throw: its result is of no interest.
                let _ = js.call(self.clear.get(js)?, self.map.get(js)?, &[])?;
            }
            self.last.set(g);
            self.stable.set(0);
        }
        Ok(())
    }

    /// Before a read that may fill the front: [`sync`](Self::sync), the generation read
    /// before the engine reads the entry (so a write after that read moves it past this).
    pub(crate) fn begin(&self, js: Js, l1: &herdless::Cache<Entry>) -> Result<()> {
        self.sync(js, l1)?;
        self.stable.set(self.stable.get().saturating_add(1));
        self.set_info(0, -1);
        Ok(())
    }

    /// After a read that answered `key` with a fresh value: keeps it in a slot when the
    /// engine would answer it again until a deadline, and tells JS which (`stash`: the
    /// value, for JS to find when the call's answer is a promise).
    pub(crate) fn fill(
        &self,
        js: Js,
        l1: &herdless::Cache<Entry>,
        key: &str,
        stash: Option<Value>,
    ) -> Result<()> {
        if self.stable.get() < FILL_AFTER {
            return Ok(());
        }
        let Some(until) = l1.steady_until(key) else {
            return Ok(());
        };
        self.holding.set(true);
        let mut slots = self.slots.borrow_mut();
        let i = self.hand.get();
        self.hand.set((i + 1) % slots.len());
        let slot = &mut slots[i];
        if let (Some(old), true) = (&slot.key, slot.hits > 0) {
            l1.credit_hits(old, u64::from(slot.hits));
        }
        *slot = Slot {
            key: Some(key.into()),
            until,
            hits: 0,
        };
        drop(slots);
        if let Some(v) = stash {
            js.set_element(self.stash.get(js)?, 0, v)?;
        }
        self.set_info(0, i as i32);
        Ok(())
    }

    /// A front hit of the answer in `slot`, if the engine would give it now: counted.
    #[inline]
    pub(crate) fn hit(&self, l1: &herdless::Cache<Entry>, slot: u32) -> bool {
        let mut slots = self.slots.borrow_mut();
        let Some(s) = slots.get_mut(slot as usize) else {
            return false;
        };
        // SAFETY: as in `set_info`. A pending "empty the map" (a read from outside the JS
        // front, e.g. `Cache.prototype.get`, saw a new generation) refuses every answer
        // until JS has emptied it.
        let stale = unsafe { self.data.add(1).read() } != 0;
        if stale || l1.generation() != Some(self.last.get()) || l1.now_fast_nanos() >= s.until {
            return false;
        }
        if s.hits == 0 {
            self.dirty.borrow_mut().push(slot);
        }
        s.hits += 1;
        drop(slots);
        let pending = self.pending.get() + 1;
        self.pending.set(pending);
        if pending >= FOLD_EVERY {
            self.fold(l1);
        }
        true
    }
}
