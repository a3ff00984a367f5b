"""The StatefulSet controller over the real store, with the manager and a fake kubelet."""

from __future__ import annotations

import copy

import pytest

from lifecycle_harness import fake_kubelet, running, wait_for

from kctl.controllers.statefulset.controller import StatefulSetController
from kctl.controllers.statefulset.pods import POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL
from kctl.machinery.errors import Conflict, NotFound


def statefulset(*, replicas: int = 3, name: str = "web", policy: str | None = None, strategy: dict | None = None,
                claims: bool = False, retention: dict | None = None, labels: dict | None = None,
                history: int | None = None) -> dict:
    spec: dict = {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                  "template": {"metadata": {"labels": {"app": name, **(labels or {})}},
                               "spec": {"nodeName": "n1",
                                        "containers": [{"name": "app", "image": "busybox:1"}]}}}
    if policy:
        spec["podManagementPolicy"] = policy
    if strategy is not None:
        spec["updateStrategy"] = strategy
    if claims:
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "www"},
                                         "spec": {"accessModes": ["ReadWriteOnce"],
                                                  "resources": {"requests": {"storage": "1Gi"}}}}]
    if retention is not None:
        spec["persistentVolumeClaimRetentionPolicy"] = retention
    if history is not None:
        spec["revisionHistoryLimit"] = history
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def live_pods(api, app: str = "web") -> dict[str, dict]:
    pods, _ = api.list(api.resource("pods"), namespace="default")
    return {p["metadata"]["name"]: p for p in pods
            if (p["metadata"].get("labels") or {}).get("app") == app and not p["metadata"].get("deletionTimestamp")}


def sts_of(api, name: str = "web") -> dict:
    return api.get(api.resource("sts"), name, namespace="default")


def status(api, name: str = "web") -> dict:
    return sts_of(api, name).get("status") or {}


def edit(api, name: str, change) -> dict:
    """Apply `change` to the StatefulSet, retrying on Conflict (the controller writes status)."""
    for _ in range(20):
        obj = copy.deepcopy(sts_of(api, name))
        change(obj)
        try:
            return api.update(obj)
        except Conflict:
            continue
    raise AssertionError("20 conflicts editing the StatefulSet")


def set_image(image: str):
    def change(obj: dict) -> None:
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return change


def set_replicas(n: int):
    def change(obj: dict) -> None:
        obj["spec"]["replicas"] = n
    return change


def pod_events(api, since: int) -> list[tuple[str, str, dict]]:
    """(type, name, object) of every Pod change after `since`, in commit order."""
    return [(c.type, c.name, c.obj) for c in api.store.changes(since, limit=1_000_000) if c.kind == "Pod"]


def is_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def images(api) -> dict[str, str]:
    return {n: p["spec"]["containers"][0]["image"] for n, p in live_pods(api).items()}


def revisions(api) -> list[dict]:
    items, _ = api.list(api.resource("controllerrevisions"), namespace="default")
    return sorted(items, key=lambda r: r["revision"])


def test_ordered_creation_identity_and_status(api):
    """OrderedReady makes web-0..2 one at a time, each Ready before the next, with the set's identity."""
    since = api.store.revision()
    with fake_kubelet(api, ["n1"]), running(api, [StatefulSetController()]):
        api.create(statefulset())
        wait_for(lambda: status(api).get("readyReplicas") == 3, what="3 ready replicas")
        events = pod_events(api, since)
        created = [name for type_, name, _ in events if type_ == "ADDED"]
        assert created == ["web-0", "web-1", "web-2"]
        ready_at = {}
        for index, (type_, name, obj) in enumerate(events):
            if type_ == "ADDED" and name != "web-0":
                before = f"web-{int(name[-1]) - 1}"
                assert before in ready_at and ready_at[before] < index, f"{name} made before {before} was Ready"
            if obj is not None and is_ready(obj) and name not in ready_at:
                ready_at[name] = index
        pod = live_pods(api)["web-1"]
        labels = pod["metadata"]["labels"]
        assert labels[POD_NAME_LABEL] == "web-1" and labels[POD_INDEX_LABEL] == "1"
        assert pod["spec"]["hostname"] == "web-1" and pod["spec"]["subdomain"] == "web"
        ref = pod["metadata"]["ownerReferences"][0]
        assert ref["kind"] == "StatefulSet" and ref["controller"] is True
        revs = revisions(api)
        assert len(revs) == 1 and revs[0]["revision"] == 1 and revs[0]["metadata"]["name"].startswith("web-")
        assert labels[REVISION_LABEL] == revs[0]["metadata"]["name"]
        st = status(api)
        assert st["replicas"] == 3 and st["currentReplicas"] == 3 and st["updatedReplicas"] == 3
        assert st["availableReplicas"] == 3 and st["observedGeneration"] == 1
        assert st["currentRevision"] == st["updateRevision"] == revs[0]["metadata"]["name"]


@pytest.mark.parametrize("policy, expected", [(None, {"web-0"}), ("Parallel", {"web-0", "web-1", "web-2"})],
                         ids=["ordered-ready-waits", "parallel-does-not"])
def test_pod_management_with_pods_that_never_get_ready(api, policy, expected):
    """OrderedReady stops at the first pod that is not Ready; Parallel makes every pod at once."""
    sts = statefulset(policy=policy, labels={"fake.kctl.io/never-ready": "true"})
    with fake_kubelet(api, ["n1"]), running(api, [StatefulSetController()]):
        api.create(sts)
        wait_for(lambda: set(live_pods(api)) == expected and status(api).get("replicas") == len(expected),
                 what=f"pods {sorted(expected)}")
        if policy is None:
            assert set(live_pods(api)) == expected, "OrderedReady made a pod after one that is not Ready"


def test_scale_down_removes_from_the_highest_ordinal(api):
    """Scaling 3 -> 1 deletes web-2, then web-1; scaling back makes web-1 and web-2 anew."""
    with fake_kubelet(api, ["n1"]), running(api, [StatefulSetController()]):
        api.create(statefulset())
        wait_for(lambda: status(api).get("readyReplicas") == 3, what="3 ready")
        since = api.store.revision()
        edit(api, "web", set_replicas(1))
        wait_for(lambda: set(live_pods(api)) == {"web-0"} and status(api).get("replicas") == 1, what="scaled to 1")
        gone = [name for type_, name, _ in pod_events(api, since) if type_ == "DELETED"]
        assert gone == ["web-2", "web-1"]
        edit(api, "web", set_replicas(3))
        wait_for(lambda: status(api).get("readyReplicas") == 3 and set(live_pods(api)) == {"web-0", "web-1", "web-2"},
                 what="scaled back to 3")


def test_failed_pod_is_deleted_and_recreated_with_the_same_name(api):
    """A Failed pod is replaced by a new pod of the same name."""
    with fake_kubelet(api, ["n1"]), running(api, [StatefulSetController()]):
        api.create(statefulset(replicas=2))
        wait_for(lambda: status(api).get("readyReplicas") == 2, what="2 ready")
        old = live_pods(api)["web-1"]
        for _ in range(20):
            failed = copy.deepcopy(api.get(api.resource("pods"), "web-1", namespace="default"))
            failed["status"] = {"phase": "Failed"}
            try:
                api.update_status(failed)
                break
            except Conflict:
                continue
        def recreated() -> bool:
            new = live_pods(api).get("web-1")
            return new is not None and new["metadata"]["uid"] != old["metadata"]["uid"] and is_ready(new)
        wait_for(recreated, what="web-1 recreated")


def test_rolling_update_with_partition_then_all(api):
    """A partition updates only ordinals at or above it; lowering it to 0 finishes the rollout, highest first."""
    sts = statefulset(strategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2}})
    with fake_kubelet(api, ["n1"]), running(api, [StatefulSetController()]):
        api.create(sts)
        wait_for(lambda: status(api).get("readyReplicas") == 3, what="3 ready")
        first = status(api)["currentRevision"]
        edit(api, "web", set_image("busybox:2"))
        wait_for(lambda: images(api) == {"web-0": "busybox:1", "web-1": "busybox:1", "web-2": "busybox:2"}
                 and status(api).get("updatedReplicas") == 1 and status(api).get("readyReplicas") == 3,
                 what="web-2 updated only")
        st = status(api)
        assert st["currentRevision"] == first and st["updateRevision"] != first and st["currentReplicas"] == 2
        since = api.store.revision()

        def no_partition(obj: dict) -> None:
            obj["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = 0
        edit(api, "web", no_partition)
        wait_for(lambda: set(images(api).values()) == {"busybox:2"} and status(api).get("updatedReplicas") == 3
                 and status(api).get("currentRevision") == status(api).get("updateRevision"), what="all updated")
        gone = [name for type_, name, _ in pod_events(api, since) if type_ == "DELETED"]
        assert gone == ["web-1", "web-0"]
        assert len(revisions(api)) == 2


def test_on_delete_replaces_only_deleted_pods(api):
    """OnDelete leaves old pods alone; a deleted pod comes back at the new revision."""
    with fake_kubelet(api, ["n1"]), running(api, [StatefulSetController()]):
        api.create(statefulset(replicas=2, strategy={"type": "OnDelete"}))
        wait_for(lambda: status(api).get("readyReplicas") == 2, what="2 ready")
        edit(api, "web", set_image("busybox:2"))
        wait_for(lambda: status(api).get("updateRevision") != status(api).get("currentRevision"),
                 what="a new update revision")
        assert images(api) == {"web-0": "busybox:1", "web-1": "busybox:1"}
        api.delete(api.resource("pods"), "web-1", namespace="default")
        wait_for(lambda: images(api) == {"web-0": "busybox:1", "web-1": "busybox:2"}
                 and status(api).get("updatedReplicas") == 1, what="web-1 at the new revision")


def claim(api, name: str) -> dict | None:
    try:
        return api.get(api.resource("pvc"), name, namespace="default")
    except NotFound:
        return None


def test_claims_made_per_ordinal_and_mounted(api):
    """Each pod gets claim www-web-<n> (selector labels, template spec, no class), mounted as volume www."""
    with fake_kubelet(api, ["n1"]), running(api, [StatefulSetController()]):
        api.create(statefulset(replicas=2, claims=True))
        wait_for(lambda: status(api).get("readyReplicas") == 2, what="2 ready")
        for ordinal in (0, 1):
            made = claim(api, f"www-web-{ordinal}")
            assert made is not None
            assert made["metadata"]["labels"] == {"app": "web"}
            assert made["spec"]["resources"]["requests"]["storage"] == "1Gi"
            assert not made["metadata"].get("ownerReferences"), "Retain: no owners"
            volume = live_pods(api)[f"web-{ordinal}"]["spec"]["volumes"][0]
            assert volume == {"name": "www", "persistentVolumeClaim": {"claimName": f"www-web-{ordinal}"}}
        uid = claim(api, "www-web-1")["metadata"]["uid"]
        api.delete(api.resource("pods"), "web-1", namespace="default")
        wait_for(lambda: "web-1" in live_pods(api) and is_ready(live_pods(api)["web-1"]), what="web-1 back")
        assert claim(api, "www-web-1")["metadata"]["uid"] == uid, "the claim survives its pod"


def test_retention_policy_owners(api):
    """whenDeleted: Delete owns the claims by the set; whenScaled: Delete hands a scaled-away pod's claim to it."""
    retention = {"whenDeleted": "Delete", "whenScaled": "Delete"}
    with fake_kubelet(api, ["n1"]), running(api, [StatefulSetController()]):
        sts = api.create(statefulset(replicas=2, claims=True, retention=retention))
        wait_for(lambda: status(api).get("readyReplicas") == 2, what="2 ready")
        owners = [r["uid"] for r in claim(api, "www-web-1")["metadata"]["ownerReferences"]]
        assert owners == [sts["metadata"]["uid"]]
        pod_uid = live_pods(api)["web-1"]["metadata"]["uid"]
        since = api.store.revision()
        edit(api, "web", set_replicas(1))
        wait_for(lambda: set(live_pods(api)) == {"web-0"}, what="scaled to 1")
        # the claim went to the pod before the pod was deleted
        handed = [c for c in api.store.changes(since, limit=100000)
                  if c.kind == "PersistentVolumeClaim" and c.name == "www-web-1" and c.obj is not None
                  and [r["uid"] for r in c.obj["metadata"].get("ownerReferences") or ()] == [pod_uid]]
        assert handed, "the scaled-down pod's claim was not handed to the pod"
        assert [r["uid"] for r in claim(api, "www-web-0")["metadata"]["ownerReferences"]] == [sts["metadata"]["uid"]]


def test_history_limit_keeps_live_and_recent_revisions(api):
    """revisionHistoryLimit 1: after three templates, only the live revision and one older one remain."""
    with fake_kubelet(api, ["n1"]), running(api, [StatefulSetController()]):
        api.create(statefulset(replicas=1, history=1))
        wait_for(lambda: status(api).get("readyReplicas") == 1, what="ready")
        for image in ("busybox:2", "busybox:3"):
            edit(api, "web", set_image(image))
            wait_for(lambda: images(api) == {"web-0": image} and status(api).get("readyReplicas") == 1
                     and status(api).get("currentRevision") == status(api).get("updateRevision"),
                     what=f"rolled to {image}")
        wait_for(lambda: [r["revision"] for r in revisions(api)] == [2, 3], what="revision 1 deleted")


def test_rollback_renumbers_the_equal_revision(api):
    """Going back to an earlier template reuses its revision, renumbered as the newest."""
    with fake_kubelet(api, ["n1"]), running(api, [StatefulSetController()]):
        api.create(statefulset(replicas=1))
        wait_for(lambda: status(api).get("readyReplicas") == 1, what="ready")
        first = status(api)["currentRevision"]
        edit(api, "web", set_image("busybox:2"))
        wait_for(lambda: images(api) == {"web-0": "busybox:2"}, what="updated")
        edit(api, "web", set_image("busybox:1"))
        wait_for(lambda: images(api) == {"web-0": "busybox:1"} and status(api).get("currentRevision") == first,
                 what="rolled back to the first revision's name")
        by_name = {r["metadata"]["name"]: r["revision"] for r in revisions(api)}
        assert by_name[first] == 3 and len(by_name) == 2
