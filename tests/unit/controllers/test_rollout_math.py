"""Table-driven tests of the Deployment rollout arithmetic (kctl/controllers/rollout.py)."""

from __future__ import annotations

import pytest

from kctl.controllers import rollout as ro


def deployment(replicas: int = 10, *, surge: int | str | None = "25%", unavailable: int | str | None = "25%",
               strategy: str = "RollingUpdate", generation: int = 1, status: dict | None = None,
               history: int | None = 10) -> dict:
    rolling = {}
    if surge is not None:
        rolling["maxSurge"] = surge
    if unavailable is not None:
        rolling["maxUnavailable"] = unavailable
    spec: dict = {"replicas": replicas, "strategy": {"type": strategy},
                  "selector": {"matchLabels": {"app": "web"}},
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"containers": [{"name": "c", "image": "img:1"}]}}}
    if strategy == "RollingUpdate":
        spec["strategy"]["rollingUpdate"] = rolling
    if history is not None:
        spec["revisionHistoryLimit"] = history
    return {"metadata": {"name": "web", "namespace": "default", "uid": "d-uid", "generation": generation},
            "spec": spec, "status": status or {}}


def rs(name: str, replicas: int, *, available: int | None = None, actual: int | None = None, created: str = "",
       annotations: dict | None = None, generation: int = 1, observed: int = 1) -> dict:
    return {"metadata": {"name": name, "creationTimestamp": created or f"2024-01-01T00:00:{name[-1]}0Z",
                         "annotations": annotations or {}, "generation": generation, "uid": name},
            "spec": {"replicas": replicas},
            "status": {"replicas": replicas if actual is None else actual,
                       "availableReplicas": replicas if available is None else available,
                       "observedGeneration": observed}}


@pytest.mark.parametrize("surge,unavailable,desired,expected", [
    ("25%", "25%", 10, (3, 2)),
    ("25%", "25%", 100, (25, 25)),
    ("25%", "25%", 1, (1, 0)),
    ("10%", "10%", 4, (1, 0)),
    (0, "10%", 4, (0, 1)),
    (2, 1, 10, (2, 1)),
    ("0%", "0%", 10, (0, 1)),
    (None, None, 5, (0, 1)),
    ("50%", 0, 3, (2, 0)),
], ids=["quarter-of-10", "quarter-of-100", "one-replica", "rounding-4", "both-zero-after-rounding",
        "absolute", "both-zero-percent", "unset", "surge-only"])
def test_resolve_fenceposts(surge, unavailable, desired, expected):
    """Surge rounds up, unavailable rounds down, and both zero becomes unavailable 1."""
    assert ro.resolve_fenceposts(surge, unavailable, desired) == expected


@pytest.mark.parametrize("value", ["abc%", "x", True], ids=["bad-percent", "not-a-number", "bool"])
def test_scaled_value_rejects(value):
    """A malformed maxSurge/maxUnavailable is an error, not a silent zero."""
    with pytest.raises(ro.RolloutError):
        ro.scaled_value(value, 10, round_up=True)


@pytest.mark.parametrize("d,surge,unavailable", [
    (deployment(10), 3, 2),
    (deployment(10, strategy="Recreate"), 0, 0),
    (deployment(0), 0, 0),
    (deployment(3, surge=0, unavailable=5), 0, 3),
], ids=["rolling", "recreate", "zero-replicas", "unavailable-capped"])
def test_max_surge_and_unavailable(d, surge, unavailable):
    """MaxSurge/MaxUnavailable follow the strategy and are capped by spec.replicas."""
    assert (ro.max_surge(d), ro.max_unavailable(d)) == (surge, unavailable)


@pytest.mark.parametrize("d,old,new,expected", [
    (deployment(10), [rs("a1", 10)], rs("b2", 0), 3),
    (deployment(10), [rs("a1", 8)], rs("b2", 3), 5),
    (deployment(10), [rs("a1", 10)], rs("b2", 3), 3),
    (deployment(10), [rs("a1", 8, actual=10)], rs("b2", 3), 5),
    (deployment(10), [rs("a1", 0)], rs("b2", 7), 10),
    (deployment(10, strategy="Recreate"), [rs("a1", 0)], rs("b2", 0), 10),
], ids=["first-wave", "after-old-shrank", "at-surge-limit", "old-status-lags", "capped-at-replicas", "recreate"])
def test_new_rs_new_replicas(d, old, new, expected):
    """The new ReplicaSet grows while the ReplicaSets' spec.replicas sum to at most replicas+maxSurge (Kubernetes)."""
    assert ro.new_rs_new_replicas(d, [*old, new], new) == expected


@pytest.mark.parametrize("d,old,new,expected", [
    (deployment(10), [rs("a1", 10)], rs("b2", 3, available=0), {"a1": 8}),
    (deployment(10), [rs("a1", 8)], rs("b2", 5, available=3), {"a1": 5}),
    (deployment(10), [rs("a1", 8)], rs("b2", 5, available=0), {}),
    (deployment(10), [rs("a1", 10, available=6)], rs("b2", 3, available=0), {"a1": 8}),
    (deployment(10), [rs("a1", 4, created="2024-01-01T00:00:01Z"), rs("a3", 6, created="2024-01-01T00:00:02Z")],
     rs("b2", 3, available=3), {"a1": 0, "a3": 5}),
    (deployment(10), [rs("a1", 8, available=10)], rs("b2", 5, available=2), {"a1": 6}),
    (deployment(10), [rs("a1", 0)], rs("b2", 10), {}),
], ids=["first-scale-down", "new-pods-ready", "new-pods-not-ready", "unhealthy-first", "oldest-first",
        "stale-available-capped", "nothing-old"])
def test_plan_old_scale_down(d, old, new, expected):
    """Old ReplicaSets shrink only while replicas - maxUnavailable pods stay available."""
    plan = {r["metadata"]["name"]: size for r, size in ro.plan_old_scale_down(d, old, new)}
    assert plan == expected
    remaining = sum(min(ro.status_count(r, "availableReplicas"), plan.get(r["metadata"]["name"], ro.spec_replicas(r)))
                    for r in old) + ro.status_count(new, "availableReplicas")
    before = sum(ro.status_count(r, "availableReplicas") for r in [*old, new])
    assert remaining >= min(before, ro.min_available(d))


@pytest.mark.parametrize("d,old,new,expected", [
    # mid-rollout 10 -> 20 (max-replicas 13 -> 25): 8 * 25/13 = 15.4 -> 15, 5 * 25/13 = 9.6 -> 10
    (deployment(20), [rs("a1", 8, annotations={ro.MAX_REPLICAS_ANNOTATION: "13"})],
     rs("b2", 5, annotations={ro.MAX_REPLICAS_ANNOTATION: "13"}), {"a1": 15, "b2": 10}),
    # 10 -> 5 (13 -> 7): 8 * 7/13 = 4.3 -> 4, 5 * 7/13 = 2.7 -> 3
    (deployment(5), [rs("a1", 8, annotations={ro.MAX_REPLICAS_ANNOTATION: "13"})],
     rs("b2", 5, annotations={ro.MAX_REPLICAS_ANNOTATION: "13"}), {"a1": 4, "b2": 3}),
    # 10 -> 11 (13 -> 14): 8 * 14/13 = 8.6 -> 9 takes the one replica, 5 gets nothing left
    (deployment(11), [rs("a1", 8, annotations={ro.MAX_REPLICAS_ANNOTATION: "13"})],
     rs("b2", 5, annotations={ro.MAX_REPLICAS_ANNOTATION: "13"}), {"a1": 9, "b2": 5}),
    # to zero: everything to zero
    (deployment(0), [rs("a1", 8, annotations={ro.MAX_REPLICAS_ANNOTATION: "13"})],
     rs("b2", 5, annotations={ro.MAX_REPLICAS_ANNOTATION: "13"}), {"a1": 0, "b2": 0}),
], ids=["scale-up", "scale-down", "scale-up-by-one", "scale-to-zero"])
def test_plan_proportional_scale(d, old, new, expected):
    """A resize mid-rollout is spread over the ReplicaSets in proportion to their size."""
    plan = {r["metadata"]["name"]: size for r, size in ro.plan_proportional_scale(d, new, old)}
    assert plan == expected
    if ro.spec_replicas(d):
        assert sum(plan.values()) == ro.spec_replicas(d) + ro.max_surge(d)


def test_pod_template_hash_is_stable_and_ignores_hash_label():
    """The hash depends only on the template (not key order or its own label) and on collisionCount."""
    t1 = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "a"}]}}
    t2 = {"spec": {"containers": [{"image": "a", "name": "c"}]},
          "metadata": {"labels": {"app": "web", ro.HASH_LABEL: "xyz"}}}
    t3 = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "b"}]}}
    assert ro.pod_template_hash(t1) == ro.pod_template_hash(t2)
    assert ro.pod_template_hash(t1) != ro.pod_template_hash(t3)
    assert ro.pod_template_hash(t1, 1) != ro.pod_template_hash(t1)
    assert set(ro.pod_template_hash(t1)) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert ro.equal_ignore_hash(t1, t2) and not ro.equal_ignore_hash(t1, t3)


@pytest.mark.parametrize("rs_annotations,new_revision,exists,expected", [
    ({}, 1, False, {ro.REVISION_ANNOTATION: "1", ro.DESIRED_REPLICAS_ANNOTATION: "10",
                    ro.MAX_REPLICAS_ANNOTATION: "13", "team": "a"}),
    ({ro.REVISION_ANNOTATION: "1"}, 3, True, {ro.REVISION_ANNOTATION: "3", ro.REVISION_HISTORY_ANNOTATION: "1",
                                             "team": "a"}),
    ({ro.REVISION_ANNOTATION: "2", ro.REVISION_HISTORY_ANNOTATION: "1"}, 5, True,
     {ro.REVISION_ANNOTATION: "5", ro.REVISION_HISTORY_ANNOTATION: "1,2", "team": "a"}),
    ({ro.REVISION_ANNOTATION: "4", "team": "a"}, 3, True, {ro.REVISION_ANNOTATION: "4", "team": "a"}),
], ids=["created", "rolled-back-to", "rolled-back-twice", "already-newest"])
def test_set_new_replica_set_annotations(rs_annotations, new_revision, exists, expected):
    """The new ReplicaSet gets the next revision, keeps its old ones, and the Deployment's annotations."""
    d = deployment(10)
    d["metadata"]["annotations"] = {"team": "a", ro.LAST_APPLIED_ANNOTATION: "{}", ro.REVISION_ANNOTATION: "9"}
    target = {"metadata": {"annotations": dict(rs_annotations)}, "spec": {}}
    ro.set_new_replica_set_annotations(d, target, new_revision, exists=exists)
    assert target["metadata"]["annotations"] == expected


@pytest.mark.parametrize("old,expected", [
    ([rs("a1", 0, annotations={ro.REVISION_ANNOTATION: "1"}), rs("a2", 0, annotations={ro.REVISION_ANNOTATION: "2"}),
      rs("a3", 0, annotations={ro.REVISION_ANNOTATION: "3"})], ["a1"]),
    ([rs("a1", 1, annotations={ro.REVISION_ANNOTATION: "1"}), rs("a2", 0, annotations={ro.REVISION_ANNOTATION: "2"}),
      rs("a3", 0, annotations={ro.REVISION_ANNOTATION: "3"})], []),
    ([rs("a1", 0, generation=2, observed=1, annotations={ro.REVISION_ANNOTATION: "1"}),
      rs("a2", 0, annotations={ro.REVISION_ANNOTATION: "2"}), rs("a3", 0, annotations={ro.REVISION_ANNOTATION: "3"})],
     []),
    ([rs("a1", 0, annotations={ro.REVISION_ANNOTATION: "1"})], []),
], ids=["oldest-goes", "non-empty-kept", "unsettled-kept", "within-limit"])
def test_rs_to_clean_up(old, expected):
    """revisionHistoryLimit (2 here) deletes only the oldest empty, settled ReplicaSets."""
    d = deployment(10, history=2)
    assert [r["metadata"]["name"] for r in ro.rs_to_clean_up(d, old)] == expected


@pytest.mark.parametrize("old_status,new_status,progressing", [
    ({"replicas": 10, "updatedReplicas": 3}, {"replicas": 10, "updatedReplicas": 5}, True),
    ({"replicas": 13, "updatedReplicas": 3}, {"replicas": 11, "updatedReplicas": 3}, True),
    ({"readyReplicas": 3}, {"readyReplicas": 4}, True),
    ({"availableReplicas": 8}, {"availableReplicas": 9}, True),
    ({"replicas": 10, "updatedReplicas": 3, "availableReplicas": 8}, {"replicas": 10, "updatedReplicas": 3,
                                                                      "availableReplicas": 8}, False),
], ids=["more-updated", "fewer-old", "more-ready", "more-available", "no-change"])
def test_deployment_progressing(old_status, new_status, progressing):
    """Progress is more updated/ready/available pods or fewer old ones."""
    assert ro.deployment_progressing(deployment(10, status=old_status), new_status) is progressing


@pytest.mark.parametrize("reason,updated,now,timed_out", [
    (ro.RS_UPDATED_REASON, "2024-01-01T00:00:00Z", 1704067200 + 601, True),
    (ro.RS_UPDATED_REASON, "2024-01-01T00:00:00Z", 1704067200 + 599, False),
    (ro.NEW_RS_AVAILABLE_REASON, "2024-01-01T00:00:00Z", 1704067200 + 9999, False),
    (ro.TIMED_OUT_REASON, "2024-01-01T00:00:00Z", 1704067200, True),
], ids=["past-deadline", "before-deadline", "complete-never-times-out", "already-timed-out"])
def test_deployment_timed_out(reason, updated, now, timed_out):
    """The deadline runs from the Progressing condition's lastUpdateTime."""
    d = deployment(10)
    d["spec"]["progressDeadlineSeconds"] = 600
    status = {"conditions": [ro.new_condition(ro.PROGRESSING, "True", reason, "", updated)]}
    assert ro.deployment_timed_out(d, status, now) is timed_out


def test_set_condition_keeps_transition_time():
    """Same status and reason: unchanged; same status, new reason: lastTransitionTime kept."""
    status: dict = {}
    ro.set_condition(status, ro.new_condition(ro.PROGRESSING, "True", ro.NEW_RS_REASON, "a", "T1"))
    ro.set_condition(status, ro.new_condition(ro.PROGRESSING, "True", ro.NEW_RS_REASON, "b", "T2"))
    assert status["conditions"][0]["message"] == "a"
    ro.set_condition(status, ro.new_condition(ro.PROGRESSING, "True", ro.RS_UPDATED_REASON, "c", "T3"))
    assert status["conditions"][0]["lastTransitionTime"] == "T1"
    assert status["conditions"][0]["lastUpdateTime"] == "T3"
    ro.set_condition(status, ro.new_condition(ro.PROGRESSING, "False", ro.TIMED_OUT_REASON, "d", "T4"))
    assert status["conditions"][0]["lastTransitionTime"] == "T4"


@pytest.mark.parametrize("available,reason", [(8, ro.MIN_AVAILABLE_REASON), (7, ro.MIN_UNAVAILABLE_REASON)],
                         ids=["at-floor", "below-floor"])
def test_calculate_status_available_condition(available, reason):
    """Available is True exactly when replicas - maxUnavailable pods are available."""
    d = deployment(10)
    old = rs("a1", 7, available=available - 1)
    new = rs("b2", 3, available=1)
    status = ro.calculate_status(d, [old, new], new, "T")
    assert status["availableReplicas"] == available
    assert status["updatedReplicas"] == 3 and status["replicas"] == 10
    assert status["unavailableReplicas"] == 10 - available
    assert ro.get_condition(status, ro.AVAILABLE)["reason"] == reason


@pytest.mark.parametrize("new,old,expected", [
    (rs("b2", 0), [rs("a1", 5)], "a1"),
    (rs("b2", 3), [rs("a1", 5)], None),
    (rs("b2", 0), [rs("a1", 0)], "b2"),
    (None, [rs("a1", 0), rs("a3", 0)], "a3"),
], ids=["only-old-active", "two-active", "none-active-new", "none-active-newest-old"])
def test_find_active_or_latest(new, old, expected):
    """The single active ReplicaSet, else the newest, else none when several are active."""
    found = ro.find_active_or_latest(new, old)
    assert (found["metadata"]["name"] if found else None) == expected
