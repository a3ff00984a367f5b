"""The ResourceQuota controller: status.hard mirrors spec.hard and status.used follows the namespace's objects, run
by the real controller manager over a temporary store."""

from __future__ import annotations

import pytest

from lifecycle_harness import Queue, running, wait_for

from kctl.controllers.resourcequota import ResourceQuotaController, ResourceQuotaSettings


def _quota(api, name: str = "q", *, namespace: str = "default", **hard: str) -> dict:
    return api.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": namespace},
                       "spec": {"hard": {k.replace("__", "/").replace("_", "."): v for k, v in hard.items()}}})


def _pod(api, name: str, *, cpu: str = "100m", memory: str = "64Mi", namespace: str = "default") -> dict:
    return api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                       "spec": {"containers": [{"name": "app", "image": "busybox",
                                                "resources": {"requests": {"cpu": cpu, "memory": memory},
                                                              "limits": {"cpu": cpu, "memory": memory}}}]}})


def _status(api, name: str = "q", namespace: str = "default") -> dict:
    return api.get(api.resource("quota"), name, namespace=namespace).get("status") or {}


def _used_is(api, expected: dict, name: str = "q", namespace: str = "default"):
    return lambda: _status(api, name, namespace).get("used") == expected


def test_status_follows_pods_configmaps_and_their_end(api):
    """status.hard = spec.hard; used counts pods' requests/limits and configmaps, and drops finished/deleted pods."""
    _quota(api, pods="10", requests_cpu="2", limits_memory="1Gi", configmaps="5")
    _pod(api, "a", cpu="500m", memory="256Mi")
    with running(api, [ResourceQuotaController()]):
        wait_for(_used_is(api, {"pods": "1", "requests.cpu": "500m", "limits.memory": "256Mi", "configmaps": "0"}),
                 what="first usage")
        assert _status(api)["hard"] == {"pods": "10", "requests.cpu": "2", "limits.memory": "1Gi", "configmaps": "5"}
        _pod(api, "b", cpu="1", memory="256Mi")
        api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
        wait_for(_used_is(api, {"pods": "2", "requests.cpu": "1500m", "limits.memory": "512Mi", "configmaps": "1"}),
                 what="a new pod and configmap counted")
        done = api.get(api.resource("pods"), "a", namespace="default")
        done["status"]["phase"] = "Failed"
        api.update_status(done)
        wait_for(_used_is(api, {"pods": "1", "requests.cpu": "1", "limits.memory": "256Mi", "configmaps": "1"}),
                 what="a failed pod no longer counted")
        api.delete(api.resource("pods"), "b", namespace="default", grace_period=0)
        wait_for(_used_is(api, {"pods": "0", "requests.cpu": "0", "limits.memory": "0", "configmaps": "1"}),
                 what="a deleted pod no longer counted")


def test_a_new_or_changed_quota_gets_its_status(api):
    """A quota made while the controller runs gets a status; changing spec.hard changes status.hard."""
    _pod(api, "a")
    with running(api, [ResourceQuotaController()]):
        _quota(api, "late", pods="3")
        wait_for(lambda: _status(api, "late") == {"hard": {"pods": "3"}, "used": {"pods": "1"}}, what="status made")
        stored = api.get(api.resource("quota"), "late", namespace="default")
        stored["spec"]["hard"] = {"pods": "5", "count/pods": "9"}
        api.update(stored)
        wait_for(lambda: _status(api, "late") == {"hard": {"pods": "5", "count/pods": "9"},
                                                  "used": {"pods": "1", "count/pods": "1"}}, what="status follows spec")


@pytest.mark.parametrize("hard, make, used", [
    ({"count/deployments.apps": "3"},
     {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
      "spec": {"selector": {"matchLabels": {"a": "b"}},
               "template": {"metadata": {"labels": {"a": "b"}},
                            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}},
     {"count/deployments.apps": "1"}),
    ({"services": "4", "services.loadbalancers": "2", "services.nodeports": "9"},
     {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
      "spec": {"type": "LoadBalancer", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}},
     {"services": "1", "services.loadbalancers": "1", "services.nodeports": "2"}),
    ({"requests.storage": "10Gi", "persistentvolumeclaims": "3"},
     {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
      "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
               "resources": {"requests": {"storage": "1536Mi"}}}},
     {"requests.storage": "1536Mi", "persistentvolumeclaims": "1"}),
], ids=["count-of-any-kind", "services", "claims"])
def test_reconcile_counts_every_kind(api, hard, make, used):
    """One reconcile pass writes the usage of object counts, Services and claims, in hard's format."""
    _quota(api, **{k.replace(".", "_").replace("/", "__"): v for k, v in hard.items()})
    api.create(make)
    controller = ResourceQuotaController()
    with running(api, [controller]):
        wait_for(lambda: _status(api).get("used") == used, what="usage written")
        assert controller.reconcile("default") == 300.0, "looks again after the resync period"


class _Quotas:
    """A quota informer holding fixed quotas."""

    def __init__(self, quotas: list[dict]) -> None:
        self.quotas = quotas

    def list(self, namespace=None):
        return [q for q in self.quotas if namespace is None or q["metadata"]["namespace"] == namespace]


def test_reconcile_of_a_namespace_without_quotas_does_nothing():
    """No quota in the namespace: nothing read or written, no look again."""
    controller = ResourceQuotaController(settings=ResourceQuotaSettings(resync_seconds=300))
    controller.quotas = _Quotas([{"metadata": {"name": "q", "namespace": "other"}}])
    assert controller.reconcile("default") is None


def test_pod_updates_that_change_no_charge_queue_nothing():
    """A pod's label or status change that charges the same queues nothing; a pod finishing queues its namespace."""
    controller = ResourceQuotaController()
    controller.queue = Queue()
    controller.quotas = _Quotas([{"metadata": {"name": "q", "namespace": "default"}}])
    running_pod = {"metadata": {"name": "a", "namespace": "default"}, "status": {"phase": "Running"},
                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    relabelled = {**running_pod, "metadata": {**running_pod["metadata"], "labels": {"x": "y"}}}
    finished = {**running_pod, "status": {"phase": "Succeeded"}}
    controller._on_pod_update(running_pod, relabelled)
    assert controller.queue.keys == []
    controller._on_pod_update(running_pod, finished)
    assert controller.queue.keys == ["default"]
