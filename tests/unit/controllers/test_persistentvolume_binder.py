"""The persistentvolume-binder over the real API and controller manager: kctl.io/local-volume provisioning on the
selected node, static binding (smallest fitting volume), phases Pending/Bound/Lost and Available/Bound/Released/Failed,
and the Events Kubernetes records on the claim."""

from __future__ import annotations

import pytest

from lifecycle_harness import running, wait_for

from kctl.controllers.persistentvolume.binder import PersistentVolumeBinder
from kctl.controllers.persistentvolume.matching import best_match


def _class(api, name: str = "local", *, mode: str = "WaitForFirstConsumer", provisioner: str = "kctl.io/local-volume",
           default: bool = True, reclaim: str = "Delete") -> dict:
    meta: dict = {"name": name}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return api.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
                       "provisioner": provisioner, "reclaimPolicy": reclaim, "volumeBindingMode": mode})


def _claim(api, name: str = "data", *, size: str = "1Gi", modes: tuple = ("ReadWriteOnce",), **spec) -> dict:
    body = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}, **spec}
    return api.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": name, "namespace": "default"}, "spec": body})


def _volume(api, name: str, *, size: str = "5Gi", modes: tuple = ("ReadWriteOnce",), reclaim: str = "Retain",
            labels: dict | None = None, **spec) -> dict:
    body = {"capacity": {"storage": size}, "accessModes": list(modes), "persistentVolumeReclaimPolicy": reclaim,
            "hostPath": {"path": f"/srv/{name}"}, "storageClassName": "", **spec}
    meta: dict = {"name": name}
    if labels:
        meta["labels"] = labels
    return api.create({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": body})


def _get(api, resource: str, name: str, namespace: str | None = "default") -> dict | None:
    return api.find(api.resource(resource), name, namespace=namespace)


def _phase(api, resource: str, name: str) -> str | None:
    obj = _get(api, resource, name, namespace="default" if resource == "pvc" else None)
    return None if obj is None else (obj.get("status") or {}).get("phase")


def _events(api, reason: str) -> list[dict]:
    items, _ = api.list(api.resource("events"))
    return [e for e in items if e.get("reason") == reason]


def _drop_finalizers(api, resource: str, name: str, namespace: str | None = "default") -> None:
    """Take the protection finalizer off (no protection controller runs in these tests)."""
    api.patch(api.resource(resource), name, {"metadata": {"finalizers": None}}, patch_type="merge",
              namespace=namespace)


def _annotate(api, name: str, annotations: dict) -> None:
    api.patch(api.resource("pvc"), name, {"metadata": {"annotations": annotations}}, patch_type="merge",
              namespace="default")


def test_a_wait_for_first_consumer_claim_is_provisioned_on_the_selected_node(api):
    """The default class's claim waits for its pod; with selected-node set, PV pvc-<uid> is made there and bound."""
    _class(api)
    pvc = _claim(api)
    assert pvc["spec"]["storageClassName"] == "local"
    with running(api, [PersistentVolumeBinder()]):
        event = wait_for(lambda: _events(api, "WaitForFirstConsumer"), what="WaitForFirstConsumer event")[0]
        assert event["type"] == "Normal" and event["message"] == \
            "waiting for first consumer to be created before binding"
        assert _phase(api, "pvc", "data") == "Pending"
        _annotate(api, "data", {"volume.kubernetes.io/selected-node": "h1",
                                "volume.kubernetes.io/storage-provisioner": "kctl.io/local-volume"})
        wait_for(lambda: _phase(api, "pvc", "data") == "Bound", what="claim Bound")
    name = f"pvc-{pvc['metadata']['uid']}"
    pv = _get(api, "pv", name, namespace=None)
    assert pv["spec"] == {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Delete",
        "storageClassName": "local", "volumeMode": "Filesystem",
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "default", "name": "data",
                     "uid": pvc["metadata"]["uid"]},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["h1"]}]}]}},
        "csi": {"driver": "kctl.io/local-volume", "volumeHandle": name}}
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "kctl.io/local-volume"
    assert "kubernetes.io/pv-protection" in pv["metadata"]["finalizers"]
    assert pv["status"]["phase"] == "Bound"
    claim = _get(api, "pvc", "data")
    assert claim["spec"]["volumeName"] == name
    assert claim["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
    assert {k: claim["metadata"]["annotations"][k] for k in ("pv.kubernetes.io/bind-completed",
                                                               "pv.kubernetes.io/bound-by-controller")} == \
        {"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"}
    assert [e["message"] for e in _events(api, "ProvisioningSucceeded")] == [f"Successfully provisioned volume {name}"]


def test_a_claim_binds_the_smallest_fitting_static_volume(api):
    """Of the free volumes of the claim's class, the smallest that has its access modes and size is bound."""
    _volume(api, "big", size="10Gi")
    _volume(api, "small", size="2Gi")
    _volume(api, "tiny", size="512Mi")
    _volume(api, "shared-only", size="1Gi", modes=("ReadWriteMany",))
    _claim(api, storageClassName="")
    with running(api, [PersistentVolumeBinder()]):
        wait_for(lambda: _phase(api, "pvc", "data") == "Bound", what="claim Bound")
        wait_for(lambda: _phase(api, "pv", "tiny") == "Available", what="free volumes Available")
    assert _get(api, "pvc", "data")["spec"]["volumeName"] == "small"
    assert _get(api, "pvc", "data")["status"]["capacity"] == {"storage": "2Gi"}
    assert [_phase(api, "pv", n) for n in ("big", "small", "tiny", "shared-only")] == \
        ["Available", "Bound", "Available", "Available"]


def test_a_claim_without_class_waits_for_a_volume_and_takes_it_when_it_appears(api):
    """No class and no volume: FailedBinding (Normal) and Pending; a volume made later is bound at once."""
    _claim(api)
    with running(api, [PersistentVolumeBinder()]):
        event = wait_for(lambda: _events(api, "FailedBinding"), what="FailedBinding event")[0]
        assert (event["type"], event["message"]) == \
            ("Normal", "no persistent volumes available for this claim and no storage class is set")
        assert _phase(api, "pvc", "data") == "Pending"
        _volume(api, "late")
        wait_for(lambda: _phase(api, "pvc", "data") == "Bound" and _phase(api, "pv", "late") == "Bound",
                 what="claim and volume Bound")


@pytest.mark.parametrize("reclaim, phase, message", [
    ("Retain", "Released", None),
    ("Delete", "Failed", 'error getting deleter volume plugin for volume "pv1": no deletable volume plugin matched'),
    ("Recycle", "Failed", "No recycler plugin found for the volume!"),
], ids=["retain", "delete-static", "recycle"])
def test_a_volume_whose_claim_is_gone_follows_its_reclaim_policy(api, reclaim, phase, message):
    """Claim deleted: Released; Retain stays, Delete/Recycle of a static volume fail with Kubernetes' message."""
    _volume(api, "pv1", reclaim=reclaim)
    _claim(api, storageClassName="")
    with running(api, [PersistentVolumeBinder()]):
        wait_for(lambda: _phase(api, "pv", "pv1") == "Bound", what="volume Bound")
        _drop_finalizers(api, "pvc", "data")
        api.delete(api.resource("pvc"), "data", namespace="default")
        wait_for(lambda: _phase(api, "pv", "pv1") == phase, what=f"volume {phase}")
    pv = _get(api, "pv", "pv1", namespace=None)
    assert pv["status"].get("message") == message
    assert pv["status"].get("lastPhaseTransitionTime")


def test_a_released_local_volume_with_delete_is_left_to_its_node(api):
    """Delete on a kctl.io/local-volume volume: Released and kept for the node agent, not Failed."""
    _class(api)
    _claim(api)
    _annotate(api, "data", {"volume.kubernetes.io/selected-node": "h1"})
    with running(api, [PersistentVolumeBinder()]):
        wait_for(lambda: _phase(api, "pvc", "data") == "Bound", what="claim Bound")
        name = _get(api, "pvc", "data")["spec"]["volumeName"]
        _drop_finalizers(api, "pvc", "data")
        api.delete(api.resource("pvc"), "data", namespace="default")
        wait_for(lambda: _phase(api, "pv", name) == "Released", what="volume Released")
    assert "message" not in _get(api, "pv", name, namespace=None)["status"]


@pytest.mark.parametrize("klass, reason, message", [
    (None, "ProvisioningFailed", 'storageclass.storage.k8s.io "fast" not found'),
    (dict(name="fast", mode="Immediate", default=False), "ProvisioningFailed",
     "kctl.io/local-volume makes a volume on the node of the claim's first pod: its StorageClass needs "
     "volumeBindingMode: WaitForFirstConsumer"),
    (dict(name="fast", mode="Immediate", default=False, provisioner="example.com/nfs"), "ExternalProvisioning",
     "Waiting for a volume to be created either by the external provisioner 'example.com/nfs' or manually by the "
     "system administrator. If volume creation is delayed, please verify that the provisioner is running and "
     "correctly registered."),
], ids=["class-missing", "local-immediate", "external"])
def test_a_claim_that_cannot_be_provisioned_says_why(api, klass, reason, message):
    """The claim stays Pending with the Event Kubernetes records for its class."""
    if klass is not None:
        _class(api, **klass)
    _claim(api, storageClassName="fast")
    with running(api, [PersistentVolumeBinder()]):
        event = wait_for(lambda: _events(api, reason), what=f"{reason} event")[0]
    assert event["message"] == message
    assert _phase(api, "pvc", "data") == "Pending"


def test_a_prebound_claim_that_does_not_fit_its_volume_is_refused(api):
    """spec.volumeName naming a too-small volume: VolumeMismatch Warning, the claim stays Pending."""
    _volume(api, "small", size="1Gi")
    _claim(api, size="5Gi", storageClassName="", volumeName="small")
    with running(api, [PersistentVolumeBinder()]):
        event = wait_for(lambda: _events(api, "VolumeMismatch"), what="VolumeMismatch event")[0]
        # the volume's own sync (Pending -> Available) may come after the claim's: wait for it, then check both
        wait_for(lambda: _phase(api, "pv", "small") == "Available", what="volume Available")
    assert (event["type"], event["message"]) == \
        ("Warning", 'Cannot bind to requested volume "small": requested PV is too small')
    assert _phase(api, "pvc", "data") == "Pending" and _phase(api, "pv", "small") == "Available"


def test_a_bound_claim_whose_volume_is_gone_is_lost(api):
    """The volume removed under a Bound claim: the claim is Lost, with a ClaimLost Warning."""
    _volume(api, "pv1")
    _claim(api, storageClassName="")
    with running(api, [PersistentVolumeBinder()]):
        wait_for(lambda: _phase(api, "pvc", "data") == "Bound", what="claim Bound")
        _drop_finalizers(api, "pv", "pv1", namespace=None)
        api.delete(api.resource("pv"), "pv1")
        wait_for(lambda: _phase(api, "pvc", "data") == "Lost", what="claim Lost")
    assert _events(api, "ClaimLost")[0]["message"] == \
        "Bound claim has lost its PersistentVolume. Data on the volume is lost!"


def _pv(name: str, size: str, *, claim_ref: dict | None = None, labels: dict | None = None,
        modes: tuple = ("ReadWriteOnce",), cls: str = "", phase: str = "Available", deleting: bool = False) -> dict:
    meta: dict = {"name": name, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls}
    if claim_ref:
        spec["claimRef"] = claim_ref
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


_PVC = {"metadata": {"name": "data", "namespace": "default", "uid": "u1"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                 "storageClassName": ""}}
_REF = {"namespace": "default", "name": "data", "uid": "u1"}


@pytest.mark.parametrize("volumes, delay, expected", [
    ([_pv("a", "5Gi"), _pv("b", "2Gi")], False, "b"),
    ([_pv("a", "512Mi")], False, None),
    ([_pv("a", "5Gi", modes=("ReadOnlyMany",))], False, None),
    ([_pv("a", "5Gi", cls="fast")], False, None),
    ([_pv("a", "5Gi", claim_ref={"namespace": "default", "name": "other", "uid": "u2"})], False, None),
    ([_pv("a", "2Gi"), _pv("b", "5Gi", claim_ref=_REF)], False, "b"),
    ([_pv("a", "2Gi")], True, None),
    ([_pv("a", "2Gi", claim_ref={"namespace": "default", "name": "data"})], True, "a"),
    ([_pv("a", "2Gi", deleting=True)], False, None),
    ([_pv("a", "2Gi", phase="Released")], False, None),
], ids=["smallest", "too-small", "modes", "class", "other-claim", "prebound-wins", "delay-free", "delay-prebound",
        "deleting", "released"])
def test_best_match(volumes, delay, expected):
    """findBestMatchForClaim: class, modes, size, claimRef; pre-bound first, then smallest; WFFC only pre-bound."""
    found = best_match(volumes, _PVC, delay_binding=delay)
    assert (found or {}).get("metadata", {}).get("name") == expected


def test_best_match_honours_the_claim_selector():
    """A claim's label selector picks among otherwise fitting volumes."""
    pvc = {**_PVC, "spec": {**_PVC["spec"], "selector": {"matchLabels": {"tier": "fast"}}}}
    volumes = [_pv("a", "2Gi", labels={"tier": "slow"}), _pv("b", "5Gi", labels={"tier": "fast"})]
    assert best_match(volumes, pvc, delay_binding=False)["metadata"]["name"] == "b"
