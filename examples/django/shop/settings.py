"""Settings of the example shop: the one line that matters is CACHES."""

SECRET_KEY = "example-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "shop.urls"
INSTALLED_APPS = ["shop.apps.ShopConfig"]
MIDDLEWARE: list[str] = []
USE_TZ = True

CACHES = {
    "default": {
        "BACKEND": "herdless.contrib.django.HerdlessCache",
        "LOCATION": "",  # in this process; "redis://127.0.0.1:6379/0" shares it with the fleet
        "TIMEOUT": 60,  # fresh for 60 s...
        "KEY_PREFIX": "shop",  # the herdless namespace: metrics per alias, clear() in O(1)
        "OPTIONS": {"grace": 30},  # ...then served stale for 30 s while one refresh runs
    }
}
