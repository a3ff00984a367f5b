"""Helpers for the client layer's tests: wait (with a generous deadline) for a state to be reached.

The deadline only turns a hang into a failure; nothing here asserts timing.
"""

from __future__ import annotations

from kctl.testing.waiting import WAIT_SECONDS, wait_for

__all__ = ["WAIT_SECONDS", "wait_for"]
