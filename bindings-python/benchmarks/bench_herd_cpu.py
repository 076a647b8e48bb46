"""CPU time of one waiter of an asyncio herd, each contender in its own process (no
garbage of another contender's to collect): ``cg_herd.py``'s rounds (a warm-up of 200, then
N), each in its own ``asyncio.run``, for N = 2,000 and 4,000; the difference of their
``time.process_time`` divided by 2,000; the median of 7 pairs (and their range).

    python bench_herd_cpu.py herdless      # or: lock, floor
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

import cg_herd


def cpu(name: str, n: int) -> float:
    began = time.process_time()
    asyncio.run(cg_herd.main(name, n))
    return time.process_time() - began


def main(name: str) -> None:
    per = []
    for _ in range(7):
        small, large = cpu(name, 2000), cpu(name, 4000)
        per.append((large - small) / 2000 * 1e6)
    print(
        f"{name}: {statistics.median(per):.2f} us CPU per waiter"
        f" (median of 7; {min(per):.2f}-{max(per):.2f})"
    )


if __name__ == "__main__":
    main(sys.argv[1])
