"""The README's Python blocks are run as written: the quick start is a test.

Blocks fenced as ```python run as is; blocks fenced as ```python redis run against a private
redis-server, whose URL replaces the README's `redis://127.0.0.1:6379/0`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis_support import RedisServer

README = Path(__file__).resolve().parent.parent / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.DOTALL)
REDIS_BLOCKS = re.findall(r"```python redis\n(.*?)```", TEXT, re.DOTALL)
README_URL = "redis://127.0.0.1:6379/0"
# The repository's front page shows a Python quick start too; it must run as well.
ROOT_README = Path(__file__).resolve().parents[2] / "README.md"
ROOT_BLOCKS = re.findall(r"```python\n(.*?)```", ROOT_README.read_text(encoding="utf-8"), re.DOTALL)


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 4 and len(REDIS_BLOCKS) >= 1
    assert all(README_URL in block for block in REDIS_BLOCKS)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block(code: str) -> None:
    exec(compile(code, str(README), "exec"), {"__name__": "__main__"})


@pytest.mark.parametrize("code", ROOT_BLOCKS, ids=[f"root{i}" for i in range(len(ROOT_BLOCKS))])
def test_root_readme_block(code: str) -> None:
    assert ROOT_BLOCKS, "the root README lost its Python quick start"
    exec(compile(code, str(ROOT_README), "exec"), {"__name__": "__main__"})


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


@pytest.mark.parametrize("code", REDIS_BLOCKS, ids=[f"redis{i}" for i in range(len(REDIS_BLOCKS))])
def test_readme_redis_block(code: str, server: RedisServer) -> None:
    code = code.replace(README_URL, server.url + "/0")
    exec(compile(code, str(README), "exec"), {"__name__": "__main__"})
