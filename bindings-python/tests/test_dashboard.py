"""The Grafana dashboard (docs/grafana/herdless.json) queries only metrics the Python
exporters really emit: ``prometheus()`` and the prometheus_client collector, scraped from a
cache that served traffic (the Rust and Node suites check theirs the same way)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from herdless import Cache
from herdless.contrib.prometheus import HerdlessCollector

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "herdless.json"


def queries(node: Any) -> list[str]:
    """Every PromQL expression: panel targets and template variables."""
    if isinstance(node, dict):
        found = []
        for k, v in node.items():
            if k in ("expr", "definition") and isinstance(v, str):
                found.append(v)
            else:
                found += queries(v)
        return found
    if isinstance(node, list):
        return [q for item in node for q in queries(item)]
    return []


def emitted(scrape: str) -> set[str]:
    """Sample names, and each declared family (a histogram with its series)."""
    names = set()
    for line in scrape.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def test_every_dashboard_query_names_a_metric_python_emits() -> None:
    exprs = queries(json.loads(DASHBOARD.read_text()))
    assert len(exprs) >= 20
    cache = Cache(ttl=60, redis="memory://dashboard")
    for _ in range(3):
        cache.get_or_load("users:v1:#1", lambda: "Ada")
    registry = CollectorRegistry()
    registry.register(HerdlessCollector(cache))
    for scrape in (cache.prometheus(), generate_latest(registry).decode()):
        names = emitted(scrape)
        for expr in exprs:
            used = re.findall(r"\bherdless_[a-z0-9_]+", expr)
            assert used, f"a query names no herdless metric: {expr}"
            missing = [n for n in used if n not in names]
            assert not missing, f"{missing} not emitted by Python ({expr})"
