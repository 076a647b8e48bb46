"""The cashews fleet, as its README sets up Redis: ``cache.setup("redis://...")`` and the
``@cache(ttl=..., key=..., lock=True)`` decorator, whose lock is its stampede protection
(one call per key across the fleet while the others wait for the result).

``FLEET_CASHEWS_CLIENT_SIDE=1`` adds its client-side cache (``client_side=True``: a memory
tier kept coherent by Redis's client tracking), the like of the other contenders' L1."""

from __future__ import annotations

import os
from typing import Any

from cashews import cache

from catalog import PREFIX, REDIS_URL, TTL, product, serve

client_side = os.environ.get("FLEET_CASHEWS_CLIENT_SIDE") == "1"
cache.setup(REDIS_URL, client_side=client_side)


@cache(ttl=TTL, key=PREFIX + "products:{product_id}", lock=True)
async def cached(product_id: int) -> dict[str, Any] | None:
    return await product(product_id)


app = serve(cached)
