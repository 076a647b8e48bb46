//! Values as the engine holds them, and [`ABSENT`](Absent), the loader's way to say "there
//! is nothing" (negative caching), distinct from a cached `None`.
//!
//! A value is isolated from its callers (`copy_values=True`, the default), as the platform's
//! own caches do (Django's LocMemCache pickles): a mutable object is copied when it is stored
//! and again for each caller, so mutating the object given to `set` (or returned by `get`)
//! never changes what another caller reads. JSON-shaped data (exact dicts, lists, tuples
//! over immutable leaves, bounded) is copied node by node; anything else is kept as its
//! pickle and read back into a new object per caller. Immutable
//! objects (`None`, `bool`, `int`, `float`, `complex`, `str`, `bytes`, and tuples and
//! frozensets of those) are shared as they are: nobody can change them, and the hit path
//! stays one reference bump. `copy_values=False` shares every object (callers promise never
//! to mutate a value after storing it or reading it).

use std::sync::Arc;

use herdless_redis::Versioned;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyBool, PyBytes, PyComplex, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PyString, PyTuple,
};

/// How a value is kept: shared, as a private tree copied per reader, or as its pickle.
enum Kept {
    /// An immutable object (or any object, with `copy_values=False`).
    Shared(Py<PyAny>),
    /// A private copy of a tree of exact dicts, lists and tuples over immutable leaves (JSON
    /// shaped data): copied node by node for each reader, several times faster than a pickle
    /// round trip. Only this module ever holds it.
    Tree(Py<PyAny>),
    /// A private flat dict (immutable keys and values): each reader's copy is one
    /// `dict.copy`, without looking at its items again (nobody else can change it).
    FlatDict(Py<PyDict>),
    /// A private flat list (immutable items): each reader's copy is one slice.
    FlatList(Py<PyList>),
    /// The pickle of any other mutable object: each reader gets a new object.
    Pickled(Py<PyBytes>),
}

/// A cached Python object.
///
/// Cloning shares it with an `Arc` bump, so the engine copies values between entries, flights
/// and waiters without the GIL. The object's own reference is released when the last clone
/// drops: at once on a thread attached to the interpreter, otherwise (an eviction or a waiter
/// on a thread without the GIL) pyo3 defers the decrement to the next time any thread
/// attaches, which every call into this module does. Dropping without the GIL is therefore
/// sound and never blocks.
///
/// The L1 holds it as a [`Versioned`] (the shared entry's version travels beside it).
#[derive(Clone)]
pub(crate) struct PyValue {
    obj: Arc<Kept>,
}

/// What the L1 holds.
pub(crate) type Held = Versioned<PyValue>;

/// How deep a tuple or frozenset is looked into before its value is taken as mutable
/// (and copied): bounds the check of a value whatever its nesting.
const IMMUTABLE_DEPTH: usize = 4;

/// Whether nobody can change `v` (nor anything it holds): exact builtin types only, since a
/// subclass may carry a mutable `__dict__`.
fn immutable(v: &Bound<'_, PyAny>, depth: usize) -> bool {
    if v.is_none()
        || v.is_exact_instance_of::<PyString>()
        || v.is_exact_instance_of::<PyInt>()
        || v.is_exact_instance_of::<PyFloat>()
        || v.is_exact_instance_of::<PyBool>()
        || v.is_exact_instance_of::<PyBytes>()
        || v.is_exact_instance_of::<PyComplex>()
    {
        return true;
    }
    if depth == 0 {
        return false;
    }
    if let Ok(t) = v.cast_exact::<PyTuple>() {
        return t.iter().all(|item| immutable(&item, depth - 1));
    }
    if let Ok(s) = v.cast_exact::<PyFrozenSet>() {
        return s.iter().all(|item| immutable(&item, depth - 1));
    }
    false
}

/// `pickle.dumps`, `pickle.loads` and `pickle.HIGHEST_PROTOCOL` (as Django's LocMemCache).
struct Pickle {
    dumps: Py<PyAny>,
    loads: Py<PyAny>,
    protocol: Py<PyAny>,
}

/// The most nodes (containers and leaves) and the deepest nesting a tree copy takes; past
/// either the value is pickled instead, so the copy's work and recursion stay bounded.
const TREE_NODES: usize = 10_000;
const TREE_DEPTH: usize = 32;

/// A copy of `v` node by node if it is a tree of exact dicts (with immutable keys), lists and
/// tuples over immutable leaves within the bounds; `None` otherwise. Runs no Python code of
/// the value's (exact builtin types only), so the tree cannot change while it is copied.
fn tree_copy<'py>(
    v: &Bound<'py, PyAny>,
    depth: usize,
    budget: &mut usize,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    if *budget == 0 {
        return Ok(None);
    }
    *budget -= 1;
    if immutable(v, 0) {
        return Ok(Some(v.clone()));
    }
    if depth == 0 {
        return Ok(None);
    }
    let py = v.py();
    if let Ok(d) = v.cast_exact::<PyDict>() {
        // A flat dict (immutable keys and values) is one C-level copy.
        if d.len() < *budget && d.iter().all(|(k, x)| immutable(&x, 0) && immutable(&k, 0)) {
            *budget -= d.len();
            return Ok(Some(d.copy()?.into_any()));
        }
        let out = PyDict::new(py);
        for (k, x) in d.iter() {
            if !immutable(&k, IMMUTABLE_DEPTH) {
                return Ok(None);
            }
            let Some(x) = tree_copy(&x, depth - 1, budget)? else {
                return Ok(None);
            };
            out.set_item(k, x)?;
        }
        return Ok(Some(out.into_any()));
    }
    if let Ok(l) = v.cast_exact::<PyList>() {
        // A flat list is one C-level slice copy.
        if l.len() < *budget && l.iter().all(|x| immutable(&x, 0)) {
            *budget -= l.len();
            return Ok(Some(l.get_slice(0, l.len()).into_any()));
        }
        let out = PyList::empty(py);
        for x in l.iter() {
            let Some(x) = tree_copy(&x, depth - 1, budget)? else {
                return Ok(None);
            };
            out.append(x)?;
        }
        return Ok(Some(out.into_any()));
    }
    if let Ok(t) = v.cast_exact::<PyTuple>() {
        let mut items = Vec::with_capacity(t.len());
        for x in t.iter() {
            let Some(x) = tree_copy(&x, depth - 1, budget)? else {
                return Ok(None);
            };
            items.push(x);
        }
        return Ok(Some(PyTuple::new(py, items)?.into_any()));
    }
    Ok(None)
}

/// [`tree_copy`] within the bounds.
fn copy_tree<'py>(v: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let mut budget = TREE_NODES;
    tree_copy(v, TREE_DEPTH, &mut budget)
}

static PICKLE: PyOnceLock<Pickle> = PyOnceLock::new();

fn pickle(py: Python<'_>) -> PyResult<&Pickle> {
    PICKLE.get_or_try_init(py, || {
        let m = py.import("pickle")?;
        Ok(Pickle {
            dumps: m.getattr("dumps")?.unbind(),
            loads: m.getattr("loads")?.unbind(),
            protocol: m.getattr("HIGHEST_PROTOCOL")?.unbind(),
        })
    })
}

impl PyValue {
    /// `obj` as the cache keeps it: with `copy`, a mutable object is pickled now (an
    /// unpicklable one raises the pickler's error, e.g. `pickle.PicklingError` or
    /// `TypeError`), so that later changes to it are not the cache's.
    pub(crate) fn new(obj: Bound<'_, PyAny>, copy: bool) -> PyResult<Self> {
        let kept = if !copy || immutable(&obj, IMMUTABLE_DEPTH) {
            Kept::Shared(obj.unbind())
        } else if let Some(tree) = copy_tree(&obj)? {
            flat(tree)
        } else {
            let py = obj.py();
            let p = pickle(py)?;
            let data = p.dumps.bind(py).call1((obj, p.protocol.bind(py)))?;
            Kept::Pickled(data.cast_into::<PyBytes>()?.unbind())
        };
        Ok(Self {
            obj: Arc::new(kept),
        })
    }

    /// The value for one caller: the shared object, or a new object read from the pickle.
    pub(crate) fn bind<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &*self.obj {
            Kept::Shared(o) => Ok(o.bind(py).clone()),
            Kept::Tree(o) => match copy_tree(o.bind(py))? {
                Some(copy) => Ok(copy),
                // Not expected (the private tree passed the bounds when it was stored): a
                // pickle round trip copies it all the same.
                None => {
                    let p = pickle(py)?;
                    let data = p.dumps.bind(py).call1((o.bind(py), p.protocol.bind(py)))?;
                    p.loads.bind(py).call1((data,))
                }
            },
            Kept::FlatDict(d) => Ok(d.bind(py).copy()?.into_any()),
            Kept::FlatList(l) => Ok(l.bind(py).get_slice(0, l.bind(py).len()).into_any()),
            Kept::Pickled(data) => pickle(py)?.loads.bind(py).call1((data.bind(py),)),
        }
    }
}

/// A private copy as it is kept: a flat dict or list as such (copied in one C call per
/// reader), any other tree as a tree.
fn flat(tree: Bound<'_, PyAny>) -> Kept {
    let tree = match tree.cast_into_exact::<PyDict>() {
        Ok(d) if d.iter().all(|(k, x)| immutable(&k, 0) && immutable(&x, 0)) => {
            return Kept::FlatDict(d.unbind());
        }
        Ok(d) => d.into_any(),
        Err(e) => e.into_inner(),
    };
    match tree.cast_into_exact::<PyList>() {
        Ok(l) if l.iter().all(|x| immutable(&x, 0)) => Kept::FlatList(l.unbind()),
        Ok(l) => Kept::Tree(l.into_any().unbind()),
        Err(e) => Kept::Tree(e.into_inner().unbind()),
    }
}

/// What a reader takes of a value under the L1's lock ([`PyValue::take`]).
pub(crate) enum Taken {
    /// The object itself (immutable, or `copy_values=False`): a new reference.
    Object(Py<PyAny>),
    /// A value to copy for the reader ([`PyValue::bind`]), outside the lock.
    Copy(PyValue),
}

impl PyValue {
    /// What a reader takes while the entry is locked: the shared object (a reference count
    /// bump, no `Arc` clone), else the value to copy once the lock is released (copying
    /// allocates, which may run any Python code).
    pub(crate) fn take(&self, py: Python<'_>) -> Taken {
        match &*self.obj {
            Kept::Shared(o) => Taken::Object(o.clone_ref(py)),
            _ => Taken::Copy(self.clone()),
        }
    }
}

/// The type of `herdless.ABSENT`: a loader returns it to say the thing does not exist.
///
/// The absence is cached for `negative_ttl` and handed back as `ABSENT` to every caller, so a
/// decorated function behaves the same whether the answer came from the origin or the cache.
/// It is falsy and a singleton: test it with `is ABSENT`.
#[pyclass(frozen, module = "herdless", name = "Absent")]
pub(crate) struct Absent;

#[pymethods]
impl Absent {
    fn __repr__(&self) -> &'static str {
        "herdless.ABSENT"
    }

    fn __bool__(&self) -> bool {
        false
    }

    /// Pickles as a reference to the singleton.
    fn __reduce__(&self) -> &'static str {
        "ABSENT"
    }
}

static ABSENT: PyOnceLock<Py<Absent>> = PyOnceLock::new();

/// The `ABSENT` singleton.
pub(crate) fn absent(py: Python<'_>) -> PyResult<&Bound<'_, Absent>> {
    ABSENT
        .get_or_try_init(py, || Py::new(py, Absent))
        .map(|a| a.bind(py))
}

/// What a loader's return value means to the engine: `ABSENT` is an absence. `copy`: the
/// cache's `copy_values`.
pub(crate) fn from_loader(obj: Bound<'_, PyAny>, copy: bool) -> PyResult<Option<PyValue>> {
    if obj.is(absent(obj.py())?) {
        Ok(None)
    } else {
        PyValue::new(obj, copy).map(Some)
    }
}

/// What a caller receives: the cached value (its own copy of a mutable one), or `ABSENT`
/// for a cached absence.
pub(crate) fn to_caller(py: Python<'_>, value: Option<PyValue>) -> PyResult<Py<PyAny>> {
    match value {
        Some(v) => Ok(v.bind(py)?.unbind()),
        None => Ok(absent(py)?.clone().into_any().unbind()),
    }
}
