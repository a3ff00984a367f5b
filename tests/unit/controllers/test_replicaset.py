"""Tests of the ReplicaSet controller: its pure decisions, then simulations on a real store."""

from __future__ import annotations

import datetime as dt

import pytest

from kctl.controllers import replicaset as rsc

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def ago(seconds: float) -> str:
    return rsc.format_time(NOW - dt.timedelta(seconds=seconds))


def pod(name: str, *, node: str = "n1", phase: str = "Running", ready: bool = True, ready_for: float = 3600,
        created_ago: float = 7200, restarts: int = 0, cost: int | None = None, uid: str | None = None) -> dict:
    meta: dict = {"name": name, "uid": uid or name, "creationTimestamp": ago(created_ago),
                  "labels": {"app": "web"}}
    if cost is not None:
        meta["annotations"] = {rsc.DELETION_COST_ANNOTATION: str(cost)}
    status: dict = {"phase": phase,
                    "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                    "lastTransitionTime": ago(ready_for)}],
                    "containerStatuses": [{"name": "c", "restartCount": restarts}]}
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


@pytest.mark.parametrize("pods,expected_first", [
    ([pod("scheduled"), pod("unscheduled", node="")], "unscheduled"),
    ([pod("running"), pod("pending", phase="Pending", ready=False)], "pending"),
    ([pod("running"), pod("unknown", phase="Unknown")], "unknown"),
    ([pod("unknown", phase="Unknown", ready=False), pod("pending", phase="Pending", ready=False)], "pending"),
    ([pod("ready"), pod("not-ready", ready=False)], "not-ready"),
    ([pod("costly", cost=10), pod("cheap", cost=-5)], "cheap"),
    ([pod("alone", node="n2"), pod("doubled-a", node="n1"), pod("doubled-b", node="n1")], "doubled-"),
    ([pod("long-ready", ready_for=10000), pod("short-ready", ready_for=5)], "short-ready"),
    ([pod("calm", restarts=0), pod("crashy", restarts=7)], "crashy"),
    ([pod("old", created_ago=100000), pod("new", created_ago=10)], "new"),
    ([pod("ready-unscheduled", node=""), pod("not-ready-scheduled", ready=False)], "ready-unscheduled"),
    ([pod("pending-ready-long", phase="Pending", ready_for=9999), pod("running-not-ready", ready=False)],
     "pending-ready-long"),
], ids=["unscheduled-first", "pending-before-running", "unknown-before-running", "pending-before-unknown",
        "not-ready-first", "lower-deletion-cost-first", "doubled-up-first", "ready-for-less-time-first",
        "more-restarts-first", "newer-first", "scheduling-outranks-readiness", "phase-outranks-readiness"])
def test_pods_to_delete_order(pods, expected_first):
    """Scale-down picks pods in Kubernetes' order (ActivePodsWithRanks)."""
    assert rsc.pods_to_delete(pods, 1, now=NOW)[0]["metadata"]["name"].startswith(expected_first)
    assert rsc.pods_to_delete(list(reversed(pods)), 1, now=NOW)[0]["metadata"]["name"].startswith(expected_first)


def test_pods_to_delete_ties_on_log_scale_break_by_uid():
    """Ages in the same power-of-two bucket tie, and the tie is broken by uid (LogarithmicScaleDown)."""
    a = pod("a", created_ago=1000, ready_for=600, uid="uid-b")
    b = pod("b", created_ago=1010, ready_for=601, uid="uid-a")
    assert rsc.pods_to_delete([a, b], 1, now=NOW)[0]["metadata"]["name"] == "b"


@pytest.mark.parametrize("count,expected", [(0, []), (2, ["p-nr", "p-new"]), (5, ["p-old", "p-new", "p-nr"])],
                         ids=["none", "some", "more-than-there-are"])
def test_pods_to_delete_count(count, expected):
    """Exactly `count` pods are chosen, all of them when count covers every pod."""
    pods = [pod("p-old", created_ago=100000), pod("p-new", created_ago=10), pod("p-nr", ready=False)]
    assert [p["metadata"]["name"] for p in rsc.pods_to_delete(pods, count, now=NOW)] == expected


@pytest.mark.parametrize("count,initial,expected", [
    (0, 1, []), (1, 1, [1]), (10, 1, [1, 2, 4, 3]), (100, 1, [1, 2, 4, 8, 16, 32, 37]), (5, 2, [2, 3]),
], ids=["none", "one", "ten", "hundred", "initial-two"])
def test_slow_start_batches(count, initial, expected):
    """Creations go in batches doubling from the initial size, the last one cut."""
    assert rsc.slow_start_batches(count, initial=initial) == expected


@pytest.mark.parametrize("ready,ready_for,min_ready,available", [
    (True, 100, 0, True), (False, 100, 0, False), (True, 5, 10, False), (True, 11, 10, True),
], ids=["ready", "not-ready", "ready-too-briefly", "ready-long-enough"])
def test_pod_available(ready, ready_for, min_ready, available):
    """Available means Ready for at least minReadySeconds."""
    assert rsc.pod_available(pod("p", ready=ready, ready_for=ready_for), min_ready, NOW) is available


def test_replica_set_status_counts():
    """Status counts pods, fully labeled ones, ready ones and available ones, and the generation."""
    rs = {"metadata": {"name": "rs", "generation": 4},
          "spec": {"replicas": 3, "minReadySeconds": 30,
                   "template": {"metadata": {"labels": {"app": "web", "tier": "fe"}}}}}
    pods = [pod("a", ready_for=100), pod("b", ready_for=5), pod("c", ready=False)]
    pods[0]["metadata"]["labels"]["tier"] = "fe"
    status = rsc.replica_set_status(rs, pods, NOW)
    assert status == {"replicas": 3, "fullyLabeledReplicas": 1, "readyReplicas": 2, "availableReplicas": 1,
                      "observedGeneration": 4}
    failed = rsc.replica_set_status(rs, pods, NOW, failure=("FailedCreate", "quota"))
    assert failed["conditions"][0]["type"] == "ReplicaFailure" and failed["conditions"][0]["reason"] == "FailedCreate"
    rs["status"] = failed
    assert "conditions" not in rsc.replica_set_status(rs, pods, NOW)
    assert rsc.requeue_for_availability(pods, 30, NOW) == pytest.approx(25.05)


def test_pod_from_template_is_owned_and_generated():
    """A new pod has the template's labels and spec, generateName <rs>-, and a controller reference."""
    rs = {"apiVersion": "apps/v1", "metadata": {"name": "web-abc", "namespace": "ns", "uid": "u1"},
          "spec": {"template": {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
                                "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    new = rsc.pod_from_template(rs, "ReplicaSet")
    assert new["metadata"]["generateName"] == "web-abc-"
    assert new["metadata"]["namespace"] == "ns"
    assert new["metadata"]["labels"] == {"app": "web"} and new["metadata"]["annotations"] == {"a": "b"}
    assert new["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc",
                                                   "uid": "u1", "controller": True, "blockOwnerDeletion": True}]
    assert new["spec"] == {"containers": [{"name": "c", "image": "i"}]}
    new["spec"]["containers"][0]["image"] = "changed"
    assert rs["spec"]["template"]["spec"]["containers"][0]["image"] == "i"


# -- simulations: the manager, a real store, fake nodes --------------------------------------

def replica_set(*, replicas: int = 3, name: str = "web", min_ready: int = 0, labels: dict | None = None) -> dict:
    template_labels = {"app": "web", **(labels or {})}
    spec: dict = {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": template_labels},
                               "spec": {"containers": [{"name": "web", "image": "img:1"}]}}}
    if min_ready:
        spec["minReadySeconds"] = min_ready
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def rs_cluster(api, **kwargs):
    from rollout_harness import Cluster

    return Cluster(api, [rsc.ReplicaSetController()], watch_app="web", **kwargs)


def get_rs(api, name: str = "web") -> dict:
    return api.get(api.resource("replicasets"), name, namespace="default")


def scale(api, replicas: int, name: str = "web") -> None:
    rs = get_rs(api, name)
    rs["spec"]["replicas"] = replicas
    api.update(rs)


def owned_pods(api, rs: dict) -> list[dict]:
    pods, _ = api.list(api.resource("pods"), namespace="default")
    return [p for p in pods if (rsc.controller_ref(p) or {}).get("uid") == rs["metadata"]["uid"]
            and not p["metadata"].get("deletionTimestamp")]


def test_scale_up_then_down_with_exact_creations(api):
    """Scaling creates exactly the missing pods (no double create), named <rs>-xxxxx, and status follows."""
    from rollout_harness import wait_for

    with rs_cluster(api) as c:
        created = api.create(replica_set(replicas=20))
        c.watch.arm()
        wait_for(lambda: get_rs(api).get("status", {}).get("availableReplicas") == 20, what="20 pods available")
        c.watch.caught_up()
        assert c.watch.max_live == 20  # never a 21st pod, whatever the cache lag
        status = get_rs(api)["status"]
        assert status == {"replicas": 20, "fullyLabeledReplicas": 20, "readyReplicas": 20,
                          "availableReplicas": 20, "observedGeneration": 1}
        for pod in owned_pods(api, created):
            name = pod["metadata"]["name"]
            assert name.startswith("web-") and len(name) == len("web-") + 5
            ref = pod["metadata"]["ownerReferences"][0]
            assert ref["kind"] == "ReplicaSet" and ref["controller"] and ref["blockOwnerDeletion"]
        scale(api, 7)
        wait_for(lambda: get_rs(api)["status"].get("replicas") == 7 and len(owned_pods(api, created)) == 7,
                 what="scaled down to 7")
        assert get_rs(api)["status"]["observedGeneration"] == 2
        # the controller records its Events after the status write: wait for them too
        wait_for(lambda: {"SuccessfulCreate", "SuccessfulDelete"}
                 <= {e.get("reason") for e in api.list(api.resource("events"), namespace="default")[0]},
                 what="SuccessfulCreate and SuccessfulDelete events")


def test_scale_down_deletes_unscheduled_pods_first(api):
    """With no binder, the pods a test bound by hand survive a scale-down; the unbound ones go."""
    from rollout_harness import wait_for

    with rs_cluster(api, bind=False) as c:
        created = api.create(replica_set(replicas=4))
        wait_for(lambda: len(owned_pods(api, created)) == 4, what="4 pending pods")
        keep = sorted(p["metadata"]["name"] for p in owned_pods(api, created))[:2]
        for name in keep:
            api.bind("default", name, c.nodes[0])
        wait_for(lambda: get_rs(api).get("status", {}).get("readyReplicas") == 2, what="2 bound pods ready")
        scale(api, 2)
        wait_for(lambda: len(owned_pods(api, created)) == 2, what="scaled down to 2")
        assert sorted(p["metadata"]["name"] for p in owned_pods(api, created)) == keep


def test_adopts_orphans_and_releases_relabelled_pods(api):
    """An orphan pod matching the selector is adopted (one fewer created); a relabelled pod is released."""
    from rollout_harness import wait_for

    orphan = api.create({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "orphan", "namespace": "default", "labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "img:1"}]}})
    with rs_cluster(api) as c:
        c.watch.arm()
        created = api.create(replica_set(replicas=3))
        wait_for(lambda: get_rs(api).get("status", {}).get("readyReplicas") == 3, what="3 ready pods")
        c.watch.caught_up()
        adopted = api.get(api.resource("pods"), "orphan", namespace="default")
        ref = adopted["metadata"]["ownerReferences"][0]
        assert ref["uid"] == created["metadata"]["uid"] and ref["controller"] and ref["blockOwnerDeletion"]
        assert orphan["metadata"]["uid"] == adopted["metadata"]["uid"]
        assert c.watch.max_live == 3  # two created, not three
        adopted["metadata"]["labels"] = {"app": "web-debug"}
        api.update(adopted)
        wait_for(lambda: not api.get(api.resource("pods"), "orphan", namespace="default")["metadata"]
                 .get("ownerReferences"), what="the relabelled pod is released")
        wait_for(lambda: len(owned_pods(api, created)) == 3, what="a replacement is created")


def test_min_ready_seconds_counts_available_later(api):
    """Ready pods become available only after minReadySeconds, noticed by a requeue."""
    from rollout_harness import wait_for

    seen: list[tuple[int, int]] = []
    with rs_cluster(api):
        api.create(replica_set(replicas=2, min_ready=1))

        def status_pair() -> bool:
            status = get_rs(api).get("status") or {}
            pair = (status.get("readyReplicas", 0), status.get("availableReplicas", 0))
            if not seen or seen[-1] != pair:
                seen.append(pair)
            return pair == (2, 2)

        wait_for(status_pair, what="2 pods available")
    assert any(ready > available for ready, available in seen)  # ready before available


def test_deleted_replica_set_reconciles_to_nothing(api):
    """A key whose ReplicaSet is gone is success: its orphaned pods stay, nothing more is created."""
    from rollout_harness import wait_for

    with rs_cluster(api) as c:
        api.create(replica_set(replicas=2))
        wait_for(lambda: get_rs(api).get("status", {}).get("readyReplicas") == 2, what="2 ready pods")
        controller = next((ctl for ctl in getattr(c.manager, "controllers", []) if getattr(ctl, "name", "") ==
                           "replicaset"), None)
        api.delete(api.resource("replicasets"), "web", namespace="default", propagation="Orphan")
        if controller is not None:
            wait_for(lambda: controller.replicasets.get("default", "web") is None, what="the cache drops it")
            assert controller.reconcile("default/web") is None
        c.watch.caught_up()
        assert len(c.watch.live()) == 2
