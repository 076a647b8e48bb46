"""One Django worker process for tests/test_django_http.py, served by Django's own
development server (``django.core.servers.basehttp.run``, what ``runserver`` runs).

    python django_worker.py PORT LOCATION [save-every-request]

``LOCATION`` is the HerdlessCache LOCATION ("" for memory, or a redis:// URL). Sessions live
in that cache (``SESSION_ENGINE = "django.contrib.sessions.backends.cache"``; saved on
every request with ``save-every-request``, else only when changed), and Django's cache middleware caches ``/public``. The session and CSRF middleware
sit outside the cache middleware, so they add their cookies to a response after
``UpdateCacheMiddleware`` stored it: the cached response must not be that object.

- ``/login?user=NAME``: logs NAME in (a new session key, as ``django.contrib.auth.login``).
- ``/logout``: ``session.flush()`` (what ``django.contrib.auth.logout`` does).
- ``/whoami``: ``you are NAME`` or ``anonymous``.
- ``/public``: a page for everyone (cached), that renders a CSRF token (a form would).
"""

from __future__ import annotations

import itertools
import sys

import django  # type: ignore[import-untyped]
from django.conf import settings  # type: ignore[import-untyped]

PORT, LOCATION = int(sys.argv[1]), sys.argv[2]
SAVE_EVERY_REQUEST = sys.argv[3:] == ["save-every-request"]

settings.configure(
    DEBUG=False,
    SECRET_KEY="django-worker-test",
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["django.contrib.sessions"],
    MIDDLEWARE=[
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.middleware.cache.UpdateCacheMiddleware",
        "django.middleware.cache.FetchFromCacheMiddleware",
    ],
    CACHES={
        "default": {
            "BACKEND": "herdless.contrib.django.HerdlessCache",
            "LOCATION": LOCATION,
            "KEY_PREFIX": "site",
        }
    },
    SESSION_ENGINE="django.contrib.sessions.backends.cache",
    SESSION_SAVE_EVERY_REQUEST=SAVE_EVERY_REQUEST,
    CACHE_MIDDLEWARE_SECONDS=600,
    DATABASES={},
)
django.setup()

from django.core.servers.basehttp import run  # type: ignore[import-untyped]  # noqa: E402
from django.core.wsgi import get_wsgi_application  # type: ignore[import-untyped]  # noqa: E402
from django.http import HttpRequest, HttpResponse  # type: ignore[import-untyped]  # noqa: E402
from django.middleware.csrf import get_token  # type: ignore[import-untyped]  # noqa: E402
from django.urls import path  # type: ignore[import-untyped]  # noqa: E402
from django.views.decorators.cache import never_cache  # type: ignore[import-untyped]  # noqa: E402

renders = itertools.count(1)


@never_cache  # type: ignore[untyped-decorator]
def login(request: HttpRequest) -> HttpResponse:
    request.session.cycle_key()
    request.session["user"] = request.GET["user"]
    return HttpResponse("logged in")


@never_cache  # type: ignore[untyped-decorator]
def logout(request: HttpRequest) -> HttpResponse:
    request.session.flush()
    return HttpResponse("logged out")


@never_cache  # type: ignore[untyped-decorator]
def whoami(request: HttpRequest) -> HttpResponse:
    user = request.session.get("user")
    return HttpResponse(f"you are {user}" if user else "anonymous")


def public(request: HttpRequest) -> HttpResponse:
    get_token(request)  # the page's form carries a CSRF token
    return HttpResponse(f"public page, render {next(renders)}")


urlpatterns = [
    path("login", login),
    path("logout", logout),
    path("whoami", whoami),
    path("public", public),
]

if __name__ == "__main__":
    run("127.0.0.1", PORT, get_wsgi_application(), threading=True)
