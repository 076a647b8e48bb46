"""Not a cache: a dict that keeps every product for good (no ttl, no Redis, no stampede
protection). The floor of the FastAPI fleet's CPU per request, what the app costs without a
cache's work; a contender's CPU above it is its cache's."""

from __future__ import annotations

from typing import Any

from catalog import product, serve

_kept: dict[int, dict[str, Any] | None] = {}


async def cached(product_id: int) -> dict[str, Any] | None:
    try:
        return _kept[product_id]
    except KeyError:
        value = _kept[product_id] = await product(product_id)
        return value


app = serve(cached)
