"""alerts(), hot keys and their export / import, warm's progress: the engine's detector and
tracker seen from Python (snake_case, seconds)."""

from __future__ import annotations

import time

import pytest

from herdless import (
    ABSENT,
    Alert,
    Cache,
    ConfigError,
    ConfigTypeError,
    DetectorOptions,
    HotKey,
    HotKeysFormatError,
    WarmReport,
)


def test_a_miss_storm_is_reported_with_namespace_and_cure() -> None:
    # Short ticks, so the steady state (8 ticks at least) is learnt in well under a second.
    cache = Cache(detector_tick=0.05)
    cache.set("accounts:1", "ada")
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:  # steady: hits only
        assert cache.get("accounts:1") == "ada"
        cache.get("accounts:missing")  # one miss now and then is the steady state
        time.sleep(0.01)
    for i in range(300):  # the storm: absent ids, nothing cached
        assert cache.get(f"accounts:absent-{i}") is None
    time.sleep(0.06)
    alerts = cache.alerts()
    spikes = [a for a in alerts if a.kind == "miss_spike"]
    assert spikes, alerts
    a = spikes[0]
    assert isinstance(a, Alert)
    assert (a.namespace, a.cause, a.key) == ("accounts", "miss_storm", None)
    assert "negative_caching" in a.cures
    assert a.active and a.since <= a.last_seen
    assert a.evidence["misses_per_second"] > 5 * max(a.evidence["steady_misses_per_second"], 1)
    assert str(a).startswith('miss spike in "accounts"') and "negative caching" in str(a)


def miss_storm(cache: Cache) -> None:
    """0.6 s of steady traffic on ``accounts``, then 300 misses on absent ids."""
    cache.set("accounts:1", "ada")
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:
        cache.get("accounts:1")
        cache.get("accounts:missing")
        time.sleep(0.01)
    for i in range(300):
        cache.get(f"accounts:absent-{i}")
    time.sleep(0.06)


def test_the_detector_can_be_switched_off_or_given_its_thresholds() -> None:
    off = Cache(detector=False)
    miss_storm(off)
    assert off.alerts() == []
    # A spike must now be 1,000x the steady state and 1,000 misses in a tick: 300 are not.
    lenient = Cache(detector=DetectorOptions(tick=0.05, spike_factor=1000, min_spike_misses=1000))
    miss_storm(lenient)
    assert [a for a in lenient.alerts() if a.kind == "miss_spike"] == []
    # The same storm with the default thresholds is reported.
    strict = Cache(detector=DetectorOptions(tick=0.05))
    miss_storm(strict)
    assert any(a.kind == "miss_spike" for a in strict.alerts()), strict.alerts()
    assert Cache(detector=True, detector_tick=0.05).alerts() == []


@pytest.mark.parametrize(
    ("detector", "error", "message"),
    [
        ("on", ConfigTypeError, "must be a bool or a herdless.DetectorOptions, got str"),
        (DetectorOptions(tick=0), ConfigError, "`detector.tick` must be positive"),
        (DetectorOptions(hold=-1), ConfigError, "`detector.hold` must be at least 0"),
        (DetectorOptions(min_samples=0), ConfigError, "`detector.min_samples` must be at least 1"),
        (DetectorOptions(spike_factor="5"), ConfigTypeError, "`detector.spike_factor` must be a number"),  # type: ignore[arg-type]
        (DetectorOptions(spike_factor=0.5), ConfigError, "detector factors must be finite and at least 1"),
        (DetectorOptions(key_share=0), ConfigError, "key_share must be in (0, 1]"),
    ],
)
def test_bad_detector_options_raise_with_the_option_named(
    detector: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as e:
        Cache(detector=detector)  # type: ignore[arg-type]
    assert message in str(e.value)


def test_a_quiet_cache_has_no_alerts() -> None:
    cache = Cache(detector_tick=0.05)
    for i in range(50):
        cache.get_or_load(f"u:{i}", lambda: i)
    assert cache.alerts() == []


def test_hot_keys_export_import_and_warm_with_progress() -> None:
    old = Cache()
    # p:0, p:1 and p:2 are read 16,000, 8,000 and 4,000 times (hits are sampled one in
    # 256, so the gaps are wide); p:3 to p:9 ten times each.
    for i, reads in enumerate([16000, 8000, 4000] + [10] * 7):
        for _ in range(reads):
            old.get_or_load(f"p:{i}", lambda: "x")
    top = old.hot_keys(3)
    assert [k.key for k in top] == ["p:0", "p:1", "p:2"]
    assert isinstance(top[0], HotKey) and top[0].count >= top[1].count
    saved = old.export_hot_keys(10)

    new = Cache(origin_budget=2)
    keys = new.import_hot_keys(saved)
    assert keys[:3] == ["p:0", "p:1", "p:2"] and len(keys) == 10
    seen: list[int] = []

    def load(key: str) -> object:
        return ABSENT if key == "p:9" else key.upper()

    def progress(r: WarmReport) -> None:
        seen.append(r.done)

    report = new.warm(keys, load, concurrency=8, progress=progress)
    assert (report.requested, report.loaded, report.absent, report.skipped) == (10, 9, 1, 0)
    assert sorted(seen) == list(range(1, 11))
    assert new.get("p:0") == "P:0"
    again = new.warm(keys, load)
    assert again.skipped == 10 and again.loaded == 0
    with pytest.raises(HotKeysFormatError):
        new.import_hot_keys('[{"key": 1}]')
    with pytest.raises(ValueError):
        new.import_hot_keys("not json")


def test_metrics_count_expired_and_cold_misses() -> None:
    cache = Cache(ttl=0.05, jitter=0)
    cache.set("n:1", 1)
    assert cache.get("n:2") is None
    time.sleep(0.08)
    assert cache.get("n:1") is None
    c = cache.metrics().total
    assert (c.cold_misses, c.expired_misses, c.misses) == (1, 1, 2)
    assert 'herdless_expired_misses_total{namespace="n"} 1' in cache.prometheus()
