"""Peak memory of one `get_or_load_many` of N distinct keys (issue 33 item 6): each N in a
fresh child process, its peak RSS (``ru_maxrss``) beside that of N single ``get_or_load``
calls, on the memory tier or, with ``--redis URL``, on a Redis tier.

    python bindings-python/benchmarks/bench_batch_memory.py [--redis redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import uuid

SIZES = (25_000, 50_000, 100_000, 200_000)


def child(n: int, how: str, redis: str | None) -> None:
    import herdless

    # A batch holds a flight per key it leads: the default max_flights (100,000) refuses more.
    options: dict[str, object] = {"ttl": 600.0, "capacity": 2 * n, "max_flights": 2 * n}
    if redis:
        options.update(redis=redis, redis_prefix=f"bench-mem-{uuid.uuid4().hex[:8]}")
    cache = herdless.Cache(**options)  # type: ignore[arg-type]
    keys = [f"p:{i}" for i in range(n)]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if how == "batch":
        values = cache.get_or_load_many(keys, lambda ks: {k: len(k) for k in ks})
    else:
        values = [cache.get_or_load(k, lambda k=k: len(k)) for k in keys]
    assert len(values) == n
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"before_kib": before, "peak_kib": peak}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis")
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], args.redis)
        return
    tier = "redis" if args.redis else "memory"
    print(f"| keys | one batch, peak RSS (MB) | N get_or_load, peak RSS (MB) | tier {tier} |")
    print("|---|---|---|---|")
    for n in SIZES:
        row = []
        for how in ("batch", "single"):
            cmd = [sys.executable, __file__, "--child", str(n), how]
            if args.redis:
                cmd += ["--redis", args.redis]
            out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            row.append(f"{out['peak_kib'] / 1024:.0f}")
        print(f"| {n:,} | {row[0]} | {row[1]} | |")


if __name__ == "__main__":
    main()
