"""ControllerExpectations: pending creations and deletions, observation, expiry, forgetting."""

from __future__ import annotations

import pytest

from kctl.client.expectations import EXPECTATIONS_TTL_SECONDS, Expectations


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _creations(exp: Expectations) -> None:
    exp.expect_creations("ns/rs", 2)
    exp.creation_observed("ns/rs")


def _all_created(exp: Expectations) -> None:
    exp.expect_creations("ns/rs", 2)
    exp.creation_observed("ns/rs")
    exp.creation_observed("ns/rs")


def _deletions(exp: Expectations) -> None:
    exp.expect_deletions("ns/rs", ["u1", "u2"])
    exp.deletion_observed("ns/rs", "u1")


def _all_deleted(exp: Expectations) -> None:
    exp.expect_deletions("ns/rs", ["u1", "u2"])
    exp.deletion_observed("ns/rs", "u2")
    exp.deletion_observed("ns/rs", "u1")


def _wrong_uid(exp: Expectations) -> None:
    exp.expect_deletions("ns/rs", ["u1"])
    exp.deletion_observed("ns/rs", "other")


def _extra_observations(exp: Expectations) -> None:
    exp.expect_creations("ns/rs", 1)
    exp.creation_observed("ns/rs")
    exp.creation_observed("ns/rs")  # an extra one must not go negative and hide the next
    exp.expect_creations("ns/rs", 1)


def _forgotten(exp: Expectations) -> None:
    exp.expect_creations("ns/rs", 3)
    exp.delete("ns/rs")


@pytest.mark.parametrize("steps, satisfied", [
    (lambda exp: None, True),
    (_creations, False),
    (_all_created, True),
    (_deletions, False),
    (_all_deleted, True),
    (_wrong_uid, False),
    (_extra_observations, False),
    (_forgotten, True),
], ids=["nothing-recorded", "creation-pending", "all-created", "deletion-pending", "all-deleted",
        "other-uid-deleted", "extra-observation", "deleted-key"])
def test_satisfied(steps, satisfied):
    """satisfied() is true only when every expected creation and deletion was observed."""
    exp = Expectations(clock=Clock())
    steps(exp)
    assert exp.satisfied("ns/rs") is satisfied


def test_expectations_expire_after_ttl():
    """Pending expectations count as satisfied once the TTL (5 minutes) has passed."""
    clock = Clock()
    exp = Expectations(clock=clock)
    exp.expect_creations("k", 1)
    clock.now += EXPECTATIONS_TTL_SECONDS - 1
    assert not exp.satisfied("k")
    clock.now += 2
    assert exp.satisfied("k")


def test_keys_are_independent_and_pending_reports():
    """One key's expectations do not affect another's; pending() shows what is awaited."""
    exp = Expectations(clock=Clock())
    exp.expect_creations("a", 1)
    exp.expect_deletions("b", ["u"])
    assert exp.pending("a") == (1, frozenset())
    assert exp.pending("b") == (0, frozenset({"u"}))
    assert exp.pending("c") == (0, frozenset())
    assert not exp.satisfied("a") and not exp.satisfied("b") and exp.satisfied("c")
