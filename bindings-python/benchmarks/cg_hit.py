"""A loop of N hits, for callgrind (instruction counts repeat on a busy machine, where
wall-clock timings do not). Run it for two N and divide the difference by the difference of
N: what one hit costs, the loop's own setup cancelled out.

    for n in 100000 200000; do
      PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.$n python cg_hit.py CASE $n
    done      # instructions per hit = (total(200000) - total(100000)) / 100000

CASE: ``lru`` (``functools.lru_cache`` hit ``f(42)``), ``str`` (``Cache.get`` of a str value),
``shared`` (a dict value, ``copy_values=False``), ``dict`` (a dict value, copied per reader:
the default), ``fleet`` (a str value, in a cache with a shared tier: ``redis="memory://cg"``,
the hit answered by its L1). The shapes of the acceptance check: ``c.get("k")`` against ``f(42)``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import herdless


def case(name: str) -> Callable[[], Any]:
    if name == "lru":

        @functools.lru_cache
        def f(x: int) -> dict[str, int]:
            return {"id": 42}

        f(42)
        return lambda: f(42)
    if name == "fleet":
        cache = herdless.Cache(redis="memory://cg")
    elif name == "shared":
        cache = herdless.Cache(copy_values=False)
    else:
        cache = herdless.Cache()  # as builds before copy_values= took it (for bisecting)
    cache.set("k", {"id": 42} if name in ("shared", "dict") else "v")
    return lambda: cache.get("k")


def loop(call: Callable[[], Any], n: int) -> None:
    for _ in range(n):
        call()


if __name__ == "__main__":
    call = case(sys.argv[1])
    call()
    loop(call, int(sys.argv[2]))
