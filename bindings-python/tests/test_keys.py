"""KeyBuilder is the engine's: the format is the one documented in core/src/key/mod.rs."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from herdless import KeyBuildError, KeyBuilder, UnsupportedKeyValue
from herdless import _native


def test_documented_examples() -> None:
    assert KeyBuilder("shop").entity("products").param("page", 2).build() == "shop:v1:products?page=#2"
    key = (
        KeyBuilder("users").version(2).entity("profile").id(42).param("lang", "en")
        .param("fields", ["name", "email"]).param("team", None).build()
    )
    assert key == "users:v2:profile:#42?fields=#[email,name]&lang=en&team=#null"


def test_values_are_typed_and_normalised() -> None:
    def k(v: Any) -> str:
        return KeyBuilder("ns").entity("e").id(v).build()

    assert k(1) == "ns:v1:e:#1"
    assert k(1.5) == "ns:v1:e:#1.5e0"
    assert k(-0.0) == k(0.0) == "ns:v1:e:#0e0"
    assert k(True) == "ns:v1:e:#true"
    assert k("") == "ns:v1:e:"
    assert k(2**100) == f"ns:v1:e:#{2**100}"
    assert k([3, 1, 2, 3]) == k({1, 2, 3}) == k((1, 2, 3)) == "ns:v1:e:#[#1,#2,#3]"
    assert k([""]) == "ns:v1:e:#[,]"
    assert len({k(1), k("1"), k(1.0), k(True), k("#1")}) == 5
    assert KeyBuilder("n").entity("a:b").id("c").build() == "n:v1:a%3Ab:c"
    assert KeyBuilder("ns").entity("e").param("q", "x&y=z").build() == "ns:v1:e?q=x%26y%3Dz"
    assert k("日本 語") == "ns:v1:e:日本%20語"


def test_builder_is_immutable() -> None:
    base = KeyBuilder("ns").entity("e")
    a = base.id(1)
    b = base.id(2)
    assert a.build() != b.build()
    assert base.build() == "ns:v1:e"


def test_errors() -> None:
    with pytest.raises(KeyBuildError, match="entity"):
        KeyBuilder("ns").build()
    with pytest.raises(KeyBuildError, match="namespace"):
        KeyBuilder("").entity("e").build()
    with pytest.raises(KeyBuildError, match="reserved"):
        KeyBuilder("a:b").entity("e").build()
    with pytest.raises(KeyBuildError, match="more than once"):
        KeyBuilder("ns").entity("e").param("a", 1).param("a", 2).build()
    with pytest.raises(KeyBuildError, match="NaN"):
        KeyBuilder("ns").entity("e").id(math.nan).build()
    with pytest.raises(UnsupportedKeyValue):
        KeyBuilder("ns").entity("e").id(object())
    with pytest.raises(UnsupportedKeyValue, match="128 bits"):
        KeyBuilder("ns").entity("e").id(2**130)
    with pytest.raises(OverflowError):
        KeyBuilder("ns").version(-1)
    with pytest.raises(UnsupportedKeyValue, match="nest"):
        deep: Any = frozenset()
        for _ in range(40):
            deep = frozenset({deep})
        KeyBuilder("ns").entity("e").id(deep)


def test_hostile_collections_are_refused_cleanly() -> None:
    # Request input: a list nested 100,000 deep (what json.loads of 200 KB gives), a list
    # that contains itself, and lists that share sub-lists (2^30 appearances in 30 levels).
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(UnsupportedKeyValue, match="nest more than 32 deep"):
        KeyBuilder("ns").entity("e").id(deep)
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    with pytest.raises(UnsupportedKeyValue, match="nest more than 32 deep"):
        KeyBuilder("ns").entity("e").param("q", cyclic)
    shared: Any = [1]
    for _ in range(30):
        shared = [shared, shared]
    with pytest.raises(UnsupportedKeyValue, match="more than 65536 values"):
        KeyBuilder("ns").entity("e").id(shared)


ALPHABET = ["a", "b", ":", "?", "&", "=", "%", ",", "#", "[", "]", " ", "\n", "é", "🦀"]


def random_value(rng: random.Random) -> Any:
    kind = rng.randrange(7)
    if kind == 0:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(4)))
    if kind == 1:
        return rng.randrange(-10**20, 10**20)
    if kind == 2:
        return rng.choice([0.0, -0.0, 1.0, -2.5, 1e300, 5e-324, 0.1])
    if kind == 3:
        return rng.random() < 0.5
    if kind == 4:
        return None
    if kind == 5:
        return frozenset(random_value(rng) for _ in range(rng.randrange(3)))
    return "#1"


def test_the_decorator_keyer_matches_the_builder() -> None:
    # The keyer writes parameters in a precomputed order; the builder sorts them itself.
    rng = random.Random(7)
    names = ["b", "a", "zeta", "A", "_x", "é", "aa"]
    for _ in range(300):
        chosen = rng.sample(names, rng.randrange(1, len(names)))
        keyer = _native.Keyer("ns", 3, "mod.fn", [(n, 1, False, None, False) for n in chosen], True)
        values = {n: random_value(rng) for n in chosen}
        extra = {"ex tra": random_value(rng)} if rng.random() < 0.3 else {}
        b = KeyBuilder("ns").version(3).entity("mod.fn")
        for n, v in {**values, **extra}.items():
            b = b.param(n, v)
        assert keyer(**values, **extra) == b.build()
