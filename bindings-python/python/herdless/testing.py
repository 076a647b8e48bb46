"""Testing code that runs on herdless: an in-memory shared tier with faults.

``Cache(redis="memory://<name>")`` makes a cache whose shared tier lives in this process:
every cache created with the same name is one process of a simulated fleet (one loader
call per key between them, writes and bumps reaching the others' copies), and
``MemoryStore(name)`` controls that tier, so a test can show what its service does when
Redis is down, stalls, loses notifications or holds corrupt data::

    from herdless import Cache
    from herdless.testing import MemoryStore

    a, b = Cache(redis="memory://t1"), Cache(redis="memory://t1")
    MemoryStore("t1").set_fault("down")     # every Redis call fails at once
    MemoryStore("t1").set_fault("stall", "users")  # one namespace's node stalls
    MemoryStore("t1").set_fault(None)       # back
"""

from ._native import MemoryStore

__all__ = ["MemoryStore"]
