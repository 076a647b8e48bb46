"""Runs Django's own cache tests (``tests/cache/tests.py`` of the installed Django release's
sdist) against ``herdless.contrib.django.HerdlessCache``, or LocMemCache as the control.

    python django_cache_suite.py DJANGO_TESTS_DIR TIER [TIER_URL]

``DJANGO_TESTS_DIR`` holds the sdist's ``tests/`` (``cache/`` in it); ``TIER`` is
``locmem`` (Django's ``LocMemCacheTests`` and the middleware classes as Django ships them),
``memory``, ``redis`` or ``memcached`` (the same classes, every cache of their settings
overrides made a ``HerdlessCache``: in memory, or on ``TIER_URL``'s server, one database
(memcached: one key prefix) per ``LOCATION``).
Prints one JSON object on its last line: test id -> "passed", "failed", "error" or
"skipped: reason". Run by ``test_django_suite.py`` (one process per tier: Django reads
``settings.CACHES`` once).
"""

from __future__ import annotations

import copy
import json
import sys
import unittest
import urllib.parse
from typing import Any

HERDLESS = "herdless.contrib.django.HerdlessCache"
LOCMEM = "django.core.cache.backends.locmem.LocMemCache"

# The classes of tests/cache/tests.py run here, besides the BaseCacheTests one: every class
# that drives a cache through Django's middleware, decorators and utilities. The others
# cannot apply to a third-party backend: DummyCacheTests, DBCache*, FileBasedCache*,
# *Memcached*, RedisCacheTests test those backends' own internals (BaseCacheTests as
# HerdlessCache* replaces them); CustomCacheKeyValidationTests (liberal_backend),
# CacheClosingTests (closeable_cache), DefaultNonExpiringCacheKeyTests and
# CacheHandlerTest test Django's cache handler with LocMem's own subclasses;
# TestMakeTemplateFragmentKey uses no cache.
THROUGH_DJANGO = (
    "CacheUtils",
    "PrefixedCacheUtils",
    "CacheHEADTest",
    "CacheI18nTest",
    "PrefixedCacheI18nTest",
    "CacheMiddlewareTest",
    "TestWithTemplateResponse",
)


def configure(tier: str) -> None:
    import django  # type: ignore[import-untyped]
    from django.conf import settings  # type: ignore[import-untyped]

    settings.configure(
        DEBUG=False,
        SECRET_KEY="django-cache-suite",
        USE_TZ=False,
        LANGUAGE_CODE="en",  # as Django's own tests/runtests.py
        INSTALLED_APPS=[
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "django.contrib.sessions",
            "cache",
        ],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        CACHES={"default": {"BACKEND": LOCMEM}},
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": ["django.template.context_processors.request"]
                },
            }
        ],
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()


def herdless_caches(caches: dict[str, Any], redis: str | None) -> dict[str, Any]:
    """``caches`` with every LocMemCache made a HerdlessCache (LOCATIONs kept apart)."""
    out = copy.deepcopy(caches)
    locations: dict[str, int] = {}
    for params in out.values():
        if params.get("BACKEND") != LOCMEM:
            continue
        params["BACKEND"] = HERDLESS
        location = str(params.get("LOCATION", ""))
        if redis is not None:
            db = locations.setdefault(location, len(locations))
            url = urllib.parse.urlsplit(redis)
            if url.scheme == "memcached":
                # memcached has no databases: LOCATIONs apart by their key prefix.
                params["LOCATION"] = redis
                params["OPTIONS"] = {**params.get("OPTIONS", {}), "redis_prefix": f"d{db}"}
            else:
                params["LOCATION"] = f"{url.scheme}://{url.netloc}/{db}"
    return out


def suite(tier: str, redis: str | None) -> unittest.TestSuite:
    from django.test import TestCase, override_settings  # type: ignore[import-untyped]

    import cache.tests as dt  # type: ignore[import-not-found]

    classes: list[type] = []
    if tier == "locmem":
        classes.append(dt.LocMemCacheTests)
        classes += [getattr(dt, name) for name in THROUGH_DJANGO]
    else:
        # On Redis (and memcached), as Django configures its own RedisCacheTests: no "cull" caches (their
        # tests skip, "Culling isn't implemented"), since MAX_ENTRIES bounds the memory
        # tier only and Redis is bounded by its maxmemory.
        exclude = dt.redis_excluded_caches if redis is not None else None
        base = dt.caches_setting_for_tests(BACKEND=HERDLESS, exclude=exclude)
        if redis is not None:
            for params in base.values():
                params["LOCATION"] = redis
        name = {
            "memory": "HerdlessMemoryCacheTests",
            "redis": "HerdlessRedisCacheTests",
            "memcached": "HerdlessMemcachedCacheTests",
        }[tier]
        classes.append(override_settings(CACHES=base)(type(name, (dt.BaseCacheTests, TestCase), {
            "__module__": dt.__name__,
        })))
        for name in THROUGH_DJANGO:
            original = getattr(dt, name)
            caches = original._overridden_settings["CACHES"]
            sub = type(name, (original,), {"__module__": dt.__name__})
            classes.append(override_settings(CACHES=herdless_caches(caches, redis))(sub))
    loader = unittest.TestLoader()
    return unittest.TestSuite(loader.loadTestsFromTestCase(c) for c in classes)


class Outcomes(unittest.TextTestResult):
    """Records one outcome per test (a failed subtest fails its test)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outcomes: dict[str, str] = {}

    @staticmethod
    def name(test: Any) -> str:
        test = getattr(test, "test_case", test)
        return f"{type(test).__name__}.{test._testMethodName}"

    def _set(self, test: Any, outcome: str) -> None:
        key = self.name(test)
        if self.outcomes.get(key) in ("failed", "error") and outcome == "passed":
            return
        self.outcomes[key] = outcome

    def addSuccess(self, test: Any) -> None:
        super().addSuccess(test)
        self._set(test, "passed")

    def addFailure(self, test: Any, err: Any) -> None:
        super().addFailure(test, err)
        self._set(test, "failed")

    def addError(self, test: Any, err: Any) -> None:
        super().addError(test, err)
        self._set(test, "error")

    def addSkip(self, test: Any, reason: str) -> None:
        super().addSkip(test, reason)
        self._set(test, f"skipped: {reason}")

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._set(test, "failed" if failed else "error")


def main() -> None:
    tests_dir, tier = sys.argv[1], sys.argv[2]
    redis = sys.argv[3] if tier in ("redis", "memcached") else None
    sys.path.insert(0, tests_dir)
    configure(tier)
    from django.test.runner import DiscoverRunner  # type: ignore[import-untyped]
    from django.test.utils import setup_test_environment  # type: ignore[import-untyped]

    setup_test_environment()
    runner = DiscoverRunner(verbosity=0, interactive=False)
    old = runner.setup_databases()
    try:
        result = unittest.TextTestRunner(
            stream=sys.stderr, verbosity=2, resultclass=Outcomes
        ).run(suite(tier, redis))
    finally:
        runner.teardown_databases(old)
    assert isinstance(result, Outcomes)
    print(json.dumps(result.outcomes, sort_keys=True))


if __name__ == "__main__":
    main()
