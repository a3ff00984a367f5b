"""The ReplicaSet controller's writes per pass: a scale-down's deletions and a pass's Events, one transaction each.

Every write transaction is a commit (an fsync) that the other controllers wait behind, so
a rollout's hand-offs are only as quick as these batches (docs/benchmarks.md, "Deployment
rollout"). The controller runs under the manager on a real store; a proxy notes its calls.
"""

from __future__ import annotations

from rollout_harness import Cluster, wait_for

from kctl.controllers import replicaset as rsc


class CountingAPI:
    """The real API, with the controller's single deletes and its write_all batches noted."""

    def __init__(self, api) -> None:
        self._api = api
        self.deletes = 0
        self.batches: list[list[tuple[str, str]]] = []  # [(op, kind)] per write_all

    def __getattr__(self, name: str):
        return getattr(self._api, name)

    def delete(self, rt, name, **kwargs):
        if rt.kind == "Pod":
            self.deletes += 1
        return self._api.delete(rt, name, **kwargs)

    def write_all(self, ops, **kwargs):
        self.batches.append([(op, obj.get("kind")) for op, obj in ops])
        return self._api.write_all(ops, **kwargs)


def replica_set(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "img:1"}]}}}}


def status(api) -> dict:
    return api.get(api.resource("replicasets"), "web", namespace="default").get("status") or {}


def test_scale_down_deletes_surplus_in_one_write(api):
    """Scaling 6 -> 1 deletes the 5 surplus pods in one write_all, not one delete each."""
    spy = CountingAPI(api)
    with Cluster(api, [rsc.ReplicaSetController()], watch_app="web", manager_api=spy):
        api.create(replica_set(6))
        wait_for(lambda: status(api).get("availableReplicas") == 6, what="6 pods available")
        rs = api.get(api.resource("replicasets"), "web", namespace="default")
        rs["spec"]["replicas"] = 1
        api.update(rs)
        wait_for(lambda: status(api).get("replicas") == 1, what="scaled down to 1")
    deletions = [batch for batch in spy.batches if ("delete", "Pod") in batch]
    assert spy.deletes == 0
    assert deletions == [[("delete", "Pod")] * 5]


def test_a_pass_records_its_events_in_one_write(api):
    """The SuccessfulCreate Events of the pass that created 6 pods are written together, after the pods."""
    spy = CountingAPI(api)
    with Cluster(api, [rsc.ReplicaSetController()], watch_app="web", manager_api=spy):
        api.create(replica_set(6))
        wait_for(lambda: status(api).get("availableReplicas") == 6, what="6 pods available")
        wait_for(lambda: any(batch.count(("create", "Event")) == 6 for batch in spy.batches),
                 what="the 6 SuccessfulCreate Events in one write")
    pods = [batch for batch in spy.batches if ("create", "Pod") in batch]
    assert [len(batch) for batch in pods] == rsc.slow_start_batches(6)  # 1, 2, 3: one write per slow-start batch
    creates = [e for e in api.list(api.resource("events"), namespace="default")[0] if e["reason"] == "SuccessfulCreate"]
    assert len(creates) == 6
