"""kctl.ops.rollback under contention: each Conflict re-reads the Deployment and decides again (retry_on_conflict).

The fixture is test_rollback_ops' (a Deployment at revision 2 with ReplicaSets for
revisions 1 and 2); here the update is made to conflict.
"""

from __future__ import annotations

import pytest

from kctl.machinery.errors import Conflict
from kctl.ops import rollback as rb

from test_rollback_ops import _deployment, web  # noqa: F401 - the fixture is used by name


def conflicting_updates(api, monkeypatch, times: int, *, meanwhile=None) -> list[dict]:
    """Make the first `times` api.update calls raise Conflict (after running `meanwhile`); calls recorded."""
    calls: list[dict] = []
    real = api.update

    def update(obj, *args, **kwargs):
        calls.append(obj)
        if len(calls) <= times:
            if meanwhile is not None:
                meanwhile()
            raise Conflict("the object has been modified")
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(api, "update", update)
    return calls


@pytest.mark.parametrize("times", [1, rb.ATTEMPTS - 1], ids=["once", "all-but-last"])
def test_rollback_lands_after_conflicts(web, monkeypatch, times):
    """Conflicts short of ATTEMPTS are retried on a fresh read; the rollback then lands."""
    calls = conflicting_updates(web, monkeypatch, times)
    assert rb.rollback(web, web.resource("deployments"), _deployment(web)) == rb.RollbackResult(True, 1)
    assert len(calls) == times + 1
    assert _deployment(web)["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.35"


def test_rollback_conflicting_every_attempt_raises(web, monkeypatch):
    """A Conflict on each of ATTEMPTS tries is raised; the Deployment is unchanged."""
    calls = conflicting_updates(web, monkeypatch, rb.ATTEMPTS)
    with pytest.raises(Conflict):
        rb.rollback(web, web.resource("deployments"), _deployment(web))
    assert len(calls) == rb.ATTEMPTS
    assert _deployment(web)["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"


def test_rollback_decides_again_on_the_fresh_read(web, monkeypatch):
    """Paused by someone else before our write landed: the re-read Deployment is refused, not rolled back."""
    def pause() -> None:
        web.patch(web.resource("deployments"), "web", {"spec": {"paused": True}}, namespace="default",
                  patch_type="merge")

    conflicting_updates(web, monkeypatch, 1, meanwhile=pause)
    with pytest.raises(rb.RollbackError, match="you cannot rollback a paused deployment"):
        rb.rollback(web, web.resource("deployments"), _deployment(web))
    assert _deployment(web)["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"
