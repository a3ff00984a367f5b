"""Fixtures for the pod-logic tests: a fake clock and a node Harness (see podharness.py)."""

from __future__ import annotations

import pytest
from podharness import IMAGE, Harness, new_context

from kctl.runtime.memory import FakeClock, MemoryRuntime


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock that moves only when a test says so."""
    return FakeClock()


@pytest.fixture
def node(fake_clock: FakeClock) -> Harness:
    """A node whose runtime holds IMAGE, with Kubernetes' back-off (10 s doubling to 300 s)."""
    runtime = MemoryRuntime(images={IMAGE}, clock=fake_clock)
    harness = Harness(clock=fake_clock, runtime=runtime, ctx=None)  # type: ignore[arg-type]
    harness.ctx = new_context(fake_clock, harness.lookup)
    return harness
