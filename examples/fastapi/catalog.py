"""A FastAPI catalog whose endpoints are cached by herdless.

Two patterns for async endpoints:

- the loader as a cached function (``@cache.cached``): one key per distinct call, built from
  its arguments; the endpoint awaits it;
- the cache as a dependency (``Depends(get_cache)``): the endpoint calls
  ``aget_or_load`` with its own key, and tests can override the dependency.

Metrics: herdless's on the app's Prometheus registry (``/metrics``), and OpenTelemetry metrics
and load spans through the application's providers (``instrument``; nothing is emitted
until the application installs an SDK).

Run it: ``uvicorn catalog:app``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from herdless import ABSENT, Cache
from herdless.contrib.opentelemetry import instrument
from herdless.contrib.prometheus import HerdlessCollector

cache = Cache(ttl=60, grace=30, namespace="catalog")
registry = CollectorRegistry()
registry.register(HerdlessCollector(cache))
instrument(cache)

ORIGIN_CALLS = {"product": 0, "stock": 0}


@cache.cached(ttl=60)
async def load_product(product_id: int) -> Any:
    """The slow query behind a product page; ABSENT caches "no such product"."""
    ORIGIN_CALLS["product"] += 1
    await asyncio.sleep(0.2)
    return ABSENT if product_id == 404 else {"id": product_id, "name": f"Product {product_id}"}


async def fetch_stock(sku: str) -> int:
    ORIGIN_CALLS["stock"] += 1
    await asyncio.sleep(0.1)
    return 12


def get_cache() -> Cache:
    return cache


app = FastAPI()


@app.get("/products/{product_id}")
async def product(product_id: int) -> Any:
    found = await load_product(product_id)
    if found is ABSENT:
        raise HTTPException(status_code=404, detail="no such product")
    return found


@app.get("/stock/{sku}")
async def stock(sku: str, cache: Annotated[Cache, Depends(get_cache)]) -> dict[str, Any]:
    units = await cache.aget_or_load(f"catalog:v1:stock:{sku}", lambda: fetch_stock(sku), ttl=5)
    return {"sku": sku, "units": units}


@app.get("/metrics")
def metrics() -> Response:
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
