"""wait_for: poll until a state is reached, for tests and benchmarks.

The deadline only turns a hang into a failure naming what never happened; nothing here
asserts timing. The test harnesses (tests/unit/client, tests/unit/controllers) use it.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")

#: how long a wait may take before the test fails as hung
WAIT_SECONDS = 30.0


def wait_for(predicate: Callable[[], T], *, what: str, timeout: float = WAIT_SECONDS, poll: float = 0.02) -> T:
    """Poll predicate until it returns something true; AssertionError naming `what` if it never does."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(poll)
