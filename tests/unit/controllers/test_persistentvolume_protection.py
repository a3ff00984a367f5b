"""pvc-protection, pv-protection and the default class `local`: a claim a running pod uses stays Terminating until the
pod is done, a Bound volume stays until it is not Bound, and `local` is made when missing but never overwritten."""

from __future__ import annotations

import pytest

from lifecycle_harness import exists, running, wait_for

from kctl.controllers.pvcprotection import PVCProtectionController, pod_uses_claim
from kctl.controllers.pvprotection import PVProtectionController
from kctl.controllers.storageclass import DefaultStorageClassController

FINALIZER = "kubernetes.io/pvc-protection"


def _claim(api, name: str = "data") -> dict:
    return api.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                       "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                                "storageClassName": ""}})


def _pod(api, name: str = "app", *, claim: str = "data", node: str | None = "h1") -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "busybox"}],
                  "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}
    if node:
        spec["nodeName"] = node
    return api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def _set_pod_phase(api, name: str, phase: str) -> None:
    pod = api.get(api.resource("pods"), name, namespace="default")
    pod["status"]["phase"] = phase
    api.update_status(pod)


def _terminating(api, resource: str, name: str, namespace: str | None = "default") -> bool:
    obj = api.find(api.resource(resource), name, namespace=namespace)
    return obj is not None and bool(obj["metadata"].get("deletionTimestamp"))


def test_a_claim_in_use_stays_terminating_until_its_pod_finishes(api):
    """Deleting a claim a scheduled, running pod uses leaves it Terminating; the pod Succeeded lets it go."""
    _claim(api)
    _pod(api)
    with running(api, [PVCProtectionController()]):
        api.delete(api.resource("pvc"), "data", namespace="default")
        assert _terminating(api, "pvc", "data")
        _claim(api, "other")
        api.delete(api.resource("pvc"), "other", namespace="default")
        wait_for(lambda: not exists(api, "pvc", "other"), what="an unused claim removed")
        assert _terminating(api, "pvc", "data"), "still used by the pod"
        _set_pod_phase(api, "app", "Succeeded")
        wait_for(lambda: not exists(api, "pvc", "data"), what="claim removed once the pod finished")


def test_deleting_the_pod_releases_the_claim(api):
    """A Terminating claim goes when the last pod using it is deleted."""
    _claim(api)
    _pod(api, node=None)
    _pod(api, "runner")
    with running(api, [PVCProtectionController()]):
        api.delete(api.resource("pvc"), "data", namespace="default")
        assert _terminating(api, "pvc", "data")
        api.delete(api.resource("pods"), "runner", namespace="default", grace_period=0)
        wait_for(lambda: not exists(api, "pvc", "data"), what="claim removed with its pod gone")


@pytest.mark.parametrize("pod, uses", [
    ({"spec": {"nodeName": "h1"}, "status": {"phase": "Running"}}, True),
    ({"spec": {}, "status": {"phase": "Pending"}}, False),
    ({"spec": {"nodeName": "h1"}, "status": {"phase": "Succeeded"}}, False),
    ({"spec": {"nodeName": "h1"}, "status": {"phase": "Failed"}}, False),
    ({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 0},
      "spec": {"nodeName": "h1"}, "status": {"phase": "Running"}}, False),
    ({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30},
      "spec": {"nodeName": "h1"}, "status": {"phase": "Running"}}, True),
], ids=["running", "unscheduled", "succeeded", "failed", "force-deleted", "terminating"])
def test_pod_uses_claim(pod, uses):
    """podUsesPVC: scheduled, not finished, not force-deleted."""
    pod = {"metadata": {"name": "p", **pod.get("metadata", {})},
           "spec": {**pod["spec"], "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]},
           "status": pod["status"]}
    assert pod_uses_claim(pod, "data") is uses
    assert pod_uses_claim(pod, "other") is False


def test_an_ephemeral_volumes_claim_counts_as_used():
    """The claim `<pod>-<volume>` of an ephemeral volume is the pod's."""
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "h1", "volumes": [{"name": "scratch", "ephemeral": {}}]},
           "status": {"phase": "Running"}}
    assert pod_uses_claim(pod, "p-scratch")


def test_the_finalizer_is_added_to_a_claim_that_lacks_it(api):
    """A live claim without the protection finalizer gets it back from the controller."""
    _claim(api)
    api.patch(api.resource("pvc"), "data", {"metadata": {"finalizers": None}}, patch_type="merge",
              namespace="default")
    with running(api, [PVCProtectionController()]):
        wait_for(lambda: FINALIZER in (api.get(api.resource("pvc"), "data", namespace="default")["metadata"]
                                       .get("finalizers") or ()), what="finalizer added")


def test_a_bound_volume_stays_until_it_is_not_bound(api):
    """Deleting a Bound volume leaves it Terminating; once Released the pv-protection finalizer comes off."""
    pv = api.create({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
                     "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                              "hostPath": {"path": "/srv/pv1"}}})
    assert pv["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    pv["status"] = {"phase": "Bound"}
    api.update_status(pv)
    with running(api, [PVProtectionController()]):
        api.delete(api.resource("pv"), "pv1")
        assert _terminating(api, "pv", "pv1", namespace=None)
        pv = api.get(api.resource("pv"), "pv1")
        pv["status"] = {"phase": "Released"}
        api.update_status(pv)
        wait_for(lambda: not exists(api, "pv", "pv1", namespace=None), what="volume removed once Released")


def test_local_is_made_when_missing(api):
    """With no classes, `local` is made: kctl.io/local-volume, Delete, WaitForFirstConsumer, default."""
    with running(api, [DefaultStorageClassController()]):
        wait_for(lambda: exists(api, "sc", "local", namespace=None), what="local made")
    sc = api.get(api.resource("sc"), "local")
    assert (sc["provisioner"], sc["reclaimPolicy"], sc["volumeBindingMode"]) == \
        ("kctl.io/local-volume", "Delete", "WaitForFirstConsumer")
    assert sc["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}


class _Classes:
    """The informer the controller reads, answered from the store (the test calls reconcile itself)."""

    def __init__(self, api) -> None:
        self.api, self.rt = api, api.resource("sc")

    def get(self, namespace: str | None, name: str) -> dict | None:
        return self.api.find(self.rt, name)


def _reconcile_local(api) -> None:
    controller = DefaultStorageClassController()
    controller.api, controller.classes = api, _Classes(api)
    assert controller.reconcile("local") is None


def test_a_users_local_is_left_alone_and_another_default_keeps_winning(api):
    """An edited `local` is not overwritten; made beside a user's default class, `local` is not marked default."""
    api.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": "local", "annotations": {"team": "edited"}},
                "provisioner": "kctl.io/local-volume", "allowVolumeExpansion": True})
    _reconcile_local(api)
    sc = api.get(api.resource("sc"), "local")
    assert sc["metadata"]["annotations"] == {"team": "edited"} and sc["allowVolumeExpansion"] is True
    api.delete(api.resource("sc"), "local")
    api.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": "mine", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                "provisioner": "example.com/x"})
    _reconcile_local(api)
    assert not api.get(api.resource("sc"), "local")["metadata"].get("annotations")


def test_the_whole_life_of_a_provisioned_claim(api):
    """All four controllers: `local` made, claim provisioned and bound, protected while its pod runs, then Released;
    the volume removed (as its node does) goes once not Bound."""
    from kctl.controllers.persistentvolume.binder import PersistentVolumeBinder

    controllers = [DefaultStorageClassController(), PersistentVolumeBinder(), PVCProtectionController(),
                   PVProtectionController()]
    with running(api, controllers):
        wait_for(lambda: exists(api, "sc", "local", namespace=None), what="local made")
        pvc = api.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                          "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
        assert pvc["spec"]["storageClassName"] == "local"
        _pod(api)
        api.patch(api.resource("pvc"), "data", {"metadata": {"annotations": {
            "volume.kubernetes.io/selected-node": "h1"}}}, patch_type="merge", namespace="default")
        volume = f"pvc-{pvc['metadata']['uid']}"

        def phase(resource: str, name: str, namespace: str | None) -> str | None:
            obj = api.find(api.resource(resource), name, namespace=namespace)
            return None if obj is None else obj["status"].get("phase")

        wait_for(lambda: phase("pvc", "data", "default") == "Bound" and phase("pv", volume, None) == "Bound",
                 what="claim and volume Bound")
        api.delete(api.resource("pv"), volume)
        api.delete(api.resource("pvc"), "data", namespace="default")
        assert _terminating(api, "pvc", "data") and _terminating(api, "pv", volume, namespace=None)
        _set_pod_phase(api, "app", "Succeeded")
        wait_for(lambda: not exists(api, "pvc", "data"), what="claim gone once its pod finished")
        wait_for(lambda: not exists(api, "pv", volume, namespace=None), what="volume gone once Released")
