"""Every option of Cache(...) is checked, with a clear exception for a bad value or type."""

from __future__ import annotations

import math
from typing import Any

import pytest

from herdless import Cache, ConfigError, ConfigTypeError, HerdlessError

DURATIONS_POSITIVE = ["ttl", "negative_ttl", "wait_timeout", "max_stale", "soft_timeout", "hard_timeout"]
DURATIONS_ZERO_OK = ["grace", "failsafe_backoff"]
COUNTS = ["capacity", "origin_budget", "max_flights", "max_key_len", "max_namespaces"]


def make(**kwargs: Any) -> Cache:
    return Cache(**kwargs)


def test_defaults_and_good_values_build() -> None:
    Cache()
    Cache(
        ttl=1.5, grace=2, jitter=0.5, beta=0, negative_ttl=1, wait_timeout=0.25, max_stale=10,
        failsafe_backoff=0, soft_timeout=1, hard_timeout=2, capacity=1, origin_budget=3,
        max_flights=5, max_key_len=16, namespace="app",
    )


@pytest.mark.parametrize("name", DURATIONS_POSITIVE + DURATIONS_ZERO_OK)
@pytest.mark.parametrize("bad", ["5", b"5", [5], True, object()])
def test_durations_reject_wrong_types(name: str, bad: Any) -> None:
    with pytest.raises(ConfigTypeError, match=f"`{name}` must be a number of seconds"):
        make(**{name: bad})


@pytest.mark.parametrize("name", DURATIONS_POSITIVE + DURATIONS_ZERO_OK)
@pytest.mark.parametrize("bad", [-1, -0.5, math.nan, math.inf, -math.inf, 1e300])
def test_durations_reject_bad_values(name: str, bad: float) -> None:
    with pytest.raises(ConfigError, match=f"`{name}`"):
        make(**{name: bad})


@pytest.mark.parametrize("name", DURATIONS_POSITIVE)
@pytest.mark.parametrize("bad", [0, 0.0, 1e-12])
def test_positive_durations_reject_zero(name: str, bad: float) -> None:
    with pytest.raises(ConfigError, match=f"`{name}`"):
        make(**{name: bad})


@pytest.mark.parametrize("name", DURATIONS_ZERO_OK)
def test_some_durations_accept_zero(name: str) -> None:
    make(**{name: 0})


@pytest.mark.parametrize("name", COUNTS)
@pytest.mark.parametrize("bad", [1.0, "3", True, None.__class__])
def test_counts_reject_wrong_types(name: str, bad: Any) -> None:
    with pytest.raises(ConfigTypeError, match=f"`{name}` must be an int"):
        make(**{name: bad})


@pytest.mark.parametrize("name", COUNTS)
@pytest.mark.parametrize("bad", [0, -1, 2**63, 2**200])
def test_counts_reject_bad_values(name: str, bad: int) -> None:
    with pytest.raises(ConfigError, match=f"`{name}`"):
        make(**{name: bad})


@pytest.mark.parametrize("bad", [-0.1, 1, 1.5, math.nan, math.inf])
def test_jitter_range(bad: float) -> None:
    with pytest.raises(ConfigError, match="jitter"):
        make(jitter=bad)


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf])
def test_beta_range(bad: float) -> None:
    with pytest.raises(ConfigError, match="beta"):
        make(beta=bad)


@pytest.mark.parametrize("name", ["jitter", "beta"])
def test_floats_reject_wrong_types(name: str) -> None:
    with pytest.raises(ConfigTypeError, match=f"`{name}` must be a number"):
        make(**{name: "0.1"})


def test_inconsistent_options() -> None:
    with pytest.raises(ConfigError, match="soft_timeout"):
        make(soft_timeout=2, hard_timeout=1)
    with pytest.raises(ConfigError, match="max_stale"):
        make(grace=10, max_stale=5)


@pytest.mark.parametrize("bad", ["", "a:b", "with space", "a%b", "a?b"])
def test_namespace_values(bad: str) -> None:
    with pytest.raises(ConfigError, match="namespace"):
        make(namespace=bad)


def test_namespace_type() -> None:
    with pytest.raises(ConfigTypeError, match="namespace"):
        make(namespace=1)
    assert Cache(namespace="shop").namespace == "shop"
    assert Cache().namespace is None


@pytest.mark.parametrize("bad", ["localhost:6379", "http://x", "redis://", ""])
def test_redis_url_shape(bad: str) -> None:
    with pytest.raises(ConfigError, match="redis"):
        make(redis=bad)


def test_redis_type() -> None:
    with pytest.raises(ConfigTypeError, match="redis"):
        make(redis=6379)


def test_unknown_and_positional_options_are_refused() -> None:
    with pytest.raises(TypeError):
        make(tll=5)
    with pytest.raises(TypeError):
        Cache(5)  # type: ignore[call-arg]


def test_config_errors_are_in_the_hierarchy() -> None:
    assert issubclass(ConfigError, HerdlessError) and issubclass(ConfigError, ValueError)
    assert issubclass(ConfigTypeError, ConfigError) and issubclass(ConfigTypeError, TypeError)


def test_per_call_ttl_is_checked(cache: Cache) -> None:
    for bad in (0, -1, math.nan):
        with pytest.raises(ConfigError):
            cache.set("a:1", 1, ttl=bad)
        with pytest.raises(ConfigError):
            cache.get_or_load("a:1", lambda: 1, ttl=bad)
    with pytest.raises(ConfigTypeError):
        cache.set("a:1", 1, ttl="1")  # type: ignore[arg-type]


def test_decorator_options_are_checked(cache: Cache) -> None:
    with pytest.raises(ConfigTypeError):
        cache.cached(version="1")  # type: ignore[call-overload]
    with pytest.raises(ConfigError):
        cache.cached(version=-1)
    with pytest.raises(ConfigTypeError):
        cache.cached(ignore="self")
    with pytest.raises(ConfigTypeError):
        cache.cached(key="k")  # type: ignore[call-overload]
    with pytest.raises(ConfigError):
        cache.cached(ttl=0)(lambda: 1)
    with pytest.raises(ConfigError):
        cache.cached(namespace="a b")(lambda: 1)


def test_warm_concurrency_is_checked(cache: Cache) -> None:
    with pytest.raises(ConfigError):
        cache.warm(["a:1"], lambda k: k, concurrency=0)
    with pytest.raises(ConfigTypeError):
        cache.warm(["a:1"], lambda k: k, concurrency=2.0)  # type: ignore[arg-type]
