"""The acceptance check's shape, timed: ``c = herdless.Cache(); c.set("k", {"id": 42});
timeit(lambda: c.get("k"))`` against ``@functools.lru_cache def f(x): return {"id": 42};
timeit(lambda: f(42))``, plus the same ``get`` with ``copy_values=False`` and with a str
value. Best of 7 interleaved rounds of 200,000 calls, ns per call and the ratio to
``lru_cache``. Run: ``python bench_get_shape.py`` (herdless installed)."""

from __future__ import annotations

import functools
import timeit
from collections.abc import Callable
from typing import Any

import herdless


def main() -> None:
    copied = herdless.Cache()
    copied.set("k", {"id": 42})
    shared = herdless.Cache(copy_values=False)
    shared.set("k", {"id": 42})
    text = herdless.Cache()
    text.set("k", "v")

    @functools.lru_cache
    def f(x: int) -> dict[str, int]:
        return {"id": 42}

    f(42)
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("lru_cache f(42)", lambda: f(42)),
        ("get, dict (copied)", lambda: copied.get("k")),
        ("get, dict, copy_values=False", lambda: shared.get("k")),
        ("get, str", lambda: text.get("k")),
    ]
    best = {name: float("inf") for name, _ in cases}
    for _ in range(7):
        for name, call in cases:
            best[name] = min(best[name], timeit.timeit(call, number=200_000) / 200_000 * 1e9)
    lru = best["lru_cache f(42)"]
    for name, _ in cases:
        print(f"{name:<30} {best[name]:7.1f} ns  {best[name] / lru:.2f}x")


if __name__ == "__main__":
    main()
