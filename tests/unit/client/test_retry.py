"""retry_on_conflict (kctl.client.retry): client-go's RetryOnConflict for read-modify-write."""

from __future__ import annotations

import pytest

from kctl.machinery.errors import Conflict, NotFound
from kctl.client.retry import retry_on_conflict

C = Conflict("the object has been modified")


def scripted(outcomes: list):
    """A function whose n-th call raises or returns the n-th outcome; .calls counts them."""
    def fn():
        fn.calls += 1
        outcome = outcomes[fn.calls - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome
    fn.calls = 0
    return fn


@pytest.mark.parametrize("outcomes, attempts, backoff, result, raised, calls, sleeps", [
    (["ok"], 3, 0.01, "ok", None, 1, []),
    ([C, "ok"], 3, 0.01, "ok", None, 2, [0.01]),
    ([C, C, "ok"], 3, 0.5, "ok", None, 3, [0.5, 0.5]),
    ([C, C, C], 3, 0.01, None, Conflict, 3, [0.01, 0.01]),
    ([C, C, C, C, C], 5, 0.0, None, Conflict, 5, []),
    ([C], 1, 0.01, None, Conflict, 1, []),
    ([NotFound("pods", "web")], 3, 0.01, None, NotFound, 1, []),
    ([C, ValueError("bug")], 3, 0.01, None, ValueError, 2, [0.01]),
    ([C, None], 3, 0.01, None, None, 2, [0.01]),
], ids=["first-try", "one-conflict", "two-conflicts", "every-attempt-conflicts", "no-backoff", "one-attempt",
        "other-api-error-at-once", "other-exception-at-once", "returns-none"])
def test_retry_on_conflict(outcomes, attempts, backoff, result, raised, calls, sleeps):
    """Conflict calls fn again, `backoff` apart, up to `attempts` calls; anything else passes through at once."""
    fn = scripted(outcomes)
    slept: list[float] = []
    if raised is None:
        assert retry_on_conflict(fn, attempts=attempts, backoff=backoff, sleep=slept.append) == result
    else:
        with pytest.raises(raised) as info:
            retry_on_conflict(fn, attempts=attempts, backoff=backoff, sleep=slept.append)
        if raised is Conflict:
            assert info.value is C  # the last Conflict itself, not a new one
    assert fn.calls == calls
    assert slept == sleeps


@pytest.mark.parametrize("attempts", [0, -1], ids=["zero", "negative"])
def test_retry_on_conflict_needs_an_attempt(attempts):
    """Fewer than one attempt is a programming error, said at once."""
    with pytest.raises(ValueError, match="attempts"):
        retry_on_conflict(lambda: None, attempts=attempts)


def test_retry_on_conflict_defaults_are_client_gos():
    """Without arguments: five attempts, 10 ms apart (client-go's DefaultRetry)."""
    fn = scripted([C] * 5)
    slept: list[float] = []
    with pytest.raises(Conflict):
        retry_on_conflict(fn, sleep=slept.append)
    assert fn.calls == 5 and slept == [0.01] * 4
