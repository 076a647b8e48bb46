"""The slow database the cache protects (simulated, with a call counter)."""

import threading
import time

calls = 0
_lock = threading.Lock()


def load_product(product_id: int) -> dict[str, object] | None:
    global calls
    with _lock:
        calls += 1
    time.sleep(0.2)  # a slow query
    return None if product_id == 404 else {"id": product_id, "name": f"Product {product_id}"}
