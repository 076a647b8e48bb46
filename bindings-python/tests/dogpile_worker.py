"""One process of the dogpile herd test (``test_dogpile.py``): a dogpile region over the
``"herdless"`` backend and the Redis at ``argv[1]``; at the wall-clock time ``argv[2]``,
``argv[3]`` threads ask it for one cold key. The creator is slow (0.5 s) and counts its calls
in Redis (``INCR creator-calls``). Prints ``value=...`` per caller."""

from __future__ import annotations

import sys
import threading
import time
from urllib.parse import urlparse

from dogpile.cache import make_region

import herdless.contrib.dogpile  # noqa: F401
from redis_support import Resp


def main() -> None:
    url, start_at, threads = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    port = urlparse(url).port
    assert port is not None
    region = make_region().configure("herdless", expiration_time=300, arguments={"url": url})

    def creator() -> str:
        time.sleep(0.5)
        with Resp(port) as r:
            n = r.command("INCR", "creator-calls")
        return f"made-by-call-{n}"

    answers: list[str] = []

    def ask() -> None:
        time.sleep(max(0.0, start_at - time.time()))
        answers.append(region.get_or_create("catalog:home", creator))

    pool = [threading.Thread(target=ask) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(60)
    for a in answers:
        print(f"value={a}")


if __name__ == "__main__":
    main()
