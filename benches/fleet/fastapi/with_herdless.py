"""The herdless fleet: the Python binding built from this tree, two tiers (this process's
memory, then Redis), ``aget_or_load`` with the run's ttl."""

from __future__ import annotations

from typing import Any

from catalog import PREFIX, REDIS_URL, TTL, product, serve
from herdless import Cache

cache = Cache(ttl=TTL, redis=REDIS_URL, redis_prefix=PREFIX)


async def cached(product_id: int) -> dict[str, Any] | None:
    return await cache.aget_or_load(  # type: ignore[no-any-return]
        f"products:{product_id}", lambda: product(product_id), ttl=TTL
    )


app = serve(cached)
