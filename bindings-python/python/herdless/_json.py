"""The default codec of the Redis tier: JSON, readable by every language, extended so that
what web handlers return round-trips between Python processes.

``Decimal``, ``datetime``, ``date`` and ``UUID`` are written as a two-key object,
``{"$type": "decimal", "$value": "12.30"}`` (``datetime``/``date``: ISO 8601 text,
``UUID``: its canonical text); other languages read that object as it is. Reading turns
such objects back into the type; any other JSON is plain. A dict of exactly the keys
``$type`` and ``$value``, with one of these four names, is therefore not stored as a dict.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Callable
from uuid import UUID

__all__ = ["dumps", "loads"]

_READ: dict[str, Callable[[str], Any]] = {
    "decimal": Decimal,
    "datetime": datetime.fromisoformat,
    "date": date.fromisoformat,
    "uuid": UUID,
}


def _tagged(o: object) -> dict[str, str]:
    if isinstance(o, Decimal):
        return {"$type": "decimal", "$value": str(o)}
    # A datetime is a date too: it is tested first.
    if isinstance(o, datetime):
        return {"$type": "datetime", "$value": o.isoformat()}
    if isinstance(o, date):
        return {"$type": "date", "$value": o.isoformat()}
    if isinstance(o, UUID):
        return {"$type": "uuid", "$value": str(o)}
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def _untagged(d: dict[str, Any]) -> Any:
    if len(d) == 2:
        kind, value = d.get("$type"), d.get("$value")
        if isinstance(kind, str) and isinstance(value, str):
            read = _READ.get(kind)
            if read is not None:
                return read(value)
    return d


_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_tagged
)
_DECODER = json.JSONDecoder(object_hook=_untagged)


def dumps(value: Any) -> str:
    """The JSON text of ``value``."""
    return _ENCODER.encode(value)


def loads(text: str) -> Any:
    """The value of JSON ``text``."""
    return _DECODER.decode(text)
