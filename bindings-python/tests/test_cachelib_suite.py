"""cachelib's own backend tests against ``herdless.contrib.cachelib.HerdlessCache``, in memory
and on a private Redis (``cachelib_suite.py``). cachelib's wheel ships no tests; its sdist of
the pinned release does (``tests/``): scripts/test.sh fetches it (pinned by hash) and points
``HERDLESS_CACHELIB_TESTS`` at its ``tests/``. Its ``conftest.py`` imports ``xprocess`` (for
the fixtures that start its own servers, unused here): a stub stands in for it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from redis_support import RedisServer

HERE = Path(__file__).resolve().parent
MODULES = ("conftest.py", "common.py", "clear.py", "has.py", "serializer.py",
           "delete_many_with_prefix.py")
# 21 tests of the 5 classes, x2 serializers (cachelib's and a custom one) x2 key prefixes.
EXPECTED_PASSED = 84


def suite_dir(tmp_path: Path) -> Path:
    found = os.environ.get("HERDLESS_CACHELIB_TESTS")
    if not found or not (Path(found) / "common.py").is_file():
        message = "HERDLESS_CACHELIB_TESTS does not name cachelib's tests/ (scripts/test.sh sets it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    for name in MODULES:
        shutil.copy(Path(found) / name, tmp_path / name)
    shutil.copy(HERE / "cachelib_suite.py", tmp_path / "test_herdless_cachelib.py")
    (tmp_path / "xprocess.py").write_text("class ProcessStarter:\n    pass\n")
    return tmp_path


def run(directory: Path, url: str | None) -> dict[str, int]:
    env = {**os.environ, "HERDLESS_CACHELIB_URL": url or ""}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-o", "addopts=",
         "-W", "error", "-W", "ignore::pytest.PytestConfigWarning", str(directory)],
        cwd=directory, env=env, capture_output=True, text=True, timeout=600,
    )
    summary = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}
    print(f"cachelib's tests, {'Redis' if url else 'memory'}: {summary}")
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    return counts


def test_cachelib_tests_in_memory(tmp_path: Path) -> None:
    counts = run(suite_dir(tmp_path), None)
    assert counts == {"passed": EXPECTED_PASSED}, counts


def test_cachelib_tests_over_redis(tmp_path: Path) -> None:
    directory = suite_dir(tmp_path)
    server = RedisServer()
    try:
        counts = run(directory, server.url)
    finally:
        server.stop()
    assert counts == {"passed": EXPECTED_PASSED}, counts
