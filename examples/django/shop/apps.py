"""Registers the cache's metrics on the process's Prometheus registry."""

from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "shop"

    def ready(self) -> None:
        from django.core.cache import caches
        from prometheus_client import REGISTRY

        from herdless.contrib.prometheus import HerdlessCollector

        REGISTRY.register(HerdlessCollector(caches["default"].herdless))
