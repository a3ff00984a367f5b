"""Deleting a Namespace empties it (pods through their graceful path), then removes it."""

from __future__ import annotations

import pytest

from lifecycle_harness import deployment_chain, exists, fake_kubelet, running, wait_for

from kctl.machinery.errors import Forbidden
from kctl.controllers.garbagecollector import GarbageCollector
from kctl.controllers.namespace import NamespaceController


def fill(api) -> None:
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    deployment_chain(api, pods=3, nodes=["node-1"], namespace="team")
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "team"},
                "data": {"a": "1"}})
    api.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "team"},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "loner", "namespace": "team"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}})


def left_in(api, namespace: str) -> list[str]:
    found = []
    for rt in api.registry:
        if rt.namespaced:
            found += [f"{rt.kind}/{o['metadata']['name']}" for o in api.list(rt, namespace=namespace)[0]]
    return found


def test_namespace_deletion_end_to_end(api):
    """Terminating refuses creates; everything in it is deleted, bound pods by their agent; then it goes."""
    with fake_kubelet(api, ["node-1"]):
        fill(api)
        terminating = api.delete(api.resource("ns"), "team")
        assert terminating["status"]["phase"] == "Terminating"
        assert terminating["spec"]["finalizers"] == ["kubernetes"]
        with pytest.raises(Forbidden, match="being terminated"):
            api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": "team"}})
        with running(api, [NamespaceController(), GarbageCollector()]):
            wait_for(lambda: not exists(api, "ns", "team", namespace=None), what="namespace removed")
    assert left_in(api, "team") == []
    assert exists(api, "ns", "default", namespace=None), "other namespaces are untouched"


def test_delete_namespace_wait_finishes(store_path):
    """`kctl delete namespace team --wait` returns 0 once the controllers have emptied it."""
    from typer.testing import CliRunner

    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store
    from kctl.cli.main import _register, app

    _register()

    store = Store(store_path)
    server = APIServer(store, user="tester")
    try:
        with fake_kubelet(server, ["node-1"]):
            fill(server)
            with running(server, [NamespaceController(), GarbageCollector()]):
                result = CliRunner().invoke(app, ["delete", "namespace", "team", "--wait", "--timeout", "60"])
                assert result.exit_code == 0, result.output
                assert 'namespace "team" deleted' in result.output
            assert not exists(server, "ns", "team", namespace=None)
    finally:
        store.close()
