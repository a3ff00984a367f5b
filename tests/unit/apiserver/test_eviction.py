"""The pods/eviction subresource (kctl.apiserver.eviction): every branch of Kubernetes' EvictionREST, the
budget's update and the pod's delete in one transaction, and the same answers over the remote API."""

from __future__ import annotations

import socket
import threading

import pytest

from kctl.apiserver import eviction, serve
from kctl.apiserver.remote import RemoteAPIServer
from kctl.apiserver.server import APIServer
from kctl.machinery.errors import APIError, Forbidden, NotFound, TooManyRequests
from kctl.store.sqlite import Store

WAIT = 30.0  # seconds a helper thread may take


def _pod(api, name: str, *, phase: str = "Running", ready: bool = True, labels: dict | None = None,
         node: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    pod = api.create({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": name, "labels": labels if labels is not None else {"app": "web"}},
                      "spec": spec})
    status = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return api.update_status({**pod, "status": status})


def _pdb(api, name: str = "web", *, allowed: int = 1, current: int = 3, desired: int = 2,
         observed: int | None = None, policy: str | None = None, selector: dict | None = None) -> dict:
    spec: dict = {"minAvailable": desired, "selector": selector if selector is not None
                  else {"matchLabels": {"app": "web"}}}
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    pdb = api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": name}, "spec": spec})
    status = {"disruptionsAllowed": allowed, "currentHealthy": current, "desiredHealthy": desired,
              "expectedPods": current,
              "observedGeneration": pdb["metadata"]["generation"] if observed is None else observed}
    return api.update_status({**pdb, "status": status})


def _exists(api, kind: str, name: str) -> bool:
    return api.find(api.resource(kind), name, namespace="default") is not None


def _budget(api, name: str = "web") -> dict:
    return api.get(api.resource("pdb"), name, namespace="default")["status"]


def test_a_missing_pod_is_not_found(api):
    """Evicting a pod that does not exist is NotFound, naming it."""
    with pytest.raises(NotFound, match='pods "ghost" not found'):
        api.evict("default", "ghost")


@pytest.mark.parametrize("phase, deleting", [
    ("Succeeded", False), ("Failed", False), ("Pending", False), ("Running", True),
])
def test_pods_that_disrupt_nothing_more_skip_the_budget(api, phase, deleting):
    """A finished, Pending or already-terminating pod is deleted even with no disruption allowed."""
    _pdb(api, allowed=0)
    _pod(api, "p", phase=phase, node="n1" if deleting else None)
    if deleting:
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        api.delete(api.resource("pods"), "p", namespace="default")  # its node agent has yet to stop it
    before = _budget(api)
    assert api.evict("default", "p")["status"] == "Success"
    pod = api.find(api.resource("pods"), "p", namespace="default")
    assert pod is None or pod["metadata"].get("deletionTimestamp")
    assert _budget(api) == before


def test_no_budget_deletes(api):
    """A pod no budget selects is deleted (a budget of other pods is not consulted)."""
    _pdb(api, allowed=0, selector={"matchLabels": {"app": "other"}})
    _pod(api, "p")
    assert api.evict("default", "p") == {"apiVersion": "v1", "kind": "Status", "metadata": {},
                                         "status": "Success", "code": 201}
    assert not _exists(api, "pods", "p")


def test_more_than_one_budget_is_an_internal_error(api):
    """Two budgets selecting the pod: 500 with Kubernetes' message, nothing deleted."""
    _pdb(api, "a")
    _pdb(api, "b", selector={})  # policy/v1: an empty selector selects every pod of the namespace
    _pod(api, "p")
    with pytest.raises(APIError) as caught:
        api.evict("default", "p")
    assert (caught.value.code, caught.value.message) == (500, eviction.MORE_THAN_ONE)
    assert _exists(api, "pods", "p")


@pytest.mark.parametrize("allowed, observed_behind, cause", [
    (0, False, "The disruption budget web needs 2 healthy pods and has 3 currently"),
    (1, True, "The disruption budget web is still being processed by the server."),
])
def test_a_budget_that_allows_nothing_refuses_with_429(api, allowed, observed_behind, cause):
    """No disruption allowed, or a status not yet observed: TooManyRequests (429, exit 10); nothing changes."""
    _pdb(api, allowed=allowed, observed=0 if observed_behind else None)
    _pod(api, "p")
    before = _budget(api)
    with pytest.raises(TooManyRequests) as caught:
        api.evict("default", "p")
    exc = caught.value
    assert (exc.code, exc.reason, exc.exit_code, exc.message) == (429, "TooManyRequests", 10, eviction.VIOLATION)
    assert [c.message for c in exc.causes] == [cause]
    assert _exists(api, "pods", "p") and _budget(api) == before


def test_a_negative_budget_is_forbidden(api):
    """disruptionsAllowed below zero: Forbidden, as Kubernetes."""
    _pdb(api, allowed=-1)
    _pod(api, "p")
    with pytest.raises(Forbidden, match="pdb disruptions allowed is negative"):
        api.evict("default", "p")


def test_an_allowed_eviction_takes_one_disruption_and_deletes(api):
    """disruptionsAllowed goes 1 -> 0 (condition InsufficientPods), the pod is in disruptedPods and deleted."""
    _pdb(api, allowed=1)
    _pod(api, "p")
    api.evict("default", "p")
    status = _budget(api)
    assert status["disruptionsAllowed"] == 0 and list(status["disruptedPods"]) == ["p"]
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == \
        [("DisruptionAllowed", "False", "InsufficientPods")]
    assert not _exists(api, "pods", "p")


def test_a_pod_with_a_node_agent_is_marked_with_disruption_target(api):
    """A bound pod is marked for deletion (its agent stops it) with DisruptionTarget/EvictionByEvictionAPI."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    _pdb(api, allowed=2)
    _pod(api, "p", node="n1")
    api.evict("default", "p", grace_period=5)
    pod = api.get(api.resource("pods"), "p", namespace="default")
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 5
    target = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert [(c["status"], c["reason"]) for c in target] == [("True", "EvictionByEvictionAPI")]
    assert _budget(api)["disruptionsAllowed"] == 1


@pytest.mark.parametrize("policy, current, desired, evicted", [
    (None, 3, 2, True),                # IfHealthyBudget (default), budget met: no disruption taken
    ("IfHealthyBudget", 1, 2, False),  # budget not met: the budget decides (0 allowed)
    ("AlwaysAllow", 1, 2, True),       # any not-Ready pod may go
])
def test_unhealthy_pod_eviction_policy(api, policy, current, desired, evicted):
    """A not-Ready pod is evicted without a disruption per unhealthyPodEvictionPolicy, else the budget decides."""
    _pdb(api, allowed=0, current=current, desired=desired, policy=policy)
    _pod(api, "p", ready=False)
    if evicted:
        api.evict("default", "p")
        assert _budget(api)["disruptionsAllowed"] == 0 and not _budget(api).get("disruptedPods")
    else:
        with pytest.raises(TooManyRequests):
            api.evict("default", "p")
    assert _exists(api, "pods", "p") is not evicted


def test_dry_run_checks_but_writes_nothing(api):
    """--dry-run: an allowed eviction changes nothing; a refused one still raises 429."""
    _pdb(api, allowed=1)
    _pod(api, "p")
    rev = api.revision()
    assert api.evict("default", "p", dry_run=True)["status"] == "Success"
    assert api.revision() == rev and _exists(api, "pods", "p")
    api.update_status({**api.get(api.resource("pdb"), "web", namespace="default"),
                       "status": {**_budget(api), "disruptionsAllowed": 0}})
    with pytest.raises(TooManyRequests):
        api.evict("default", "p", dry_run=True)


def test_concurrent_evictions_against_a_budget_of_one_let_exactly_one_through(tmp_path):
    """Two evictions at once, each through its own store connection (as two processes), and 1 allowed: one passes."""
    path = tmp_path / "kctl.db"
    stores = [Store(path), Store(path)]
    apis = [APIServer(s, user="tester", audit_log=None) for s in stores]
    try:
        _pdb(apis[0], allowed=1)
        for name in ("a", "b"):
            _pod(apis[0], name)
        for _round in range(3):  # the race is narrow: look several times
            outcomes: dict[str, object] = {}
            start = threading.Barrier(2)

            def run(api: APIServer, name: str) -> None:
                start.wait(WAIT)
                try:
                    api.evict("default", name)
                    outcomes[name] = "evicted"
                except TooManyRequests as exc:
                    outcomes[name] = exc

            threads = [threading.Thread(target=run, args=(apis[i], n)) for i, n in enumerate(("a", "b"))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(WAIT)
            assert sorted(str(type(v).__name__) if v != "evicted" else v for v in outcomes.values()) == \
                ["TooManyRequests", "evicted"]
            status = _budget(apis[0])
            assert status["disruptionsAllowed"] == 0 and len(status["disruptedPods"]) == 1
            # reset: the evicted pod back, one disruption allowed again
            gone = next(n for n, v in outcomes.items() if v == "evicted")
            _pod(apis[0], gone)
            pdb = apis[0].get(apis[0].resource("pdb"), "web", namespace="default")
            apis[0].update_status({**pdb, "status": {**status, "disruptionsAllowed": 1, "disruptedPods": {}}})
    finally:
        for s in stores:
            s.close()


@pytest.fixture
def remote(api):
    """A RemoteAPIServer talking to `api` through kctl.apiserver.serve on a socketpair."""
    client, server_end = socket.socketpair()
    server = serve.Server(api, server_end.makefile("rb"), server_end.makefile("wb"), workers=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()

    class Channel:
        rfile, wfile = client.makefile("rb"), client.makefile("wb")

        def failure(self) -> str:
            return "the test server went away"

        def close(self) -> None:
            for sock in (client, server_end):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    made = [False]

    def channel():
        assert not made[0], "one connection is enough here"
        made[0] = True
        return Channel()

    remote = RemoteAPIServer("test://served", channel_factory=channel)
    yield remote
    remote.close()
    thread.join(WAIT)
    client.close()
    server_end.close()


def test_eviction_over_the_remote_api(api, remote):
    """The remote API evicts alike: success, then TooManyRequests with its cause, NotFound for a missing pod."""
    _pdb(api, allowed=1)
    _pod(api, "a")
    _pod(api, "b")
    assert remote.evict("default", "a")["status"] == "Success"
    with pytest.raises(TooManyRequests) as caught:
        remote.evict("default", "b")
    assert caught.value.message == eviction.VIOLATION and caught.value.exit_code == 10
    assert [c.message for c in caught.value.causes] == ["The disruption budget web needs 2 healthy pods and has 3 "
                                                         "currently"]
    with pytest.raises(NotFound):
        remote.evict("default", "ghost")
    assert not _exists(api, "pods", "a") and _exists(api, "pods", "b")
