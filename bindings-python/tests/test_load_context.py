"""The loader's context in Python: a loader that takes one parameter is told the key, the
reason and the previous value (with its age and ETag), chooses its entry's lifetime, answers
"not modified" (tested against a real HTTP server that answers 304) or "do not cache", and
sees its load cancelled."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from herdless import ABSENT, Cache, HerdlessError, LoadContext, Loaded


def test_a_loader_without_parameters_keeps_working_and_one_with_a_parameter_gets_the_context() -> None:
    cache = Cache(jitter=0, beta=0)
    assert cache.get_or_load("a:1", lambda: "plain") == "plain"
    seen: list[tuple[str, str, Any]] = []

    def load(ctx: LoadContext) -> str:
        seen.append((ctx.key, ctx.reason, ctx.previous))
        return "ctx"

    assert cache.get_or_load("a:2", load) == "ctx"
    assert seen == [("a:2", "first", None)]


def test_each_entry_lives_the_ttl_its_loader_chose() -> None:
    cache = Cache(ttl=60, jitter=0, beta=0)

    def draft(ctx: LoadContext) -> str:
        ctx.set_ttl(0.2)
        return "draft"

    cache.get_or_load("doc:draft", draft)
    cache.get_or_load("doc:page", lambda ctx: Loaded("page", ttl=3600))
    cache.get_or_load("doc:gone", lambda ctx: Loaded(ABSENT, negative_ttl=0.2))
    draft_peek, page_peek = cache.peek("doc:draft"), cache.peek("doc:page")
    assert draft_peek is not None and page_peek is not None
    assert draft_peek.fresh_until - draft_peek.age < page_peek.fresh_until
    time.sleep(0.3)
    assert cache.peek("doc:draft") is None, "the draft outlived its 0.2 s"
    assert cache.peek("doc:gone") is None, "the absence outlived its 0.2 s"
    assert cache.get("doc:page") == "page"


class _Document(BaseHTTPRequestHandler):
    """Answers GET with the document and its ETag, or 304 when If-None-Match matches."""

    body = b'{"title": "v1"}'
    etag = '"e1"'
    bodies_sent = 0
    bytes_sent = 0

    def do_GET(self) -> None:  # noqa: N802 (the http.server API)
        if self.headers.get("If-None-Match") == type(self).etag:
            self.send_response(304)
            self.send_header("ETag", type(self).etag)
            self.end_headers()
            return
        type(self).bodies_sent += 1
        type(self).bytes_sent += len(type(self).body)
        self.send_response(200)
        self.send_header("ETag", type(self).etag)
        self.send_header("Content-Length", str(len(type(self).body)))
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Any:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Document)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Document.body, _Document.etag, _Document.bodies_sent, _Document.bytes_sent = (
        b'{"title": "v1"}',
        '"e1"',
        0,
        0,
    )
    yield f"http://127.0.0.1:{httpd.server_address[1]}/doc"
    httpd.shutdown()
    httpd.server_close()


def _conditional(url: str) -> Any:
    def load(ctx: LoadContext) -> Any:
        request = urllib.request.Request(url)
        if ctx.previous is not None and ctx.previous.meta is not None:
            request.add_header("If-None-Match", ctx.previous.meta)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                ctx.meta = response.headers["ETag"]
                ctx.set_ttl(0.2)
                return response.read().decode()
        except urllib.error.HTTPError as e:
            if e.code == 304:
                return ctx.not_modified()
            raise

    return load


def test_a_304_keeps_the_value_restarts_its_lifetime_and_transfers_no_body(server: str) -> None:
    cache = Cache(ttl=60, jitter=0, beta=0)
    assert cache.get_or_load("doc:1", _conditional(server)) == '{"title": "v1"}'
    assert (_Document.bodies_sent, _Document.bytes_sent) == (1, 15)
    time.sleep(0.3)  # past the 0.2 s the loader chose
    assert cache.peek("doc:1") is None
    assert cache.get_or_load("doc:1", _conditional(server)) == '{"title": "v1"}'
    assert (_Document.bodies_sent, _Document.bytes_sent) == (1, 15), "the 304 sent a body"
    kept = cache.peek("doc:1")
    assert kept is not None and kept.state == "fresh" and kept.age < 0.1, "lifetime restarted"
    counters = cache.metrics().total
    assert (counters.loads, counters.not_modified) == (2, 1)
    # Changed at the origin: a new body and ETag.
    _Document.body, _Document.etag = b'{"title": "v2"}', '"e2"'
    time.sleep(0.3)
    assert cache.peek("doc:1") is None, "the 304 kept the loader's 0.2 s, not the cache's 60"
    assert cache.get_or_load("doc:1", _conditional(server)) == '{"title": "v2"}'
    assert _Document.bodies_sent == 2


def test_the_refresh_of_a_stale_entry_is_told_its_reason_value_age_and_etag() -> None:
    cache = Cache(ttl=0.1, grace=30, jitter=0, beta=0)
    cache.get_or_load("doc:2", lambda: Loaded("v1", meta="e1"))
    time.sleep(0.15)
    told: list[tuple[str, Any, str | None, float]] = []
    done = threading.Event()

    def refresh(ctx: LoadContext) -> Any:
        assert ctx.previous is not None
        told.append((ctx.reason, ctx.previous.value, ctx.previous.meta, ctx.previous.age))
        done.set()
        return ctx.not_modified()

    assert cache.get_or_load("doc:2", refresh) == "v1", "served stale at once"
    assert done.wait(5)
    reason, value, meta, age = told[0]
    assert (reason, value, meta) == ("refresh", "v1", "e1")
    assert 0.1 < age < 5
    deadline = time.monotonic() + 5
    while (seen := cache.peek("doc:2")) is None or seen.state != "fresh":
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_no_cache_answers_and_stores_nothing() -> None:
    cache = Cache(jitter=0, beta=0)

    def once(ctx: LoadContext) -> str:
        ctx.no_cache()
        return "once"

    assert cache.get_or_load("k:1", once) == "once"
    assert cache.peek("k:1") is None
    twice: Any = cache.get_or_load("k:2", lambda ctx: Loaded("twice", no_cache=True))
    assert twice == "twice"
    assert cache.peek("k:2") is None


def test_not_modified_without_a_previous_value_and_oversized_meta_are_errors() -> None:
    cache = Cache(jitter=0, beta=0)
    with pytest.raises(HerdlessError):
        cache.get_or_load("k:1", lambda ctx: ctx.not_modified())
    with pytest.raises(HerdlessError):
        cache.get_or_load("k:1", lambda ctx: Loaded("v", meta="m" * 257))
    assert cache.peek("k:1") is None


def test_a_sync_loaders_cancelled_event_is_set_when_the_key_is_written() -> None:
    cache = Cache(jitter=0, beta=0)
    started = threading.Event()
    saw: list[bool] = []

    def slow(ctx: LoadContext) -> str:
        started.set()
        saw.append(ctx.cancelled.wait(5))
        return "late"

    result: list[Any] = []
    t = threading.Thread(target=lambda: result.append(cache.get_or_load("k:1", slow)))
    t.start()
    assert started.wait(5)
    cache.set("k:1", "written")
    t.join(10)
    assert saw == [True], "the event was set by the write, not the timeout"
    assert cache.get("k:1") == "written", "the cancelled load did not overwrite the write"


def test_an_async_loader_gets_the_context_and_is_cancelled_with_its_task() -> None:
    cache = Cache(jitter=0, beta=0)
    seen: list[str] = []

    async def load(ctx: LoadContext) -> Any:
        seen.append(ctx.reason)
        return Loaded("async", ttl=30, meta="m1")

    async def slow(ctx: LoadContext) -> Any:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "never"

    async def main() -> None:
        assert await cache.aget_or_load("k:1", load) == "async"
        task: asyncio.Task[Any] = asyncio.create_task(cache.aget_or_load("k:2", slow))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen == ["first", "cancelled"]
    assert cache.peek("k:2") is None
    assert cache._flights_in_progress() == 0


def test_the_watcher_of_ctx_cancelled_ends_when_an_async_loader_raises() -> None:
    cache = Cache(jitter=0, beta=0)

    async def load(ctx: LoadContext) -> Any:
        assert not ctx.cancelled.is_set()  # starts the watcher thread
        raise ValueError("origin down")

    async def main() -> None:
        with pytest.raises(ValueError):
            await cache.aget_or_load("k:raises", load)

    asyncio.run(main())
    deadline = time.monotonic() + 10
    while any(t.name == "herdless-cancel-watch" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the watcher of ctx.cancelled outlived its load"
        time.sleep(0.01)


def test_events_reach_the_listener() -> None:
    events: list[tuple[str, str, str | None]] = []
    cache = Cache(capacity=1, jitter=0, beta=0, on_event=lambda *e: events.append(e))
    cache.set("a:1", 1)
    cache.set("a:2", 2)  # evicts a:1

    def fail() -> Any:
        raise ValueError("origin down")

    with pytest.raises(ValueError):
        cache.get_or_load("b:1", fail)
    deadline = time.monotonic() + 5
    while len(events) < 2:
        assert time.monotonic() < deadline, events
        time.sleep(0.01)
    assert events[0] == ("evict", "a:1", None)
    kind, key, error = events[1]
    assert (kind, key) == ("load_error", "b:1") and error is not None and "origin down" in error
    assert cache.metrics().total.events_dropped == 0


def test_only_a_loader_with_one_required_parameter_gets_the_context() -> None:
    cache = Cache(jitter=0, beta=0)

    def with_default(x: int = 3) -> int:
        return x

    assert cache.get_or_load("p:1", with_default) == 3
    assert cache.get_or_load("p:2", list) == []
    assert cache.get_or_load("p:3", lambda *args: len(args)) == 0
    def with_extra(ctx: LoadContext, extra: int = 1) -> str:
        return ctx.key

    assert cache.get_or_load("p:4", with_extra) == "p:4"
