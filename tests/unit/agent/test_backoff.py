"""Backoff: initial delay doubling to a maximum, reset after a quiet period, per-pod forgetting."""

from __future__ import annotations

import pytest

from kctl.agent.backoff import Backoff

KEY = ("uid-1", "app")


def test_fresh_key_is_ready() -> None:
    """A key never recorded is ready, and its first delay is `initial`."""
    backoff = Backoff(initial=0.1, maximum=1.0)
    assert backoff.ready(KEY, 0.0) and backoff.next_delay(KEY, 0.0) == 0.1 and backoff.remaining(KEY, 0.0) == 0


def test_delays_double_up_to_maximum() -> None:
    """Each record doubles the delay, never beyond maximum."""
    backoff = Backoff(initial=0.1, maximum=1.0, reset_after=100.0)
    delays = [backoff.record(KEY, float(t)) for t in range(6)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


@pytest.mark.parametrize(("elapsed", "ready"), [(0.0, False), (9.99, False), (10.0, True), (50.0, True)],
                         ids=["at-once", "just-before", "on-time", "later"])
def test_ready_after_delay(elapsed: float, ready: bool) -> None:
    """After a record the key is ready once the delay has passed."""
    backoff = Backoff()
    backoff.record(KEY, 100.0)
    assert backoff.ready(KEY, 100.0 + elapsed) is ready


def test_reset_after_quiet_period() -> None:
    """A key quiet for longer than reset_after starts again at the initial delay."""
    backoff = Backoff(initial=10, maximum=300, reset_after=600)
    for t in (0, 10, 30, 70):
        backoff.record(KEY, t)
    assert backoff.next_delay(KEY, 70) == 160
    assert backoff.next_delay(KEY, 70 + 601) == 10
    assert backoff.record(KEY, 70 + 601) == 10


def test_forget_and_clear() -> None:
    """forget drops every key of a pod; clear one key; other pods keep theirs."""
    backoff = Backoff()
    for key in (("uid-1", "a"), ("uid-1", "image:a"), ("uid-2", "a")):
        backoff.record(key, 0.0)
    backoff.forget("uid-1")
    assert backoff.ready(("uid-1", "a"), 0.0) and backoff.ready(("uid-1", "image:a"), 0.0)
    assert not backoff.ready(("uid-2", "a"), 0.0)
    backoff.clear(("uid-2", "a"))
    assert backoff.ready(("uid-2", "a"), 0.0)


def test_invalid_settings() -> None:
    """A maximum below the initial delay is refused."""
    with pytest.raises(ValueError):
        Backoff(initial=10, maximum=1)
