//! The key format's promises: canonical, injective, and parse the inverse of build.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use super::builder::KeyBuilder;
use super::error::{KeyError, MAX_DEPTH, MAX_VALUES};
use super::param::Param;
use super::parse::{in_namespace, namespace_of, parse};

fn kb() -> KeyBuilder {
    KeyBuilder::new("ns").entity("e")
}

fn id_key<'a>(p: impl Into<Param<'a>>) -> String {
    kb().id(p).build().unwrap()
}

#[test]
fn format_and_param_order() {
    let a = kb()
        .id("x")
        .param("b", 2)
        .param("a", true)
        .param("c", "")
        .build()
        .unwrap();
    let b = kb()
        .param("c", "")
        .param("a", true)
        .id("x")
        .param("b", 2)
        .build()
        .unwrap();
    assert_eq!(a, "ns:v1:e:x?a=#true&b=#2&c=");
    assert_eq!(a, b);
    assert_ne!(
        a,
        kb().id("x").param("a", true).param("b", 2).build().unwrap()
    );
    assert_eq!(kb().version(7).build().unwrap(), "ns:v7:e");
    assert_eq!(id_key(""), "ns:v1:e:");
    assert_eq!(namespace_of("ns:v1:e"), "ns");
    assert_eq!(namespace_of("plain"), "plain");
}

#[test]
fn in_namespace_is_namespace_of_compared() {
    let keys = [
        "ns:v1:e",
        "ns",
        "ns:",
        "nsx:v1",
        "n",
        "",
        ":a",
        "ns::b",
        "other:ns:x",
    ];
    for key in keys {
        for name in ["ns", "n", "", "nsx", "other", "plain"] {
            assert_eq!(
                in_namespace(key, name),
                namespace_of(key) == name,
                "{key:?} in {name:?}"
            );
        }
    }
}

#[test]
fn values_are_normalised_and_typed() {
    assert_eq!(id_key(1u8), id_key(1i128));
    assert_eq!(id_key(1usize), "ns:v1:e:#1");
    assert_eq!(id_key(-0.0), id_key(0.0));
    assert_eq!(id_key(1.5), "ns:v1:e:#1.5e0");
    assert_eq!(id_key(None::<i32>), id_key(Param::Null));
    let typed = [
        id_key(1),
        id_key("1"),
        id_key("01"),
        id_key(1.0),
        id_key(true),
        id_key("#1"),
    ];
    assert_eq!(typed.iter().collect::<BTreeSet<_>>().len(), typed.len());
    for bad in "#01 #+1 #-0 #1E0 #1.0e0 #1e+0 %3a %41 #nan #[b,a] #[a,a] #[,,] #[".split(' ') {
        assert!(Param::from_canonical(bad).is_err(), "{bad}");
    }
}

#[test]
fn lists_are_sets() {
    assert_eq!(id_key(vec![3, 1, 2, 3]), id_key([1, 2, 3]));
    assert_eq!(id_key(&["b", "a"][..]), "ns:v1:e:#[a,b]");
    assert_eq!(id_key(Vec::<i32>::new()), "ns:v1:e:#[]");
    assert_eq!(id_key([""]), "ns:v1:e:#[,]");
    assert_eq!(id_key(["", "a"]), "ns:v1:e:#[,a]");
    assert_ne!(id_key(["a,b"]), id_key(["a", "b"]));
    assert_ne!(id_key([vec!["a", "b"]]), id_key(["a", "b"]));
    let mut deep = Param::List(vec![]);
    for _ in 0..MAX_DEPTH {
        deep = Param::List(vec![deep]);
    }
    assert_eq!(kb().id(deep).build(), Err(KeyError::TooDeep));
    let wide = Param::List((0..MAX_VALUES as i64).map(Param::from).collect());
    assert_eq!(kb().id(wide).build(), Err(KeyError::TooManyValues));
    let fits = Param::List((0..MAX_VALUES as i64 - 1).map(Param::from).collect());
    assert!(kb().id(fits).build().is_ok());
}

#[test]
fn separators_cannot_forge() {
    let k = |e: &str, id: &str| KeyBuilder::new("n").entity(e).id(id).build().unwrap();
    assert_ne!(k("a:b", "c"), k("a", "b:c"));
    assert_eq!(k("a:b", "c"), "n:v1:a%3Ab:c");
    let one = kb().param("q", "x&y=z").build().unwrap();
    assert_ne!(one, kb().param("q", "x").param("y", "z").build().unwrap());
    assert_eq!(one, "ns:v1:e?q=x%26y%3Dz");
    assert_ne!(
        kb().param("a=b", "c").build(),
        kb().param("a", "b=c").build()
    );
    assert_ne!(
        id_key("a?b=c"),
        kb().id("a").param("b", "c").build().unwrap()
    );
}

#[test]
fn errors() {
    let dup = kb().param("a", 1).param("b", 2).param("a", 1).build();
    assert_eq!(dup, Err(KeyError::DuplicateParam { name: "a".into() }));
    assert_eq!(
        KeyBuilder::new("").entity("e").build(),
        Err(KeyError::EmptyNamespace)
    );
    assert!(matches!(
        KeyBuilder::new("a:b").entity("e").build(),
        Err(KeyError::InvalidNamespace { .. })
    ));
    assert_eq!(KeyBuilder::new("ns").build(), Err(KeyError::EmptyEntity));
    assert_eq!(kb().param("", 1).build(), Err(KeyError::EmptyParamName));
    assert_eq!(kb().id(f64::NAN).build(), Err(KeyError::InvalidFloat));
    assert_eq!(
        kb().param("x", [f64::INFINITY]).build(),
        Err(KeyError::InvalidFloat)
    );
    let bad = "ns ns:v1 ns:1:e ns:v01:e ns:v1: ns:v1:e:a:b ns:v1:e? ns:v1:e?b=1&a=1 \
        ns:v1:e?a=1&a=1 ns:v1:e?a ns:v1:e?=x ns:v1:e?a=b=c ns:v1:e%3a n%41:v1:e";
    for key in bad.split_whitespace().chain([""]) {
        assert!(parse(key).is_err(), "{key}");
    }
}

#[test]
fn parse_round_trips() {
    let builders = [
        kb(),
        KeyBuilder::new("ünï")
            .version(0)
            .entity("ç:%")
            .id("日本 語")
            .param("ß", "🦀"),
        kb().version(u32::MAX)
            .id(i128::MIN)
            .param("f", -1e-300)
            .param("n", Param::Null),
        kb().id(vec![
            Param::from("a"),
            1.into(),
            2.5.into(),
            vec![""].into(),
        ])
        .param("s", " "),
        kb().id(u64::MAX)
            .param("\u{0}\n\u{7f}", "[#],=&?")
            .param("e", ""),
    ];
    for b in builders {
        let key = b.build().unwrap();
        let parsed = parse(&key).unwrap();
        assert_eq!(parsed.to_key(), key);
        assert_eq!(parsed.namespace, namespace_of(&key));
        if let Some(id) = &parsed.id {
            assert_eq!(
                &Param::from_canonical(id).unwrap().to_canonical().unwrap(),
                id
            );
        }
    }
    let p = parse("ünï:v0:ç%3A%25:日本%20語?ß=🦀").unwrap();
    assert_eq!(
        (p.entity.as_str(), p.id.as_deref()),
        ("ç:%", Some("日本%20語"))
    );
    assert_eq!(p.params, vec![("ß".into(), "🦀".into())]);
}

/// A logical value, compared independently of the encoding.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum L {
    Str(String),
    Int(i128),
    Float(u64),
    Bool(bool),
    Null,
    List(BTreeSet<L>),
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn string(&mut self) -> String {
        const PIECES: &[&str] = &[
            "a", "b", ":", "?", "&", "=", "%", "%3A", ",", "#", "[", "]", " ", "\n", "é", "🦀",
        ];
        (0..self.below(4))
            .map(|_| PIECES[self.below(PIECES.len())])
            .collect()
    }

    fn value(&mut self, depth: usize) -> (Param<'static>, L) {
        const FLOATS: [f64; 6] = [0.0, -0.0, 1.0, -2.5, 1e300, 5e-324];
        match self.below(if depth < 2 { 7 } else { 6 }) {
            0 | 1 => {
                let s = self.string();
                (s.clone().into(), L::Str(s))
            }
            2 => {
                let i = self.below(21) as i128 - 10;
                (i.into(), L::Int(i))
            }
            3 => {
                let f = FLOATS[self.below(FLOATS.len())];
                (f.into(), L::Float(if f == 0.0 { 0 } else { f.to_bits() }))
            }
            4 => {
                let b = self.below(2) == 0;
                (b.into(), L::Bool(b))
            }
            5 => (Param::Null, L::Null),
            _ => {
                let items: Vec<_> = (0..self.below(4)).map(|_| self.value(depth + 1)).collect();
                let set = items.iter().map(|(_, l)| l.clone()).collect();
                (
                    Param::List(items.into_iter().map(|(p, _)| p).collect()),
                    L::List(set),
                )
            }
        }
    }
}

type Logical = (u32, String, Option<L>, BTreeMap<String, L>);

#[test]
fn random_injectivity() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut by_key: BTreeMap<String, Logical> = BTreeMap::new();
    let mut by_logical: BTreeMap<Logical, String> = BTreeMap::new();
    for _ in 0..5000 {
        let (version, entity) = (rng.below(2) as u32, rng.string());
        let mut b = KeyBuilder::new("ns").version(version).entity(&entity);
        let mut id = None;
        if rng.below(3) != 0 {
            let (p, l) = rng.value(0);
            (b, id) = (b.id(p), Some(l));
        }
        let (mut params, mut duplicate, mut empty_name) = (BTreeMap::new(), false, false);
        for _ in 0..rng.below(4) {
            let (name, (p, l)) = (rng.string(), rng.value(0));
            b = b.param(&name, p);
            empty_name |= name.is_empty();
            duplicate |= params.insert(name, l).is_some();
        }
        let key = match b.build() {
            Ok(key) => key,
            Err(KeyError::EmptyEntity) if entity.is_empty() => continue,
            Err(KeyError::EmptyParamName) if empty_name => continue,
            Err(KeyError::DuplicateParam { .. }) if duplicate => continue,
            Err(e) => panic!("unexpected {e:?}"),
        };
        let parsed = parse(&key).unwrap();
        assert_eq!(parsed.to_key(), key);
        assert_eq!((parsed.version, &parsed.entity), (version, &entity));
        let names: BTreeSet<_> = parsed.params.iter().map(|(n, _)| n).collect();
        assert_eq!(names, params.keys().collect());
        assert_eq!(parsed.params.len(), params.len());
        let logical = (version, entity, id, params);
        assert_eq!(
            by_key.entry(key.clone()).or_insert_with(|| logical.clone()),
            &logical
        );
        assert_eq!(by_logical.entry(logical).or_insert(key.clone()), &key);
    }
    assert!(by_key.len() > 2000, "only {} distinct keys", by_key.len());
}
