"""A Django shop whose product pages are cached by herdless (see settings.CACHES)."""
