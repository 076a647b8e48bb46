"""Integrations with the frameworks and the monitoring a service already runs.

Each module imports its framework only when it is imported itself, so ``herdless`` needs
none of them:

- :mod:`herdless.contrib.django`: ``HerdlessCache``, a ``CACHES`` backend (``pip install
  "herdless[django]"``).
- :mod:`herdless.contrib.dogpile`: ``HerdlessBackend``, the dogpile.cache backend
  ``"herdless"`` whose mutex is the fleet lock (``herdless[dogpile]``).
- :mod:`herdless.contrib.cachelib`: ``HerdlessCache``, cachelib's ``BaseCache``
  (``herdless[cachelib]``).
- :mod:`herdless.contrib.flask_caching`: ``HerdlessCache`` for Flask-Caching's
  ``CACHE_TYPE`` and ``cached``, a single-flight view cache (``herdless[flask]``).
- :mod:`herdless.contrib.prometheus`: ``HerdlessCollector``, the metrics on a
  ``prometheus_client`` registry (``herdless[prometheus]``).
- :mod:`herdless.contrib.opentelemetry`: ``instrument(cache)``, metrics and spans for loads
  through the OpenTelemetry API (``herdless[opentelemetry]``).
"""
