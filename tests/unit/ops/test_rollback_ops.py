"""kctl.ops.rollback as a library: `rollout undo` on the API it is given, outside any command."""

from __future__ import annotations

import pytest

from kctl.machinery.errors import Conflict
from kctl.ops import rollback as rb


def _template(image: str, *, hash_: str | None = None) -> dict:
    labels = {"app": "web", **({"pod-template-hash": hash_} if hash_ else {})}
    return {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": image}]}}


@pytest.fixture
def web(api):
    """Deployment web at revision 2 (busybox:1.36) with ReplicaSets for revisions 1 (busybox:1.35) and 2."""
    d = api.create({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "web", "namespace": "default",
                                 "annotations": {rb.REVISION: "2"}},
                    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                             "template": _template("busybox:1.36")}})
    for revision, image in ((1, "busybox:1.35"), (2, "busybox:1.36")):
        api.create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": f"web-h{revision}", "namespace": "default",
                                 "annotations": {rb.REVISION: str(revision),
                                                 "kubernetes.io/change-cause": f"r{revision}"},
                                 "labels": {"app": "web", "pod-template-hash": f"h{revision}"},
                                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                                      "uid": d["metadata"]["uid"], "controller": True}]},
                    "spec": {"replicas": 0,
                             "selector": {"matchLabels": {"app": "web", "pod-template-hash": f"h{revision}"}},
                             "template": _template(image, hash_=f"h{revision}")}})
    return api


def _deployment(api) -> dict:
    return api.get(api.resource("deployments"), "web", namespace="default")


@pytest.mark.parametrize(("to_revision", "dry_run", "result", "image"), [
    (0, None, rb.RollbackResult(True, 1), "busybox:1.35"),
    (1, None, rb.RollbackResult(True, 1), "busybox:1.35"),
    (2, None, rb.RollbackResult(False, 2), "busybox:1.36"),
    (0, "client", rb.RollbackResult(True, 1), "busybox:1.36"),
    (0, "server", rb.RollbackResult(True, 1), "busybox:1.36"),
], ids=["previous", "explicit", "already-current", "client-dry-run", "server-dry-run"])
def test_rollback(web, capsys, to_revision, dry_run, result, image):
    """rollback writes the chosen revision's template (without pod-template-hash), or nothing when told so."""
    assert rb.rollback(web, web.resource("deployments"), _deployment(web), to_revision=to_revision,
                       dry_run=dry_run) == result
    d = _deployment(web)
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == image
    assert d["spec"]["template"]["metadata"]["labels"] == {"app": "web"}
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(("change", "to_revision", "message"), [
    ({"spec": {"paused": True}}, 0, "you cannot rollback a paused deployment"),
    ({}, 7, "unable to find specified revision 7 in history"),
    ({}, -1, "unable to find specified revision -1 in history"),
], ids=["paused", "unknown-revision", "negative-revision"])
def test_rollback_refuses(web, change, to_revision, message):
    """A paused Deployment or a revision not in the history is a RollbackError with kubectl's message."""
    if change:
        web.patch(web.resource("deployments"), "web", change, namespace="default", patch_type="merge")
    with pytest.raises(rb.RollbackError, match=message):
        rb.rollback(web, web.resource("deployments"), _deployment(web), to_revision=to_revision)


def test_rollback_rereads_after_a_conflict(web):
    """A stale Deployment (another writer came first) is read again and rolled back on the fresh copy."""
    stale = _deployment(web)
    fresh = _deployment(web)
    fresh["metadata"].setdefault("labels", {})["touched"] = "yes"
    web.update(fresh)
    with pytest.raises(Conflict):
        web.update(stale)
    assert rb.rollback(web, web.resource("deployments"), stale) == rb.RollbackResult(True, 1)
    d = _deployment(web)
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.35"
    assert d["metadata"]["labels"] == {"touched": "yes"}
