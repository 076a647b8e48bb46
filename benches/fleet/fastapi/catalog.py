"""The FastAPI app of every FastAPI fleet of benches/fleet: one product page read through a
cache from PostgreSQL. The contenders (with_*.py) differ only in the ``cached(product_id)``
coroutine they hand to ``serve``; the origin, the route and the answer are these.

Configured by the driver (./run) through the environment: PG_URL, REDIS_URL
(redis://host:port/db), FLEET_PREFIX (this run's Redis key prefix), TTL_MS, ORIGIN_SLEEP_MS
(latency the query adds, as a real one would have). The port is uvicorn's.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from fastapi import FastAPI, HTTPException

REDIS_URL = os.environ["REDIS_URL"]
PREFIX = os.environ["FLEET_PREFIX"]
TTL = int(os.environ["TTL_MS"]) / 1000
_SLEEP = int(os.environ["ORIGIN_SLEEP_MS"]) / 1000

_pool: asyncpg.Pool | None = None
_queries = 0


async def product(product_id: int) -> dict[str, Any] | None:
    """The origin: a real query over a pool (the same size in every worker of every contender)."""
    global _queries
    _queries += 1
    assert _pool is not None
    row = await _pool.fetchrow(
        "SELECT id, name, price::float8 AS price, description"
        " FROM fleet_products, pg_sleep($2) WHERE id = $1",
        product_id,
        _SLEEP,
    )
    return dict(row) if row is not None else None


def serve(cached: Callable[[int], Awaitable[dict[str, Any] | None]]) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        global _pool
        _pool = await asyncpg.create_pool(os.environ["PG_URL"], min_size=1, max_size=10)
        yield
        await _pool.close()

    app = FastAPI(lifespan=lifespan)

    @app.get("/products/{product_id}")
    async def product_page(product_id: int) -> dict[str, Any]:
        found = await cached(product_id)
        if found is None:
            raise HTTPException(status_code=404, detail="no such product")
        return found

    # Read by the driver after the CPU times were taken: how often the cache reached the origin.
    @app.get("/_origin")
    async def origin_queries() -> dict[str, int]:
        return {"queries": _queries}

    return app
