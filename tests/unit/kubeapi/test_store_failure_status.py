"""The store's own failures over HTTPS: StoreUnavailable is a 503 Status, a CommitConflict the store gave up on a
409 Conflict, never a 500 with a traceback."""

from __future__ import annotations

import pytest

from kctl.store.contract import CommitConflict, StoreUnavailable

LOST = "etcd://10.0.0.1:2379: the etcd cluster has lost its quorum (2 of 3 members do not answer)"


def _raising(error: Exception):
    def fail(*_args, **_kwargs):
        raise error

    return fail


@pytest.mark.parametrize("method, error, code, reason", [
    ("transact", StoreUnavailable(LOST + "; the outcome of this write is unknown"), 503, "ServiceUnavailable"),
    ("get", StoreUnavailable(LOST), 503, "ServiceUnavailable"),
    ("transact", CommitConflict("etcd: what this transaction read changed before it committed"), 409, "Conflict"),
], ids=["write-unavailable", "read-unavailable", "write-conflict"])
def test_store_failure_is_a_status(kubeapi, monkeypatch, method, error, code, reason):
    """A POST (or GET) the store fails answers the Status of the failure: its code, reason and one-line message."""
    monkeypatch.setattr(kubeapi.api.store, method, _raising(error))
    if method == "get":
        reply = kubeapi.request("GET", "/api/v1/namespaces/default/configmaps/c")
    else:
        reply = kubeapi.request("POST", "/api/v1/namespaces/default/configmaps",
                                body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    status = reply.json()
    assert (reply.status, status["kind"], status["code"], status["reason"]) == (code, "Status", code, reason)
    if code == 503:
        assert status["message"].startswith(LOST) and "\n" not in status["message"]
    else:  # retried by the API server, then the object's own Conflict
        assert status["message"].startswith('Operation cannot be fulfilled on configmaps "c"')
