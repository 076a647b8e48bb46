"""The example shop under Django's test client: a stampede on a product page reaches the
database once, and /metrics shows it."""

import threading

from django.test import Client

from shop import origin


def test_a_stampede_on_a_product_page_queries_the_database_once() -> None:
    statuses = []

    def get() -> None:
        statuses.append(Client().get("/products/7").status_code)

    threads = [threading.Thread(target=get) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 32
    assert origin.calls == 1
    assert Client().get("/products/7").json() == {"id": 7, "name": "Product 7"}

    assert Client().get("/products/404").status_code == 404
    assert Client().get("/products/404").status_code == 404
    assert origin.calls == 2  # the absence was cached

    scrape = Client().get("/metrics").content.decode()
    assert "shop_requests_total 35.0" in scrape  # the service's own metrics...
    assert 'herdless_loads_total{namespace="shop"} 2.0' in scrape  # ...and herdless's
    assert 'herdless_coalesced_waiters_total{namespace="shop"}' in scrape
