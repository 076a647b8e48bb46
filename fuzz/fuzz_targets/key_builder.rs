//! The key builder on arbitrary logical keys.
//!
//! Invariants, for every description:
//! - `build` fails exactly when the description is invalid, with the error the docs give
//!   (first the namespace, then the entity, then the first setter's error, then duplicates);
//! - a built key parses back (`parse(k).to_key() == k`) into the same parts;
//! - the same logical input spelled differently (parameters in another order, list elements
//!   shuffled and repeated, -0.0 for 0.0) gives the same key;
//! - for two descriptions: equal keys exactly when the logical inputs are equal
//!   (parameters are a map, lists are sets, integers compare by value, -0.0 == 0.0).
#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use arbitrary::Arbitrary;
use herdless::key;
use herdless::{KeyBuilder, KeyError, Param};
use libfuzzer_sys::fuzz_target;

/// Fragments that exercise escaping and the separators; the fuzzer adds any other char.
const PIECES: &[&str] = &[
    "a", "b", ":", "?", "&", "=", "%", "%3A", ",", "#", "[", "]", " ", "\n", "\u{7f}", "é", "🦀",
    "#1", "#null", "v1",
];

#[derive(Arbitrary, Debug, Clone)]
enum Piece {
    Known(u8),
    Char(char),
}

#[derive(Arbitrary, Debug, Clone)]
struct Text(Vec<Piece>);

impl Text {
    fn get(&self) -> String {
        self.0
            .iter()
            .map(|p| match p {
                Piece::Known(i) => PIECES[usize::from(*i) % PIECES.len()].to_string(),
                Piece::Char(c) => c.to_string(),
            })
            .collect()
    }
}

#[derive(Arbitrary, Debug, Clone)]
enum Value {
    Str(Text),
    Int(i128),
    /// Small integers, so that equal values meet often.
    Small(i8),
    Float(f64),
    Bool(bool),
    Null,
    List(Vec<Value>),
}

#[derive(Arbitrary, Debug, Clone)]
struct Desc {
    namespace: Text,
    version: Option<u32>,
    entity: Text,
    id: Option<Value>,
    params: Vec<(Text, Value)>,
}

/// A value as the key must distinguish it, independent of the encoding.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum L {
    Str(String),
    Int(i128),
    Float(u64),
    Bool(bool),
    Null,
    List(BTreeSet<L>),
}

type Logical = (String, u32, String, Option<L>, BTreeMap<String, L>);

/// The value as a `Param`; `scramble` spells the same value differently.
fn param(v: &Value, scramble: bool) -> Param<'static> {
    match v {
        Value::Str(t) => Param::from(t.get()),
        Value::Int(i) => Param::Int(*i),
        Value::Small(i) => Param::from(*i),
        Value::Float(f) if scramble && *f == 0.0 => Param::Float(-*f),
        Value::Float(f) => Param::Float(*f),
        Value::Bool(b) => Param::Bool(*b),
        Value::Null => Param::Null,
        Value::List(items) => {
            let mut out: Vec<_> = items.iter().map(|i| param(i, scramble)).collect();
            if scramble {
                out.reverse();
                // Repeating a nested list at every level would double the size per level.
                if let Some(first) = out.first().filter(|p| !matches!(p, Param::List(_))) {
                    out.push(first.clone());
                }
            }
            Param::List(out)
        }
    }
}

/// The logical value, or the error `to_canonical` reports first (same traversal order).
fn logical(p: &Param<'_>, depth: usize) -> Result<L, KeyError> {
    Ok(match p {
        Param::Str(s) => L::Str(s.to_string()),
        Param::Int(i) => L::Int(*i),
        Param::Float(f) if !f.is_finite() => return Err(KeyError::InvalidFloat),
        Param::Float(f) => L::Float(if *f == 0.0 { 0 } else { f.to_bits() }),
        Param::Bool(b) => L::Bool(*b),
        Param::Null => L::Null,
        Param::List(_) if depth >= 32 => return Err(KeyError::TooDeep),
        Param::List(items) => L::List(
            items
                .iter()
                .map(|i| logical(i, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
    })
}

fn reserved(c: char) -> bool {
    "%:?&=,#[] ".contains(c) || c.is_ascii_control()
}

/// What `build` must answer for `d`: the logical key, or the documented first error.
fn expected(d: &Desc) -> Result<Logical, KeyError> {
    let namespace = d.namespace.get();
    if namespace.is_empty() {
        return Err(KeyError::EmptyNamespace);
    }
    if namespace.chars().any(reserved) {
        return Err(KeyError::InvalidNamespace { namespace });
    }
    let entity = d.entity.get();
    if entity.is_empty() {
        return Err(KeyError::EmptyEntity);
    }
    let mut first: Option<KeyError> = None;
    let id =
        d.id.as_ref()
            .and_then(|v| match logical(&param(v, false), 0) {
                Ok(l) => Some(l),
                Err(e) => {
                    first.get_or_insert(e);
                    None
                }
            });
    let mut params = BTreeMap::new();
    let mut duplicate = None;
    for (name, value) in &d.params {
        let name = name.get();
        if name.is_empty() {
            first.get_or_insert(KeyError::EmptyParamName);
        }
        match logical(&param(value, false), 0) {
            Ok(l) => {
                if params.insert(name.clone(), l).is_some() && duplicate.is_none() {
                    duplicate = Some(name);
                }
            }
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first {
        return Err(e);
    }
    if duplicate.is_some() {
        // Which duplicate is reported depends on the escaped sort order: checked loosely.
        return Err(KeyError::DuplicateParam {
            name: String::new(),
        });
    }
    Ok((namespace, d.version.unwrap_or(1), entity, id, params))
}

fn builder(d: &Desc, scramble: bool) -> KeyBuilder {
    let mut b = KeyBuilder::new(&d.namespace.get()).entity(&d.entity.get());
    if let Some(v) = d.version {
        b = b.version(v);
    }
    if let Some(id) = &d.id {
        b = b.id(param(id, scramble));
    }
    let mut params: Vec<_> = d.params.iter().collect();
    if scramble {
        // Another order of the same map; the first error must stay the first one, so only
        // valid descriptions are scrambled.
        params.reverse();
    }
    for (name, value) in params {
        b = b.param(&name.get(), param(value, scramble));
    }
    b
}

/// Builds `d`, checks it against `expected` and the parser, and returns both.
fn check(d: &Desc) -> Option<(String, Logical)> {
    let want = expected(d);
    let got = builder(d, false).build();
    let (key, logical_key) = match (got, want) {
        (Ok(k), Ok(l)) => (k, l),
        (Err(KeyError::DuplicateParam { .. }), Err(KeyError::DuplicateParam { .. })) => {
            return None;
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "wrong error for {d:?}");
            return None;
        }
        (got, want) => panic!("build gave {got:?}, expected {want:?}, for {d:?}"),
    };
    let parsed = key::parse(&key).unwrap_or_else(|e| panic!("{key:?} does not parse: {e}"));
    assert_eq!(parsed.to_key(), key);
    let (namespace, version, entity, id, params) = &logical_key;
    assert_eq!(key::namespace_of(&key), namespace);
    assert_eq!(
        (&parsed.namespace, parsed.version, &parsed.entity),
        (namespace, *version, entity)
    );
    let parsed_id = parsed.id.as_ref().map(|t| {
        logical(
            &Param::from_canonical(t).expect("parsed id is canonical"),
            0,
        )
        .expect("valid")
    });
    assert_eq!(&parsed_id, id);
    let parsed_params: BTreeMap<_, _> = parsed
        .params
        .iter()
        .map(|(n, v)| {
            let p = Param::from_canonical(v).expect("parsed value is canonical");
            (n.clone(), logical(&p, 0).expect("valid"))
        })
        .collect();
    assert_eq!(parsed_params.len(), parsed.params.len());
    assert_eq!(&parsed_params, params);
    let again = builder(d, true).build();
    assert_eq!(again.as_ref(), Ok(&key), "same logical input, another key");
    Some((key, logical_key))
}

fuzz_target!(|pair: (Desc, Desc)| {
    let a = check(&pair.0);
    let b = check(&pair.1);
    if let (Some((ka, la)), Some((kb, lb))) = (a, b) {
        assert_eq!(
            ka == kb,
            la == lb,
            "keys {ka:?} / {kb:?} for logical {la:?} / {lb:?}"
        );
    }
});
