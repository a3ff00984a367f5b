"""The ServiceAccount controller gives every active namespace a `default` ServiceAccount (and remakes it), and a
Pod's spec.serviceAccountName defaults to `default` as Kubernetes' ServiceAccount admission does."""

from __future__ import annotations

import pytest

from lifecycle_harness import Queue, exists, running, wait_for

from kctl.controllers.serviceaccount import ServiceAccountController


def _namespace(api, name: str) -> dict:
    return api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def test_every_namespace_gets_default_and_it_is_remade(api):
    """Existing and new namespaces get `default`; deleting it brings it back; other accounts are left alone."""
    _namespace(api, "team")
    with running(api, [ServiceAccountController()]):
        wait_for(lambda: exists(api, "sa", "default", namespace="default")
                 and exists(api, "sa", "default", namespace="team"), what="default accounts made")
        _namespace(api, "late")
        wait_for(lambda: exists(api, "sa", "default", namespace="late"), what="default in a new namespace")
        api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app", "namespace": "team"}})
        api.delete(api.resource("sa"), "default", namespace="team")
        wait_for(lambda: exists(api, "sa", "default", namespace="team"), what="default remade")
        api.delete(api.resource("sa"), "app", namespace="team")
        assert exists(api, "sa", "default", namespace="team")
    assert not exists(api, "sa", "app", namespace="team"), "only `default` is remade"


class _Informer:
    """A cache of fixed objects by (namespace, name)."""

    def __init__(self, objects: list[dict]) -> None:
        self.objects = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects}

    def get(self, namespace: str | None, name: str) -> dict | None:
        return self.objects.get((namespace or "", name))


@pytest.mark.parametrize("namespace, made", [
    ({"metadata": {"name": "team"}, "status": {"phase": "Active"}}, True),
    ({"metadata": {"name": "team", "deletionTimestamp": "2026-01-01T00:00:00Z"}}, False),
    ({"metadata": {"name": "team"}, "status": {"phase": "Terminating"}}, False),
    (None, False),
])
def test_reconcile_makes_default_only_in_an_active_namespace(api, namespace, made):
    """A missing, deleted or Terminating namespace gets no account; an active one does."""
    _namespace(api, "team")
    controller = ServiceAccountController()
    controller.api, controller.queue = api, Queue()
    controller.namespaces = _Informer([namespace] if namespace else [])
    controller.accounts = _Informer([])
    assert controller.reconcile("team") is None
    assert exists(api, "sa", "default", namespace="team") is made
    assert controller.reconcile("team") is None, "a second pass finds it there"


def test_deleting_default_queues_its_namespace():
    """Only the deletion of an account named `default` queues the namespace key."""
    controller = ServiceAccountController()
    controller.queue = Queue()
    controller._on_account_deleted({"metadata": {"name": "app", "namespace": "team"}})
    controller._on_account_deleted({"metadata": {"name": "default", "namespace": "team"}})
    assert controller.queue.keys == ["team"]


@pytest.mark.parametrize("spec, expected", [
    ({}, "default"),
    ({"serviceAccountName": "app"}, "app"),
    ({"serviceAccount": "legacy"}, "legacy"),
])
def test_pod_service_account_name_is_defaulted(api, spec, expected):
    """A new Pod without spec.serviceAccountName runs as `default` (or its deprecated spec.serviceAccount)."""
    pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                      "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}})
    assert pod["spec"]["serviceAccountName"] == expected
