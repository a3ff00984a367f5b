"""persistentVolumeClaim volumes on a node: wait for the claim to be Bound, then mount its PV (a Podman
named volume for kctl.io/local-volume, a bind mount for hostPath/local); the node-side deleter of
released local volumes."""

from __future__ import annotations

import threading
import time

import pytest
from podharness import NODE, Harness, container, make_pod

from kctl.agent.localvolumes import LocalVolumeDeleter, to_delete, volume_node
from kctl.agent.volumes import LABEL_PV
from kctl.runtime.interface import LABEL_POD_UID
from kctl.runtime.memory import MemoryRuntime

DRIVER = "kctl.io/local-volume"


def claim(name: str = "data", *, phase: str = "Bound", volume_name: str = "pvc-1", uid: str = "claim-uid",
          deleting: bool = False) -> dict:
    meta: dict = {"name": name, "namespace": "default", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    spec: dict = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if volume_name:
        spec["volumeName"] = volume_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": phase}}


def pv(name: str = "pvc-1", *, source: dict | None = None, node: str = NODE, claim_uid: str = "claim-uid",
       phase: str = "Bound", reclaim: str = "Delete", provisioned: bool = True) -> dict:
    spec: dict = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                  "persistentVolumeReclaimPolicy": reclaim, "storageClassName": "local",
                  "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "default",
                               "name": "data", "uid": claim_uid},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
                  **(source if source is not None else {"csi": {"driver": DRIVER, "volumeHandle": name}})}
    annotations = {"pv.kubernetes.io/provisioned-by": DRIVER} if provisioned else {}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "annotations": annotations},
            "spec": spec, "status": {"phase": phase}}


def claim_pod(*, read_only: bool = False, mount_read_only: bool = False) -> dict:
    app = container("app", volumeMounts=[{"name": "data", "mountPath": "/data", "readOnly": mount_read_only}])
    source: dict = {"claimName": "data"}
    if read_only:
        source["readOnly"] = True
    return make_pod(containers=[app], volumes=[{"name": "data", "persistentVolumeClaim": source}])


def put(node: Harness, *objects: dict) -> None:
    """Serve objects to the node's lookups (a PV is cluster-scoped: namespace "")."""
    for obj in objects:
        namespace = "" if obj["kind"] == "PersistentVolume" else obj["metadata"].get("namespace", "default")
        node.objects[(obj["kind"], namespace, obj["metadata"]["name"])] = obj


def _waiting(node: Harness) -> tuple[str, str]:
    waiting = node.status("app")["state"].get("waiting") or {}
    return waiting.get("reason", ""), waiting.get("message", "")


def _mount(node: Harness):
    app_id = node.running_id("app")
    (mount,) = node.runtime._containers[app_id].spec.mounts  # noqa: SLF001
    return mount


UNPROCESSED = ("Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data], "
               "failed to process volumes=[data]: error processing PVC default/data: ")

WAIT_CASES = [
    ("claim-missing", [], UNPROCESSED + 'failed to fetch PVC from API server: persistentvolumeclaims "data" not found'),
    ("claim-pending", [claim(phase="Pending", volume_name="")], UNPROCESSED + "PVC is not bound"),
    ("claim-being-deleted", [claim(deleting=True), pv()],
     UNPROCESSED + "can't start pod because PVC default/data is being deleted"),
    ("pv-missing", [claim()], UNPROCESSED + 'failed to fetch PV "pvc-1" from API server: '
                                            'persistentvolumes "pvc-1" not found'),
    ("pv-bound-to-another-claim", [claim(), pv(claim_uid="other")],
     UNPROCESSED + 'expected PV "pvc-1" to be bound to PVC default/data (UID "claim-uid") but its claimRef '
                   'names default/data (UID "other")'),
    ("pv-of-another-node", [claim(), pv(node="n9")],
     'MountVolume.NodeAffinity check failed for volume "pvc-1" : no matching NodeSelectorTerms'),
    ("csi-driver-unknown", [claim(), pv(source={"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "v"}})],
     'MountVolume.SetUp failed for volume "pvc-1" : kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: '
     'driver name ebs.csi.aws.com not found in the list of registered CSI drivers'),
    ("nfs-source", [claim(), pv(source={"nfs": {"server": "s", "path": "/x"}})],
     'MountVolume.SetUp failed for volume "pvc-1" : volume type "nfs" is not supported by kctl'),
]


@pytest.mark.parametrize("objects,message", [c[1:] for c in WAIT_CASES], ids=[c[0] for c in WAIT_CASES])
def test_containers_wait_with_the_kubelets_words(node: Harness, objects: list[dict], message: str) -> None:
    """Until the claim can be mounted, containers wait (ContainerCreating), one FailedMount, a retry soon."""
    put(node, *objects)
    result = node.sync(claim_pod())
    assert _waiting(node) == ("ContainerCreating", message)
    assert [(e.reason, e.message) for e in node.events if e.type == "Warning"] == [("FailedMount", message)]
    assert result.requeue_after is not None and result.requeue_after <= 5.0
    assert node.runtime.calls_to("create_container") == []  # no container is made before the mount
    node.sync()
    assert [e.reason for e in node.events if e.type == "Warning"] == ["FailedMount"]  # not repeated


def test_bound_claim_mounts_the_pvs_podman_volume(node: Harness) -> None:
    """A claim bound to a kctl.io/local-volume PV: its named volume is made (labelled) once and mounted."""
    put(node, claim())
    put(node, pv())
    node.sync(claim_pod())
    assert node.status("app")["state"].get("running") is not None
    assert node.runtime.list_volumes({LABEL_PV: "pvc-1"}) == ["pvc-1"]
    mount = _mount(node)
    assert (mount.target, mount.volume, mount.host_path, mount.read_only) == ("/data", "pvc-1", None, False)
    node.sync()
    assert len(node.runtime.calls_to("create_volume")) == 1


def test_claim_becoming_bound_lets_the_pod_start(node: Harness) -> None:
    """A pod that waited for its claim starts once the claim is Bound."""
    put(node, claim(phase="Pending", volume_name=""))
    node.sync(claim_pod())
    assert _waiting(node)[0] == "ContainerCreating"
    put(node, claim())
    put(node, pv())
    node.sync()
    assert node.status("app")["state"].get("running") is not None


def test_volume_outlives_the_pod(node: Harness) -> None:
    """Terminating the pod removes its own volumes, never the PV's Podman volume."""
    put(node, claim())
    put(node, pv())
    node.sync(claim_pod())
    node.terminate(grace_seconds=0)
    assert node.runtime.list_volumes({LABEL_PV: "pvc-1"}) == ["pvc-1"]
    assert node.runtime.list_volumes({LABEL_POD_UID: node.pod["metadata"]["uid"]}) == []


READ_ONLY_CASES = [
    ("read-write", {}, {}, False),
    ("pod-volume-read-only", {"read_only": True}, {}, True),
    ("mount-read-only", {"mount_read_only": True}, {}, True),
    ("pv-csi-read-only", {}, {"source": {"csi": {"driver": DRIVER, "volumeHandle": "pvc-1", "readOnly": True}}},
     True),
]


@pytest.mark.parametrize("pod_args,pv_args,expected", [c[1:] for c in READ_ONLY_CASES],
                         ids=[c[0] for c in READ_ONLY_CASES])
def test_read_only(node: Harness, pod_args: dict, pv_args: dict, expected: bool) -> None:
    """readOnly from the pod's volume, its volumeMount or the PV's csi source."""
    put(node, claim())
    put(node, pv(**pv_args))
    node.sync(claim_pod(**pod_args))
    assert _mount(node).read_only is expected


@pytest.mark.parametrize("source", [{"hostPath": {"path": "/srv/data"}}, {"local": {"path": "/srv/data"}}],
                         ids=["hostPath", "local"])
def test_host_path_and_local_pvs_are_bind_mounts(node: Harness, source: dict) -> None:
    """A static hostPath or local PV is a bind mount of its path; no Podman volume is made."""
    put(node, claim())
    put(node, pv(source=source, provisioned=False))
    node.sync(claim_pod())
    mount = _mount(node)
    assert (mount.volume, mount.host_path) == (None, "/srv/data")
    assert node.runtime.calls_to("create_volume") == []


# -- the node-side deleter -------------------------------------------------------------------------

DELETE_CASES = [
    ("released-delete-here", pv(phase="Released"), True),
    ("bound", pv(phase="Bound"), False),
    ("released-retain", pv(phase="Released", reclaim="Retain"), False),
    ("released-other-node", pv(phase="Released", node="n9"), False),
    ("released-not-provisioned-by-kctl", pv(phase="Released", provisioned=False), False),
    ("released-hostpath", pv(phase="Released", source={"hostPath": {"path": "/x"}}), False),
]


@pytest.mark.parametrize("obj,expected", [c[1:] for c in DELETE_CASES], ids=[c[0] for c in DELETE_CASES])
def test_to_delete(obj: dict, expected: bool) -> None:
    """Only this node's released kctl.io/local-volume PVs with reclaim policy Delete are the node's to delete."""
    assert to_delete(obj, NODE) is expected


def test_volume_node() -> None:
    """The node a PV is pinned to by kubernetes.io/hostname; None without one."""
    assert volume_node(pv(node="h2")) == "h2"
    assert volume_node({"spec": {}}) is None


def _create_pv(api, obj: dict) -> dict:
    stored = api.create({k: v for k, v in obj.items() if k != "status"})
    return api.update_status({**stored, "status": obj["status"]})


def _wait(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _gone_or_deleting(api, name: str) -> bool:
    from kctl.machinery.errors import NotFound

    try:
        return bool(api.get(api.resource("persistentvolumes"), name)["metadata"].get("deletionTimestamp"))
    except NotFound:
        return True


def test_deleter_removes_released_volume_then_pv(api) -> None:
    """A released Delete PV of this node: its Podman volume goes, then the PV; others are left alone."""
    runtime = MemoryRuntime()
    for name in ("pvc-1", "pvc-2", "pvc-3"):
        runtime.create_volume(name, {LABEL_PV: name})
    _create_pv(api, pv("pvc-1", phase="Released"))
    _create_pv(api, pv("pvc-2", phase="Released", reclaim="Retain"))
    _create_pv(api, pv("pvc-3", phase="Bound"))
    deleter = LocalVolumeDeleter(api, NODE, runtime)
    deleter.start()
    try:
        assert _wait(lambda: _gone_or_deleting(api, "pvc-1"))
        assert runtime.list_volumes({LABEL_PV: "pvc-1"}) == []
        assert sorted(runtime.list_volumes({})) == ["pvc-2", "pvc-3"]
        # a claim released later is picked up from the PV's update
        bound = api.get(api.resource("persistentvolumes"), "pvc-3")
        api.update_status({**bound, "status": {"phase": "Released"}})
        assert _wait(lambda: _gone_or_deleting(api, "pvc-3"))
        assert runtime.list_volumes({}) == ["pvc-2"]
        assert not _gone_or_deleting(api, "pvc-2")
    finally:
        deleter.stop()


def test_deleter_waits_while_the_host_is_unreachable(api) -> None:
    """paused (host cut): the PV stays Released and its volume stays; it is deleted once the host answers."""
    runtime = MemoryRuntime()
    runtime.create_volume("pvc-1", {LABEL_PV: "pvc-1"})
    _create_pv(api, pv("pvc-1", phase="Released"))
    cut = threading.Event()
    cut.set()
    deleter = LocalVolumeDeleter(api, NODE, runtime, paused=cut.is_set, resync=0.2)
    deleter.start()
    try:
        assert deleter.volumes.wait_for_sync(30)
        time.sleep(0.5)
        assert runtime.list_volumes({}) == ["pvc-1"] and not _gone_or_deleting(api, "pvc-1")
        cut.clear()
        assert _wait(lambda: _gone_or_deleting(api, "pvc-1"))
        assert runtime.list_volumes({}) == []
    finally:
        deleter.stop()
