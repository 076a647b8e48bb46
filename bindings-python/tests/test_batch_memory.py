"""One ``get_or_load_many`` of N keys needs memory linear in N (issue 33 item 6): each loader
call split off the keys used to keep the capacity of every key after it (peak RSS 83 MB at
25,000 keys, 752 MB at 100,000). Peak RSS is read in fresh child processes."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import json, resource, sys
import herdless
n = int(sys.argv[1])
cache = herdless.Cache(ttl=600.0, capacity=2 * n, max_flights=2 * n)
keys = [f"p:{i}" for i in range(n)]
values = cache.get_or_load_many(keys, lambda ks: {k: len(k) for k in ks})
ok = len(values) == n and all(v == len(k) for k, v in zip(keys, values))
print(json.dumps({"ok": ok, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def batch_of(n: int) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(n)], check=True, capture_output=True, text=True
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_the_peak_memory_of_one_batch_grows_linearly_with_its_keys() -> None:
    small, large = batch_of(25_000), batch_of(100_000)
    assert small["ok"] and large["ok"]
    # Four times the keys: 2.3x the peak RSS here (47 -> 106 MB, the interpreter included);
    # quadratic growth was 9x.
    assert isinstance(small["peak_kib"], int) and isinstance(large["peak_kib"], int)
    assert large["peak_kib"] < 4 * small["peak_kib"], (small, large)
