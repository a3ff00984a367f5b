"""The StatefulSet controller's pure parts: identity, claims, revisions and the per-sync plan."""

from __future__ import annotations

import datetime as dt

import pytest

from kctl.controllers.statefulset import claims as claimutil
from kctl.controllers.statefulset import pods as podutil
from kctl.controllers.statefulset import revisions as revutil
from kctl.controllers.statefulset.update import max_unavailable, plan

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def sts(**spec) -> dict:
    body = {"replicas": 3, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "app", "image": "busybox:1"}]}}}
    body.update(spec)
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "set-uid", "generation": 1}, "spec": body}


def pod(ordinal: int, *, revision: str = "web-a", ready: bool = True, phase: str = "Running",
        ready_for: float = 3600, terminating: bool = False) -> dict:
    meta = {"name": f"web-{ordinal}", "namespace": "default", "uid": f"pod-{ordinal}",
            "labels": {"app": "web", podutil.REVISION_LABEL: revision, podutil.POD_NAME_LABEL: f"web-{ordinal}",
                       podutil.POD_INDEX_LABEL: str(ordinal)}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T11:00:00Z"
    since = (NOW - dt.timedelta(seconds=ready_for)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": meta, "spec": {"hostname": f"web-{ordinal}"},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                                       "lastTransitionTime": since}]}}


def run(set_: dict, pods: list[dict], *, current: str = "web-a", update: str = "web-a", claims=None):
    return plan(set_, pods, current_set=set_, update_set=set_, current=current, update=update,
                claims=claims or {}, now=NOW)


def acts(result) -> list[tuple[str, str]]:
    return [(a.verb, a.pod["metadata"]["name"]) for a in result.actions]


@pytest.mark.parametrize("spec, pods, expected", [
    ({}, [], [("create", "web-0")]),
    ({}, [pod(0)], [("create", "web-1")]),
    ({}, [pod(0, ready=False)], []),
    ({"podManagementPolicy": "Parallel"}, [], [("create", "web-0"), ("create", "web-1"), ("create", "web-2")]),
    ({"podManagementPolicy": "Parallel"}, [pod(0, ready=False)], [("create", "web-1"), ("create", "web-2")]),
    ({"minReadySeconds": 30}, [pod(0, ready_for=5)], []),
    ({"minReadySeconds": 30}, [pod(0, ready_for=60)], [("create", "web-1")]),
    ({}, [pod(0), pod(1, phase="Failed")], [("delete", "web-1")]),
    ({"replicas": 1}, [pod(0), pod(1), pod(2)], [("delete", "web-2")]),
    ({"replicas": 1}, [pod(0), pod(1), pod(2, terminating=True)], []),
    ({"replicas": 1, "podManagementPolicy": "Parallel"}, [pod(0), pod(1), pod(2)],
     [("delete", "web-2"), ("delete", "web-1")]),
    ({"replicas": 1}, [pod(0), pod(1), pod(2, ready=False)], [("delete", "web-2")]),
    ({"replicas": 1}, [pod(0), pod(1, ready=False), pod(2)], [("delete", "web-2")]),
], ids=["first-pod", "next-after-ready", "wait-for-ready", "parallel-all", "parallel-no-wait",
        "min-ready-not-yet", "min-ready-passed", "failed-recreated", "scale-down-highest",
        "scale-down-waits-terminating", "parallel-scale-down", "unhealthy-highest-first",
        "healthy-highest-before-unhealthy"])
def test_plan_creation_and_scale_down(spec, pods, expected):
    """Ordered and parallel creation, minReadySeconds, failed pods and scale-down order."""
    assert acts(run(sts(**spec), pods)) == expected


@pytest.mark.parametrize("strategy, expected", [
    ({"type": "RollingUpdate"}, [("delete", "web-2")]),
    ({"type": "RollingUpdate", "rollingUpdate": {"partition": 3}}, []),
    ({"type": "RollingUpdate", "rollingUpdate": {"partition": 1, "maxUnavailable": 5}},
     [("delete", "web-2"), ("delete", "web-1")]),
    ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}, [("delete", "web-2"), ("delete", "web-1")]),
    ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%"}},
     [("delete", "web-2"), ("delete", "web-1")]),
    ({"type": "OnDelete"}, []),
], ids=["one-at-a-time", "partition-above-all", "partition-1", "max-unavailable-2", "max-unavailable-percent",
        "on-delete"])
def test_plan_rolling_update(strategy, expected):
    """Old pods are replaced from the highest ordinal down to the partition, within maxUnavailable."""
    result = run(sts(updateStrategy=strategy), [pod(0), pod(1), pod(2)], current="web-a", update="web-b")
    assert acts(result) == expected


def test_plan_rolling_update_waits_for_unhealthy_replacement():
    """An updated pod that is not healthy stops the update (no further deletion)."""
    pods = [pod(0), pod(1), pod(2, revision="web-b", ready=False)]
    result = run(sts(podManagementPolicy="Parallel"), pods, current="web-a", update="web-b")
    assert acts(result) == [] and "web-2" in result.waiting


def test_plan_creates_below_partition_from_the_current_revision():
    """A missing pod below the partition is made from the current template, above it from the update one."""
    set_ = sts(podManagementPolicy="Parallel", updateStrategy={"type": "RollingUpdate",
                                                               "rollingUpdate": {"partition": 2}})
    new = revutil.applied(set_, {"data": {"spec": {"template": {"metadata": {"labels": {"app": "web"}},
                                                                "spec": {"containers": [{"name": "app",
                                                                                         "image": "busybox:2"}]}}}}})
    result = plan(set_, [], current_set=set_, update_set=new, current="web-a", update="web-b", claims={}, now=NOW)
    made = {a.pod["metadata"]["name"]: (a.pod["metadata"]["labels"][podutil.REVISION_LABEL],
                                        a.pod["spec"]["containers"][0]["image"]) for a in result.actions}
    assert made == {"web-0": ("web-a", "busybox:1"), "web-1": ("web-a", "busybox:1"),
                    "web-2": ("web-b", "busybox:2")}


def test_status_counts_and_completes_rollout():
    """Status counts pods by readiness and revision; all updated and ready makes the update revision current."""
    result = run(sts(), [pod(0, revision="web-b"), pod(1, revision="web-b"), pod(2, revision="web-b")],
                 current="web-a", update="web-b")
    st = result.status
    assert (st["replicas"], st["readyReplicas"], st["updatedReplicas"]) == (3, 3, 3)
    assert st["currentRevision"] == "web-b" and st["currentReplicas"] == 3


def test_plan_waits_for_stale_claim():
    """A claim still owned by an earlier pod of the ordinal holds the pod's creation back."""
    set_ = sts(volumeClaimTemplates=[{"metadata": {"name": "www"}, "spec": {}}])
    stale = {"metadata": {"name": "www-web-0", "ownerReferences": [{"kind": "Pod", "uid": "old", "name": "web-0"}]}}
    result = run(set_, [], claims={"www-web-0": stale})
    assert acts(result) == [] and "www-web-0" in result.waiting


def test_new_pod_identity_and_storage():
    """A new pod has the ordinal's name, labels, hostname/subdomain and its claim volume replacing the template's."""
    set_ = sts(volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {}}])
    set_["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]
    made = podutil.new_pod(set_, 4, "web-abc")
    assert made["metadata"]["name"] == "web-4"
    assert made["metadata"]["labels"] == {"app": "web", podutil.POD_NAME_LABEL: "web-4",
                                          podutil.POD_INDEX_LABEL: "4", podutil.REVISION_LABEL: "web-abc"}
    assert made["spec"]["hostname"] == "web-4" and made["spec"]["subdomain"] == "web"
    assert made["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-4"}},
                                       {"name": "tmp", "emptyDir": {}}]
    assert podutil.identity_matches(set_, made) and podutil.storage_matches(set_, made)


def test_claims_for_ordinal():
    """Claim names, namespace, selector labels over template labels, and the template's spec untouched."""
    set_ = sts(volumeClaimTemplates=[{"metadata": {"name": "www", "labels": {"tier": "db", "app": "x"}},
                                      "spec": {"accessModes": ["ReadWriteOnce"]}}])
    [made] = claimutil.claims_for(set_, 1)
    assert made["metadata"] == {"name": "www-web-1", "namespace": "default", "labels": {"tier": "db", "app": "web"}}
    assert made["spec"] == {"accessModes": ["ReadWriteOnce"]} and "storageClassName" not in made["spec"]


@pytest.mark.parametrize("policy, ordinal, owners", [
    ({}, 1, []),
    ({"whenDeleted": "Delete"}, 1, ["set-uid"]),
    ({"whenDeleted": "Delete"}, 5, ["set-uid"]),
    ({"whenScaled": "Delete"}, 1, []),
    ({"whenScaled": "Delete"}, 5, ["pod-5"]),
    ({"whenDeleted": "Delete", "whenScaled": "Delete"}, 1, ["set-uid"]),
    ({"whenDeleted": "Delete", "whenScaled": "Delete"}, 5, ["pod-5"]),
], ids=["retain", "deleted-in-range", "deleted-scaled", "scaled-in-range", "scaled-away", "both-in-range",
        "both-scaled-away"])
def test_claim_owners_by_retention_policy(policy, ordinal, owners):
    """The claim's ownerReferences follow persistentVolumeClaimRetentionPolicy and the pod's ordinal."""
    set_ = sts(persistentVolumeClaimRetentionPolicy=policy)
    claim = {"metadata": {"name": f"www-web-{ordinal}",
                          "ownerReferences": [{"kind": "Pod", "uid": f"pod-{ordinal}", "name": "x"}]}}
    refs = claimutil.desired_owner_refs(claim, set_, pod(ordinal))
    assert [r["uid"] for r in refs] == owners


def test_revision_name_hash_and_data():
    """A revision is `<set>-<fnv1 hash of the patch>`, its data a "$patch: replace" of the template."""
    assert revutil.fnv1_32(b"") == 0x811C9DC5 and revutil.fnv1_32(b"a") == 0x050C5D7E  # FNV-1 test vectors
    set_ = sts()
    rev = revutil.new_revision(set_, 1, 0)
    assert rev["data"]["spec"]["template"]["$patch"] == "replace"
    hash_ = rev["metadata"]["labels"][revutil.HASH_LABEL]
    assert rev["metadata"]["name"] == f"web-{hash_}" and rev["revision"] == 1
    assert set(hash_) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert revutil.hash_revision(rev["data"], 1) != revutil.hash_revision(rev["data"], 0)
    assert revutil.template_of_revision(rev) == set_["spec"]["template"]


def test_history_to_delete_spares_live_revisions():
    """The oldest non-live revisions beyond the limit are deleted; live ones never."""
    revs = [{"metadata": {"name": f"r{i}"}, "revision": i} for i in range(1, 6)]
    assert [r["metadata"]["name"] for r in revutil.history_to_delete(revs, {"r1", "r5"}, 1)] == ["r2", "r3"]
    assert revutil.history_to_delete(revs, set(), None) == []


@pytest.mark.parametrize("value, replicas, expected", [(None, 3, None), (2, 3, 2), ("50%", 3, 2), ("10%", 3, 1),
                                                        (0, 3, 1)])
def test_max_unavailable(value, replicas, expected):
    """maxUnavailable scales percentages up and is at least 1."""
    rolling = {} if value is None else {"maxUnavailable": value}
    assert max_unavailable(sts(replicas=replicas, updateStrategy={"type": "RollingUpdate",
                                                                  "rollingUpdate": rolling})) == expected


def test_plan_remakes_a_pending_pods_missing_claim():
    """A Pending pod whose claim was deleted gets it made again (the lost-host recovery), even while waiting."""
    set_ = sts(volumeClaimTemplates=[{"metadata": {"name": "www"}, "spec": {}}])
    pending = pod(0, phase="Pending", ready=False)
    assert acts(run(set_, [pending], claims={})) == [("fix", "web-0")]
    assert acts(run(set_, [pending], claims={"www-web-0": {"metadata": {"name": "www-web-0"}}})) == []
