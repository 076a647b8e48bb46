"""Views: a product page through the cache, and /metrics."""

from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, generate_latest

from herdless import ABSENT

from . import origin

REQUESTS = Counter("shop_requests", "Product page requests.")


def product(request: HttpRequest, product_id: int) -> JsonResponse:
    REQUESTS.inc()
    # One loader call however many requests miss at once; "no such product" is cached too
    # (ABSENT, for negative_ttl), so a flood of 404s does not reach the database either.
    data = cache.get_or_set(
        f"product:{product_id}",
        lambda: origin.load_product(product_id) or ABSENT,
        timeout=60,
    )
    if data is ABSENT:
        raise Http404("no such product")
    return JsonResponse(data)


def metrics(request: HttpRequest) -> HttpResponse:
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
