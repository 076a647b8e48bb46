"""Value isolation's cost (``copy_values``): hits of ``get``, ``get_or_load`` and a decorated
function, for an immutable value (shared either way) and mutable ones (pickled with
``copy_values=True``, shared with ``False``), side by side in interleaved rounds. Best of
several rounds, nanoseconds per call. Needs herdless only (no compared libraries).

    python bench_copy.py          # with the installed herdless (a build without
                                  # copy_values measures its one behaviour: "shared")
"""

from __future__ import annotations

import platform
import sys
import timeit
from collections.abc import Callable
from typing import Any

import herdless

ROUNDS = 9
TARGET_S = 0.05

VALUES: dict[str, Any] = {
    "str (immutable)": "x" * 64,
    "tuple of ints (immutable)": tuple(range(10)),
    "dict, 5 fields": {"id": 1, "name": "alice", "plan": "free", "seats": 3, "ok": True},
    "list of 100 ints": list(range(100)),
    "dict of 20 dicts (a page)": {f"row{i}": {"id": i, "title": "t" * 20} for i in range(20)},
}


def calibrate(timer: timeit.Timer) -> int:
    per_call = timer.timeit(1000) / 1000
    return max(1000, min(1_000_000, int(TARGET_S / per_call)))


def caches() -> dict[str, herdless.Cache]:
    try:
        return {
            "copy": herdless.Cache(ttl=3600, copy_values=True),  # type: ignore[call-arg]
            "shared": herdless.Cache(ttl=3600, copy_values=False),  # type: ignore[call-arg]
        }
    except TypeError:  # a build before copy_values: every value shared
        return {"shared": herdless.Cache(ttl=3600)}


def main() -> None:
    cases: list[tuple[str, str, str, Callable[[], float]]] = []
    for mode, cache in caches().items():
        for vname, value in VALUES.items():
            key = f"k:{vname}"
            cache.set(key, value)

            @cache.cached(key=lambda v=vname: f"fn:{v}")
            def fn(v: str = vname) -> Any:
                return VALUES[v]

            fn()
            stmts: dict[str, Callable[[], Any]] = {
                "get": lambda c=cache, k=key: c.get(k),
                "get_or_load": lambda c=cache, k=key: c.get_or_load(k, lambda: None),
                "decorator": fn,
            }
            for op, stmt in stmts.items():
                timer = timeit.Timer(stmt)
                n = calibrate(timer)
                cases.append((op, vname, mode, lambda t=timer, n=n: t.timeit(n) / n * 1e9))
    best = [float("inf")] * len(cases)
    for _ in range(ROUNDS):
        for i, case in enumerate(cases):
            best[i] = min(best[i], case[3]())
    print(f"# python {sys.version.split()[0]}, {platform.machine()}, best of {ROUNDS} rounds")
    table: dict[tuple[str, str], dict[str, float]] = {}
    for (op, vname, mode, _), ns in zip(cases, best):
        table.setdefault((op, vname), {})[mode] = ns
    modes = sorted({m for row in table.values() for m in row})
    print("| call | value | " + " | ".join(f"{m} ns" for m in modes) + " | copy / shared |")
    print("|---|---|" + "---|" * len(modes) + "---|")
    for (op, vname), row in table.items():
        ratio = f"{row['copy'] / row['shared']:.2f}x" if "copy" in row else "-"
        cells = " | ".join(f"{row[m]:.0f}" for m in modes)
        print(f"| {op} | {vname} | {cells} | {ratio} |")


if __name__ == "__main__":
    main()
