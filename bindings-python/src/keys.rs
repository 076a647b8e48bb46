//! Canonical keys from Python: the engine's own [`KeyBuilder`] (one format in every language,
//! byte for byte), and the decorator's [`Keyer`], which binds a call's arguments to the
//! function's parameters and writes them as the key's parameters.

use std::borrow::Cow;

use herdless::key::{MAX_DEPTH, MAX_VALUES, ParsedKey, parse};
use herdless::{KeyBuilder as CoreKeyBuilder, Param};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PySet, PyString, PyTuple};

use crate::errors::{key_error, unsupported_key_value};

/// Converts a Python value to a key value.
///
/// `str`, `int` (any size that fits 128 bits), `float` (finite), `bool`, `None`, and
/// `set`/`frozenset` of those (a key list is a set: sorted and deduplicated). With
/// `sequences`, `list` and `tuple` are accepted as sets too (the explicit `KeyBuilder`, whose
/// docs say so); the decorator refuses them, because there the order of a list is meaningful
/// and two different calls must never share a key.
pub(crate) fn to_param<'a>(
    obj: &'a Bound<'_, PyAny>,
    what: &dyn Fn() -> String,
    sequences: bool,
) -> PyResult<Param<'a>> {
    let py = obj.py();
    if obj.is_none() {
        return Ok(Param::Null);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Param::Str(Cow::Borrowed(s.to_str()?)));
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Param::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Param::Int(i128::from(i)));
        }
        return match obj.extract::<i128>() {
            Ok(i) => Ok(Param::Int(i)),
            Err(_) => Err(unsupported_key_value(
                py,
                format!("{}: the integer does not fit in 128 bits", what()),
            )),
        };
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Param::Float(f.value()));
    }
    let is_set = obj.is_instance_of::<PySet>() || obj.is_instance_of::<PyFrozenSet>();
    let is_seq = obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>();
    if is_set || (sequences && is_seq) {
        let mut left = MAX_VALUES;
        return collection(obj, what, sequences, 0, &mut left).map(Param::List);
    }
    let ty = obj.get_type().qualname()?;
    let hint = if is_seq {
        " (a list or tuple is ordered and a key's lists are sets: pass a frozenset, a str, or key=)"
    } else {
        ""
    };
    Err(unsupported_key_value(
        py,
        format!(
            "{}: a {ty} cannot be part of a cache key; use str, int, float, bool, None or a set of those{hint}",
            what()
        ),
    ))
}

fn collection(
    obj: &Bound<'_, PyAny>,
    what: &dyn Fn() -> String,
    sequences: bool,
    depth: usize,
    left: &mut usize,
) -> PyResult<Vec<Param<'static>>> {
    if depth >= MAX_DEPTH {
        return Err(unsupported_key_value(
            obj.py(),
            format!("{}: collections nest more than {MAX_DEPTH} deep", what()),
        ));
    }
    let mut items = Vec::new();
    for item in obj.try_iter()? {
        let item = item?;
        // Collections that share members (`a = [b, b]`, `b = [c, c]`, ...) are counted per
        // appearance, so they cannot make a key exponentially large.
        *left = left.checked_sub(1).ok_or_else(|| {
            unsupported_key_value(
                obj.py(),
                format!("{}: collections hold more than {MAX_VALUES} values", what()),
            )
        })?;
        let is_coll = item.is_instance_of::<PySet>()
            || item.is_instance_of::<PyFrozenSet>()
            || (sequences && (item.is_instance_of::<PyList>() || item.is_instance_of::<PyTuple>()));
        let p = if is_coll {
            Param::List(collection(&item, what, sequences, depth + 1, left)?)
        } else {
            owned(to_param(&item, what, sequences)?)
        };
        items.push(p);
    }
    Ok(items)
}

fn owned(p: Param<'_>) -> Param<'static> {
    match p {
        Param::Str(s) => Param::Str(Cow::Owned(s.into_owned())),
        Param::Int(i) => Param::Int(i),
        Param::Float(f) => Param::Float(f),
        Param::Bool(b) => Param::Bool(b),
        Param::List(items) => Param::List(items.into_iter().map(owned).collect()),
        Param::Null => Param::Null,
    }
}

/// Builds canonical keys: `{namespace}:v{version}:{entity}[:{id}][?{name}={value}&...]`.
///
/// Immutable: each method returns a new builder, so a partly built one can be reused.
/// Errors (an empty entity, a NaN, a duplicate parameter) are raised by `build()`.
#[pyclass(frozen, module = "herdless", name = "KeyBuilder")]
#[derive(Clone)]
pub(crate) struct KeyBuilder(CoreKeyBuilder);

#[pymethods]
impl KeyBuilder {
    #[new]
    fn new(namespace: &str) -> Self {
        Self(CoreKeyBuilder::new(namespace))
    }

    /// The schema version of the cached representation (default 1).
    fn version(&self, version: u32) -> Self {
        Self(self.0.clone().version(version))
    }

    /// The entity, e.g. `"user"` (required).
    fn entity(&self, entity: &str) -> Self {
        Self(self.0.clone().entity(entity))
    }

    /// The id (a key value: str, int, float, bool, None, or a set/list/tuple as a set).
    fn id(&self, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let p = to_param(value, &|| "the id".to_owned(), true)?;
        Ok(Self(self.0.clone().id(p)))
    }

    /// Adds a parameter (names are sorted in the key, so the order of calls does not matter).
    fn param(&self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let p = to_param(value, &|| format!("parameter {name:?}"), true)?;
        Ok(Self(self.0.clone().param(name, p)))
    }

    /// The canonical key.
    fn build(&self, py: Python<'_>) -> PyResult<String> {
        self.0.build().map_err(|e| key_error(py, e))
    }

    fn __repr__(&self) -> String {
        format!("<KeyBuilder {:?}>", self.0)
    }
}

/// How an argument reaches a parameter (the kinds of `inspect.Parameter`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    PositionalOnly,
    PositionalOrKeyword,
    KeywordOnly,
}

struct Spec {
    name: String,
    kind: Kind,
    /// Canonical text of the default, computed once.
    default: Option<String>,
    ignored: bool,
}

/// Turns a call's arguments into the function's key, as `inspect.Signature.bind` followed by
/// `apply_defaults` would see them: `f(1)` and `f(1, lang="en")` with `lang="en"` as default
/// are one key. Every non-ignored parameter becomes a key parameter under its name; extra
/// keyword arguments (`**kwargs`) too.
#[pyclass(frozen, module = "herdless._native", name = "Keyer")]
pub(crate) struct Keyer {
    namespace: String,
    version: u32,
    entity: String,
    specs: Vec<Spec>,
    /// Indices of the non-ignored parameters, in the key's parameter order.
    order: Vec<usize>,
    /// `{namespace}:v{version}:{entity}`, as the builder writes it.
    prefix: String,
    /// Per entry of `order`: `?{name}=` or `&{name}=`, the name escaped as the builder does.
    heads: Vec<String>,
    positional: usize,
    var_keyword: bool,
}

#[pymethods]
impl Keyer {
    /// `params`: `(name, kind, has_default, default, ignored)` per parameter in signature
    /// order, kind 0 positional-only, 1 positional-or-keyword, 3 keyword-only (as
    /// `inspect.Parameter.kind`). Defaults are checked and encoded now.
    #[new]
    fn new(
        py: Python<'_>,
        namespace: &str,
        version: u32,
        entity: &str,
        params: Vec<(String, u8, bool, Bound<'_, PyAny>, bool)>,
        var_keyword: bool,
    ) -> PyResult<Self> {
        let mut specs = Vec::with_capacity(params.len());
        for (name, kind, has_default, default, ignored) in params {
            let kind = match kind {
                0 => Kind::PositionalOnly,
                1 => Kind::PositionalOrKeyword,
                3 => Kind::KeywordOnly,
                k => {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "unsupported parameter kind {k}"
                    )));
                }
            };
            let default = if has_default && !ignored {
                let what = || format!("the default of parameter {name:?}");
                let p = to_param(&default, &what, false)?;
                Some(p.to_canonical().map_err(|e| key_error(py, e))?)
            } else {
                None
            };
            specs.push(Spec {
                name,
                kind,
                default,
                ignored,
            });
        }
        let positional = specs
            .iter()
            .take_while(|s| s.kind != Kind::KeywordOnly)
            .count();
        // The key's parameter order is the builder's: build a probe key with every name and
        // read the order back, rather than re-implementing the sort here.
        let mut probe = CoreKeyBuilder::new(namespace)
            .version(version)
            .entity(entity);
        for s in specs.iter().filter(|s| !s.ignored) {
            probe = probe.param(&s.name, Param::Null);
        }
        let probe = probe.build().map_err(|e| key_error(py, e))?;
        let parsed = parse(&probe).map_err(|e| key_error(py, e))?;
        let order = parsed
            .params
            .iter()
            .map(|(name, _)| {
                specs
                    .iter()
                    .position(|s| !s.ignored && &s.name == name)
                    .expect("every probed name is a parameter")
            })
            .collect::<Vec<usize>>();
        // The constant parts of every key, written once by the engine's own writer (so the
        // escaping is the builder's), leaving only the values to write per call.
        let written = |params: Vec<(String, String)>| {
            ParsedKey {
                namespace: namespace.to_owned(),
                version,
                entity: entity.to_owned(),
                id: None,
                params,
            }
            .to_key()
        };
        let prefix = written(Vec::new());
        let heads = order
            .iter()
            .enumerate()
            .map(|(pos, &i)| {
                let key = written(vec![(specs[i].name.clone(), String::new())]);
                let head = &key[prefix.len() + 1..];
                format!("{}{head}", if pos == 0 { '?' } else { '&' })
            })
            .collect();
        Ok(Self {
            namespace: namespace.to_owned(),
            version,
            entity: entity.to_owned(),
            specs,
            order,
            prefix,
            heads,
            positional,
            var_keyword,
        })
    }

    /// The key of a call with these arguments.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        self.key(args, kwargs)
    }
}

impl Keyer {
    /// The key of a call with these arguments.
    pub(crate) fn key(
        &self,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        let mut out = String::new();
        self.write_key(args, kwargs, &mut out)?;
        Ok(out)
    }

    /// Writes the key of a call into `out` (which the caller may reuse between calls).
    pub(crate) fn write_key(
        &self,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
        out: &mut String,
    ) -> PyResult<()> {
        // Asked once: under the stable ABI each is a call into the interpreter.
        let given = args.len();
        match kwargs {
            Some(k) if !k.is_empty() => out.push_str(&self.key_bound(args, Some(k))?),
            _ if given > self.positional => out.push_str(&self.key_bound(args, None)?),
            _ => self.write_positional(args.py(), given, |i| args.get_borrowed_item(i), out)?,
        }
        Ok(())
    }

    /// Whether a call of `given` positional arguments and no keywords is keyed by
    /// [`write_positional`](Self::write_positional) (more than the function takes is an
    /// error that the binding path words).
    pub(crate) fn takes_positional(&self, given: usize) -> bool {
        given <= self.positional
    }

    /// The hit path: `given` positional arguments only (the `i`th borrowed by `arg(i)`:
    /// from the call's tuple, or from a vectorcall's array), written straight into `out`.
    pub(crate) fn write_positional<'a, 'py>(
        &self,
        py: Python<'py>,
        given: usize,
        arg: impl Fn(usize) -> PyResult<Borrowed<'a, 'py, PyAny>>,
        out: &mut String,
    ) -> PyResult<()> {
        out.reserve(self.prefix.len() + 24 * self.order.len());
        out.push_str(&self.prefix);
        for (&i, head) in self.order.iter().zip(&self.heads) {
            out.push_str(head);
            let spec = &self.specs[i];
            if i < given {
                // Borrowed from the tuple: no reference taken and dropped per argument.
                let v = arg(i)?;
                // An exact int that fits 64 bits (the common id): its canonical text is `#`
                // and its decimal digits (`Param::to_canonical`), written in place without an
                // allocation. The equivalence with the builder is tested on random calls.
                if v.is_exact_instance_of::<PyInt>() {
                    if let Ok(n) = v.extract::<i64>() {
                        out.push('#');
                        out.push_str(itoa::Buffer::new().format(n));
                        continue;
                    }
                }
                let what = || format!("argument {:?}", spec.name);
                let p = to_param(&v, &what, false)?;
                out.push_str(&p.to_canonical().map_err(|e| key_error(py, e))?);
            } else if let Some(d) = &spec.default {
                out.push_str(d);
            } else {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "{}() missing required argument {:?}",
                    self.entity, spec.name
                )));
            }
        }
        Ok(())
    }

    /// Any call: arguments bound to parameters as `inspect.Signature.bind` does.
    fn key_bound(
        &self,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        let py = args.py();
        let type_error = |m: String| pyo3::exceptions::PyTypeError::new_err(m);
        let mut slots: Vec<Option<Bound<'_, PyAny>>> = vec![None; self.specs.len()];
        if args.len() > self.positional {
            return Err(type_error(format!(
                "{}() takes {} positional arguments but {} were given",
                self.entity,
                self.positional,
                args.len()
            )));
        }
        for (slot, arg) in slots.iter_mut().zip(args.iter()) {
            *slot = Some(arg);
        }
        let mut extra = Vec::new();
        if let Some(kwargs) = kwargs {
            for (k, v) in kwargs.iter() {
                let name = k.cast::<PyString>()?.to_str()?.to_owned();
                let found = self
                    .specs
                    .iter()
                    .position(|s| s.kind != Kind::PositionalOnly && s.name == name);
                match found {
                    Some(i) if slots[i].is_some() => {
                        return Err(type_error(format!(
                            "{}() got multiple values for argument {name:?}",
                            self.entity
                        )));
                    }
                    Some(i) => slots[i] = Some(v),
                    None if self.var_keyword => extra.push((name, v)),
                    None => {
                        return Err(type_error(format!(
                            "{}() got an unexpected keyword argument {name:?}",
                            self.entity
                        )));
                    }
                }
            }
        }
        let mut texts: Vec<Option<String>> = vec![None; self.specs.len()];
        for (i, spec) in self.specs.iter().enumerate() {
            if spec.ignored {
                continue;
            }
            texts[i] = Some(match &slots[i] {
                Some(v) => {
                    let what = || format!("argument {:?}", spec.name);
                    let p = to_param(v, &what, false)?;
                    p.to_canonical().map_err(|e| key_error(py, e))?
                }
                None => match &spec.default {
                    Some(d) => d.clone(),
                    None => {
                        return Err(type_error(format!(
                            "{}() missing required argument {:?}",
                            self.entity, spec.name
                        )));
                    }
                },
            });
        }
        if extra.is_empty() {
            let mut out = self.prefix.clone();
            for (&i, head) in self.order.iter().zip(&self.heads) {
                out.push_str(head);
                out.push_str(
                    texts[i]
                        .as_deref()
                        .expect("every keyed parameter has a text"),
                );
            }
            return Ok(out);
        }
        // Extra keyword arguments: names known only now, so let the builder sort them all.
        let mut b = CoreKeyBuilder::new(&self.namespace)
            .version(self.version)
            .entity(&self.entity);
        for (i, spec) in self.specs.iter().enumerate() {
            if let Some(text) = &texts[i] {
                let p = Param::from_canonical(text).map_err(|e| key_error(py, e))?;
                b = b.param(&spec.name, p);
            }
        }
        for (name, v) in &extra {
            let what = || format!("argument {name:?}");
            b = b.param(name, to_param(v, &what, false)?);
        }
        b.build().map_err(|e| key_error(py, e))
    }
}
