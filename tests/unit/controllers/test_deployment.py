"""The Deployment controller simulated with the ReplicaSet controller, the manager and fake nodes.

Each test runs the real manager over a real store (rollout_harness.Cluster). The
rolling-update bounds are checked on every change the store commits (PodWatch), not at
sampled moments: surge as Kubernetes bounds it (the ReplicaSets' spec.replicas sum to at
most replicas + maxSurge; pods an old ReplicaSet is still deleting are not counted, so
live pods may briefly exceed it, as in Kubernetes) and availability on the pods
themselves. The rollout arithmetic itself is tested table-driven in test_rollout_math.py.
"""

from __future__ import annotations

import copy

import pytest

from rollout_harness import Cluster, wait_for

from kctl.machinery.errors import NotFound
from kctl.controllers import rollout as ro
from kctl.controllers.deployment import DeploymentController
from kctl.controllers.replicaset import ReplicaSetController

NEVER_READY = "fake.kctl.io/never-ready"


def deployment(*, replicas: int = 4, image: str = "img:1", surge: int | str = "25%",
               unavailable: int | str = "25%", strategy: str = "RollingUpdate", **spec) -> dict:
    strategy_spec: dict = {"type": strategy}
    if strategy == "RollingUpdate":
        strategy_spec["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": unavailable}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "strategy": strategy_spec, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": image}]}},
                     **spec}}


def cluster(api, **kwargs) -> Cluster:
    return Cluster(api, [ReplicaSetController(), DeploymentController()], watch_app="web", **kwargs)


def get_d(api) -> dict:
    return api.get(api.resource("deployments"), "web", namespace="default")


def replica_sets(api) -> list[dict]:
    items, _ = api.list(api.resource("replicasets"), namespace="default")
    return sorted(items, key=ro.revision_of)


def condition(d: dict, type_: str) -> dict:
    return ro.get_condition(d.get("status"), type_) or {}


def rolled_out(api) -> bool:
    """DeploymentComplete, and no old ReplicaSet keeps a pod."""
    d = get_d(api)
    return ro.deployment_complete(d, d.get("status") or {}) and \
        condition(d, ro.PROGRESSING).get("reason") in (ro.NEW_RS_AVAILABLE_REASON, None)


def edit(api, change) -> dict:
    """Apply `change` to the live Deployment and update it (retrying a Conflict)."""
    from kctl.machinery.errors import Conflict

    for _ in range(20):
        d = get_d(api)
        change(d)
        try:
            return api.update(d)
        except Conflict:
            continue
    raise AssertionError("the deployment kept conflicting")


def set_image(image: str):
    def change(d: dict) -> None:
        d["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return change


@pytest.mark.parametrize("replicas,surge,unavailable", [
    (8, "25%", "25%"),
    (5, 1, 0),
    (5, 0, 1),
    (6, "50%", "50%"),
], ids=["quarter-quarter", "surge-only", "unavailable-only", "half-half"])
def test_rolling_update_stays_within_surge_and_floor(api, replicas, surge, unavailable):
    """At every change: ReplicaSets' spec.replicas sum <= replicas + maxSurge (Kubernetes' surge bound),
    available pods >= replicas - maxUnavailable."""
    d = deployment(replicas=replicas, surge=surge, unavailable=unavailable)
    max_surge, max_unavailable = ro.resolve_fenceposts(surge, unavailable, replicas)
    with cluster(api) as c:
        api.create(d)
        wait_for(lambda: rolled_out(api), what="the first rollout completes")
        c.watch.caught_up()
        c.watch.arm()
        edit(api, set_image("img:2"))
        wait_for(lambda: rolled_out(api) and get_d(api)["status"]["observedGeneration"] == 2,
                 what="the rolling update completes")
        c.watch.caught_up()
        assert c.watch.changes > 0
        assert c.watch.max_spec_total == replicas + max_surge or max_surge == 0
        assert c.watch.max_spec_total <= replicas + max_surge
        assert c.watch.min_available is not None and c.watch.min_available >= replicas - max_unavailable
        images = {p["spec"]["containers"][0]["image"] for p in c.watch.live()}
        assert images == {"img:2"}
    rss = replica_sets(api)
    assert [ro.revision_of(rs) for rs in rss] == [1, 2]
    assert [ro.spec_replicas(rs) for rs in rss] == [0, replicas]
    final = get_d(api)
    assert ro.annotations(final)[ro.REVISION_ANNOTATION] == "2"
    assert condition(final, ro.AVAILABLE)["reason"] == ro.MIN_AVAILABLE_REASON
    assert condition(final, ro.PROGRESSING)["reason"] == ro.NEW_RS_AVAILABLE_REASON


def test_pod_template_hash_labels_and_status(api):
    """The new ReplicaSet is <name>-<hash>; the hash labels its selector, template and pods; status counts."""
    with cluster(api) as c:
        api.create(deployment(replicas=3))
        wait_for(lambda: rolled_out(api), what="the rollout completes")
        c.watch.caught_up()
        (rs,) = replica_sets(api)
        hash_ = ro.pod_template_hash(get_d(api)["spec"]["template"])
        assert rs["metadata"]["name"] == f"web-{hash_}"
        assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", ro.HASH_LABEL: hash_}
        assert rs["spec"]["template"]["metadata"]["labels"][ro.HASH_LABEL] == hash_
        ref = rs["metadata"]["ownerReferences"][0]
        assert ref["kind"] == "Deployment" and ref["controller"] is True and ref["blockOwnerDeletion"] is True
        assert all(p["metadata"]["labels"][ro.HASH_LABEL] == hash_ for p in c.watch.live())
        assert len(c.watch.live()) == 3
        status = get_d(api)["status"]
        assert {k: status[k] for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                                       "unavailableReplicas", "observedGeneration")} == \
            {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
             "unavailableReplicas": 0, "observedGeneration": 1}
        events, _ = api.list(api.resource("events"), namespace="default")
        reasons = {e.get("reason") for e in events}
        assert {"ScalingReplicaSet", "SuccessfulCreate"} <= reasons


def test_recreate_never_overlaps_old_and_new_pods(api):
    """Recreate: no new pod exists while any old pod (even a terminating one) does."""
    with cluster(api) as c:
        api.create(deployment(replicas=4, strategy="Recreate"))
        wait_for(lambda: rolled_out(api), what="the first rollout completes")
        old_hash = replica_sets(api)[0]["metadata"]["name"].rsplit("-", 1)[1]

        def no_overlap(pods: dict, changed: dict) -> None:
            hashes = {p["metadata"]["labels"].get(ro.HASH_LABEL) for p in pods.values()}
            assert not (old_hash in hashes and len(hashes) > 1), f"old and new pods together: {hashes}"

        c.watch.checks.append(no_overlap)
        c.watch.caught_up()
        c.watch.arm()
        edit(api, set_image("img:2"))
        wait_for(lambda: rolled_out(api) and get_d(api)["status"]["observedGeneration"] == 2,
                 what="the recreate rollout completes")
        c.watch.caught_up()
        assert c.watch.failures == []
        assert c.watch.min_available == 0  # Recreate does take every pod down first
        assert {p["spec"]["containers"][0]["image"] for p in c.watch.live()} == {"img:2"}


def test_pause_stops_rollout_but_not_scaling(api):
    """Paused: a template change makes no new ReplicaSet, a replicas change still scales; resume rolls."""
    with cluster(api):
        api.create(deployment(replicas=2, progressDeadlineSeconds=600))
        wait_for(lambda: rolled_out(api), what="the first rollout completes")
        edit(api, lambda d: d["spec"].update(paused=True))
        edit(api, set_image("img:2"))
        edit(api, lambda d: d["spec"].update(replicas=3))
        wait_for(lambda: get_d(api)["status"].get("observedGeneration") == get_d(api)["metadata"]["generation"],
                 what="the paused deployment is observed")
        wait_for(lambda: [ro.spec_replicas(rs) for rs in replica_sets(api)] == [3], what="scaled while paused")
        d = get_d(api)
        assert len(replica_sets(api)) == 1
        assert condition(d, ro.PROGRESSING)["reason"] == ro.PAUSED_REASON
        assert condition(d, ro.PROGRESSING)["status"] == "Unknown"
        edit(api, lambda d: d["spec"].update(paused=False))
        wait_for(lambda: rolled_out(api) and len(replica_sets(api)) == 2 and
                 [ro.spec_replicas(rs) for rs in replica_sets(api)] == [0, 3], what="the resumed rollout completes")
        assert ro.annotations(get_d(api))[ro.REVISION_ANNOTATION] == "2"


def test_undo_by_template_copy_reuses_old_replica_set(api):
    """Copying revision 1's template back reuses its ReplicaSet and gives it revision 3 (history 1)."""
    with cluster(api):
        api.create(deployment(replicas=2))
        wait_for(lambda: rolled_out(api), what="revision 1 rolls out")
        first = replica_sets(api)[0]
        edit(api, set_image("img:2"))
        wait_for(lambda: rolled_out(api) and len(replica_sets(api)) == 2, what="revision 2 rolls out")

        def undo(d: dict) -> None:  # what `kctl rollout undo` does client-side
            template = copy.deepcopy(first["spec"]["template"])
            template["metadata"]["labels"].pop(ro.HASH_LABEL)
            d["spec"]["template"] = template

        edit(api, undo)
        wait_for(lambda: rolled_out(api) and get_d(api)["status"]["observedGeneration"] == 3,
                 what="the undo rolls out")
        rss = replica_sets(api)
        assert len(rss) == 2
        current = rss[-1]
        assert current["metadata"]["uid"] == first["metadata"]["uid"]
        assert ro.annotations(current)[ro.REVISION_ANNOTATION] == "3"
        assert ro.annotations(current)[ro.REVISION_HISTORY_ANNOTATION] == "1"
        assert ro.spec_replicas(current) == 2 and ro.spec_replicas(rss[0]) == 0
        assert ro.annotations(get_d(api))[ro.REVISION_ANNOTATION] == "3"


def test_deadline_exceeded_halts_rollout_above_floor(api):
    """New pods that never get Ready: the rollout stops, availability stays >= the floor, deadline reported."""
    with cluster(api) as c:
        api.create(deployment(replicas=4, surge=1, unavailable=1, progressDeadlineSeconds=2))
        wait_for(lambda: rolled_out(api), what="the first rollout completes")
        c.watch.caught_up()
        c.watch.arm()

        def broken(d: dict) -> None:
            d["spec"]["template"]["metadata"]["labels"][NEVER_READY] = "true"
            d["spec"]["template"]["spec"]["containers"][0]["image"] = "img:broken"

        edit(api, broken)
        wait_for(lambda: condition(get_d(api), ro.PROGRESSING).get("reason") == ro.TIMED_OUT_REASON,
                 what="ProgressDeadlineExceeded")
        c.watch.caught_up()
        d = get_d(api)
        assert condition(d, ro.PROGRESSING)["status"] == "False"
        assert condition(d, ro.AVAILABLE)["status"] == "True"
        assert c.watch.min_available >= 3 and c.watch.max_spec_total <= 5
        old, new = replica_sets(api)
        assert ro.spec_replicas(old) == 3 and ro.spec_replicas(new) == 2
        assert d["status"]["availableReplicas"] == 3 and d["status"]["updatedReplicas"] == 2
        # the pass records its Events as it ends, after its status write (Kubernetes records them asynchronously)
        wait_for(lambda: any(e.get("reason") == ro.TIMED_OUT_REASON
                             for e in api.list(api.resource("events"), namespace="default")[0]),
                 what="the ProgressDeadlineExceeded Event")


def test_scaling_mid_rollout_is_proportional(api):
    """Resizing a stuck rollout spreads the change over old and new ReplicaSets by their size."""
    with cluster(api):
        api.create(deployment(replicas=4, surge=1, unavailable=1))
        wait_for(lambda: rolled_out(api), what="the first rollout completes")

        def broken(d: dict) -> None:
            d["spec"]["template"]["metadata"]["labels"][NEVER_READY] = "true"

        edit(api, broken)
        wait_for(lambda: [ro.spec_replicas(rs) for rs in replica_sets(api)] == [3, 2], what="the rollout stalls")
        edit(api, lambda d: d["spec"].update(replicas=8))
        # max-replicas 5 -> 9 (8 + 1 surge): old 3 * 9/5 = 5.4 -> 5, new 2 * 9/5 = 3.6 -> 4
        wait_for(lambda: [ro.spec_replicas(rs) for rs in replica_sets(api)] == [5, 4], what="proportional scale up")
        for rs in replica_sets(api):
            assert ro.annotations(rs)[ro.DESIRED_REPLICAS_ANNOTATION] == "8"
            assert ro.annotations(rs)[ro.MAX_REPLICAS_ANNOTATION] == "9"


def test_revision_history_limit_deletes_oldest_empty_replica_sets(api):
    """revisionHistoryLimit 1: after three rollouts only the current and the latest old ReplicaSet stay."""
    with cluster(api):
        api.create(deployment(replicas=1, revisionHistoryLimit=1))
        wait_for(lambda: rolled_out(api), what="revision 1 rolls out")
        for generation, image in ((2, "img:2"), (3, "img:3"), (4, "img:4")):
            edit(api, set_image(image))
            wait_for(lambda: rolled_out(api) and get_d(api)["status"]["observedGeneration"] == generation,
                     what=f"{image} rolls out")
        wait_for(lambda: [ro.revision_of(rs) for rs in replica_sets(api)] == [3, 4], what="old revisions cleaned up")
        images = [rs["spec"]["template"]["spec"]["containers"][0]["image"] for rs in replica_sets(api)]
        assert images == ["img:3", "img:4"]


def test_deployment_adopts_and_releases_replica_sets(api):
    """An orphan ReplicaSet matching the selector is adopted; one relabelled out of it is released."""
    d_template = deployment(replicas=1)["spec"]["template"]
    orphan = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": "stray", "namespace": "default", "labels": {"app": "web"}},
              "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web", "extra": "x"}},
                       "template": {"metadata": {"labels": {"app": "web", "extra": "x"}},
                                    "spec": copy.deepcopy(d_template["spec"])}}}
    with cluster(api):
        api.create(orphan)
        created = api.create(deployment(replicas=1))
        wait_for(lambda: (api.get(api.resource("replicasets"), "stray", namespace="default")["metadata"]
                          .get("ownerReferences") or [{}])[0].get("uid") == created["metadata"]["uid"],
                 what="the orphan is adopted")
        wait_for(lambda: rolled_out(api), what="the rollout completes")

        def relabel(rs: dict) -> dict:
            rs["metadata"]["labels"] = {"app": "other"}
            return rs

        stray = api.get(api.resource("replicasets"), "stray", namespace="default")
        api.update(relabel(stray))
        wait_for(lambda: not api.get(api.resource("replicasets"), "stray", namespace="default")["metadata"]
                 .get("ownerReferences"), what="the relabelled ReplicaSet is released")


def test_deleted_deployment_is_success(api):
    """A key whose Deployment is gone reconciles to nothing, without error."""
    with cluster(api) as c:
        api.create(deployment(replicas=1))
        wait_for(lambda: rolled_out(api), what="the rollout completes")
        api.delete(api.resource("deployments"), "web", namespace="default")
        with pytest.raises(NotFound):
            get_d(api)
        controller = next(ctl for ctl in c.manager.controllers if getattr(ctl, "name", "") == "deployment") \
            if hasattr(c.manager, "controllers") else None
        if controller is not None:
            wait_for(lambda: controller.deployments.get("default", "web") is None, what="the cache drops it")
            assert controller.reconcile("default/web") is None
