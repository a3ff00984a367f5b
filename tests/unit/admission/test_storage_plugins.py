"""The storage admission plugins through the real API layer: DefaultStorageClass, StorageObjectInUseProtection and
the claim/volume/class checks Kubernetes makes beyond the schema (kctl.admission.plugins.storagevalidation)."""

from __future__ import annotations

import pytest

from kctl.machinery.errors import Forbidden, Invalid
from kctl.machinery.persistentvolumes import default_class


def _class(api, name: str, *, default: bool = False, created: str | None = None, **fields) -> dict:
    meta: dict = {"name": name}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    obj = api.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
                      "provisioner": "kctl.io/local-volume", **fields})
    return obj


def _claim(name: str = "data", **spec) -> dict:
    base = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": base}


def _volume(name: str = "pv1", **spec) -> dict:
    base = {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/srv/pv1"}}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": base}


# -- DefaultStorageClass --------------------------------------------------------------------


@pytest.mark.parametrize("classes, spec, expected", [
    ([("local", True)], {}, "local"),
    ([("local", True)], {"storageClassName": ""}, ""),
    ([("local", True), ("fast", False)], {"storageClassName": "fast"}, "fast"),
    ([("slow", False)], {}, None),
    ([], {}, None),
], ids=["default-named", "empty-stays-empty", "explicit-kept", "no-default", "no-classes"])
def test_default_class_is_named_on_a_new_claim(api, classes, spec, expected):
    """A claim without storageClassName gets the default class; "" and an explicit class stay as they are."""
    for name, default in classes:
        _class(api, name, default=default)
    pvc = api.create(_claim(**spec))
    assert pvc["spec"].get("storageClassName") == expected


def test_of_several_defaults_the_newest_wins():
    """Two default classes: the newer creationTimestamp wins; equal times: the first by name (Kubernetes 1.28+)."""
    ann = {"storageclass.kubernetes.io/is-default-class": "true"}
    old = {"metadata": {"name": "a-old", "annotations": ann, "creationTimestamp": "2026-01-01T00:00:00Z"}}
    new = {"metadata": {"name": "z-new", "annotations": ann, "creationTimestamp": "2026-02-01T00:00:00Z"}}
    tie = {"metadata": {"name": "b-tie", "annotations": ann, "creationTimestamp": "2026-02-01T00:00:00Z"}}
    beta = {"metadata": {"name": "beta", "annotations": {"storageclass.beta.kubernetes.io/is-default-class": "true"},
                         "creationTimestamp": "2025-01-01T00:00:00Z"}}
    assert default_class([old, new])["metadata"]["name"] == "z-new"
    assert default_class([old, new, tie])["metadata"]["name"] == "b-tie"
    assert default_class([beta])["metadata"]["name"] == "beta"
    assert default_class([{"metadata": {"name": "x"}}]) is None


def test_default_class_is_not_set_on_update(api):
    """Only a new claim gets the default: an existing claim that has none keeps none."""
    api.create(_claim())
    _class(api, "local", default=True)
    pvc = api.get(api.resource("pvc"), "data", namespace="default")
    pvc["metadata"]["labels"] = {"a": "b"}
    assert api.update(pvc)["spec"].get("storageClassName") is None


# -- StorageObjectInUseProtection -------------------------------------------------------------


@pytest.mark.parametrize("obj, finalizer", [
    (_claim(), "kubernetes.io/pvc-protection"),
    (_volume(), "kubernetes.io/pv-protection"),
], ids=["pvc", "pv"])
def test_protection_finalizer_is_added_once_on_create(api, obj, finalizer):
    """A new claim or volume carries its protection finalizer, once, beside the user's own."""
    obj["metadata"]["finalizers"] = ["example.com/keep", finalizer]
    made = api.create(obj)
    assert made["metadata"]["finalizers"] == ["example.com/keep", finalizer]
    other = dict(obj, metadata={"name": "second"})
    assert api.create(other)["metadata"]["finalizers"] == [finalizer]


def test_defaults_of_claims_volumes_and_classes(api):
    """Kubernetes' defaults: volumeMode Filesystem, phase Pending, PV reclaim Retain, class Delete/Immediate."""
    pvc = api.create(_claim())
    pv = api.create(_volume())
    sc = api.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"},
                     "provisioner": "example.com/x"})
    assert (pvc["spec"]["volumeMode"], pvc["status"]["phase"]) == ("Filesystem", "Pending")
    assert (pv["spec"]["volumeMode"], pv["spec"]["persistentVolumeReclaimPolicy"], pv["status"]["phase"]) == \
        ("Filesystem", "Retain", "Pending")
    assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")


# -- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize("obj, message", [
    (_claim(accessModes=[]), "spec.accessModes: Required value: at least 1 access mode is required"),
    (_claim(accessModes=["ReadWriteOncePod", "ReadWriteOnce"]),
     "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"),
    (_claim(resources={}), "spec.resources[storage]: Required value"),
    (_claim(resources={"requests": {"storage": "0"}}),
     'spec.resources[storage]: Invalid value: "0": must be greater than zero'),
    (_volume(accessModes=None), "spec.accessModes: Required value"),
    (_volume(capacity=None), "spec.capacity: Required value"),
    (_volume(capacity={"storage": "1Gi", "cpu": "1"}),
     'spec.capacity: Unsupported value: "map[cpu:1 storage:1Gi]": supported values: "storage"'),
    (_volume(hostPath=None), "spec: Required value: must specify a volume type"),
    (_volume(nfs={"server": "x", "path": "/"}), "spec.nfs: Forbidden: may not specify more than 1 volume type"),
    (_volume(hostPath=None, local={"path": "/mnt/disk"}),
     "spec.nodeAffinity: Required value: Local volume requires node affinity"),
], ids=["pvc-modes", "pvc-rwop-mixed", "pvc-no-storage", "pvc-zero", "pv-modes", "pv-capacity", "pv-capacity-cpu",
        "pv-no-source", "pv-two-sources", "pv-local-no-affinity"])
def test_bad_claims_and_volumes_are_refused_with_kubernetes_message(api, obj, message):
    """Each check is one Invalid naming the kind, the object and the field path, as kube-apiserver words it."""
    with pytest.raises(Invalid) as caught:
        api.create(obj)
    text = str(caught.value)
    assert text.startswith(f'{obj["kind"]} "{obj["metadata"]["name"]}" is invalid: ')
    assert message in text and "\n" not in text


def test_a_local_volume_with_node_affinity_is_accepted(api):
    """A `local` source with required node affinity passes."""
    affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["h1"]}]}]}}
    pv = api.create(_volume(hostPath=None, local={"path": "/mnt/disk"}, nodeAffinity=affinity))
    assert pv["spec"]["local"] == {"path": "/mnt/disk"}


def _bind(api, pvc: dict, volume: str = "pv1") -> dict:
    """Bind a claim by hand as the binder does (volumeName, then status Bound)."""
    pvc["spec"]["volumeName"] = volume
    pvc = api.update(pvc)
    pvc["status"] = {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    return api.update_status(pvc)


@pytest.mark.parametrize("change, refused", [
    (lambda s: s.update(accessModes=["ReadWriteMany"]), "spec: Forbidden: spec is immutable after creation"),
    (lambda s: s.update(volumeName="other"), "spec: Forbidden: spec is immutable after creation"),
    (lambda s: s.update(storageClassName="fast"), "spec: Forbidden: spec is immutable after creation"),
    (lambda s: s["resources"]["requests"].update(storage="512Mi"),
     "spec.resources.requests.storage: Forbidden: field can not be less than previous value"),
    (lambda s: s["resources"]["requests"].update(storage="2Gi"),
     "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support "
     "resize"),
], ids=["access-modes", "volume-name", "class", "shrink", "grow-without-expansion"])
def test_a_bound_claims_spec_is_immutable(api, change, refused):
    """After binding only resources.requests may change (grow, when the class allows expansion), as Kubernetes."""
    _class(api, "local")
    pvc = _bind(api, api.create(_claim(storageClassName="local")))
    change(pvc["spec"])
    with pytest.raises((Invalid, Forbidden)) as caught:
        api.update(pvc)
    assert refused in str(caught.value) and "\n" not in str(caught.value)


def test_a_bound_claim_grows_when_its_class_allows_expansion(api):
    """allowVolumeExpansion: true lets a Bound claim's storage request grow."""
    _class(api, "grow", allowVolumeExpansion=True)
    pvc = _bind(api, api.create(_claim(storageClassName="grow")))
    pvc["spec"]["resources"]["requests"]["storage"] = "2Gi"
    assert api.update(pvc)["spec"]["resources"]["requests"]["storage"] == "2Gi"


def test_the_binder_may_set_volume_name_once_and_a_class_where_none_was(api):
    """An unbound claim's volumeName may be set once, and a claim without a class may be given one."""
    pvc = api.create(_claim())
    pvc["spec"]["storageClassName"] = "late"
    pvc = api.update(pvc)
    pvc["spec"]["volumeName"] = "pv1"
    pvc = api.update(pvc)
    assert (pvc["spec"]["storageClassName"], pvc["spec"]["volumeName"]) == ("late", "pv1")
    pvc["spec"]["volumeName"] = "pv2"
    with pytest.raises(Invalid):
        api.update(pvc)


@pytest.mark.parametrize("obj, change, refused", [
    (_volume(), lambda o: o["spec"].update(hostPath={"path": "/elsewhere"}),
     "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"),
    (_volume(), lambda o: o["spec"].update(volumeMode="Block"), "spec.volumeMode"),
    ({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"},
      "provisioner": "kctl.io/local-volume"}, lambda o: o.update(reclaimPolicy="Retain"),
     "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."),
    ({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"},
      "provisioner": "kctl.io/local-volume"}, lambda o: o.update(provisioner="other"),
     "provisioner: Forbidden: updates to provisioner are forbidden."),
], ids=["pv-source", "pv-volume-mode", "sc-reclaim", "sc-provisioner"])
def test_fixed_fields_of_volumes_and_classes(api, obj, change, refused):
    """A volume's source and volumeMode and a class's provisioner and policies do not change after creation."""
    made = api.create(obj)
    change(made)
    with pytest.raises(Invalid) as caught:
        api.update(made)
    assert refused in str(caught.value)


def test_a_class_may_be_edited_where_kubernetes_allows(api):
    """Annotations (the default mark) and allowVolumeExpansion of a class may change."""
    sc = _class(api, "local", default=True)
    sc["metadata"]["annotations"] = {}
    sc["allowVolumeExpansion"] = True
    assert api.update(sc)["allowVolumeExpansion"] is True
