"""`kctl drain` through the Eviction subresource: kubectl's lines when a PodDisruptionBudget refuses (retry, timeout),
an eviction error that ends a pod's drain, and --disable-eviction deleting past the budget."""

from __future__ import annotations

import threading

import pytest

from kctl.apiserver.eviction import MORE_THAN_ONE, VIOLATION
from kctl.machinery.errors import NotFound

WAIT = 30.0  # seconds a helper thread may take


def _refusal(name: str) -> str:
    return f'error when evicting pods/"{name}" -n "default" (will retry after 5s): {VIOLATION}'


@pytest.fixture
def node(server):
    """Node n1 running web-1 and web-2 (owned by ReplicaSet web, Ready) under budget `web` allowing 0 disruptions."""
    server.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    for name in ("web-1", "web-2"):
        pod = server.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "default", "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "uid-web",
                                 "controller": True}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox:1.36"}]}})
        server.update_status({**pod, "status": {"phase": "Running",
                                                "conditions": [{"type": "Ready", "status": "True"}]}})
    set_allowed(server, 0, create=True)
    return server


def set_allowed(server, allowed: int, *, create: bool = False, name: str = "web") -> None:
    """Write budget `name`'s status as the disruption controller would (creating the budget first)."""
    rt = server.resource("pdb")
    if create:
        server.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                       "metadata": {"name": name, "namespace": "default"},
                       "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
    pdb = server.get(rt, name, namespace="default")
    server.update_status({**pdb, "status": {"disruptionsAllowed": allowed, "currentHealthy": 2 + allowed,
                                            "desiredHealthy": 2, "expectedPods": 2 + allowed,
                                            "observedGeneration": pdb["metadata"]["generation"]}})


@pytest.fixture
def agent(server):
    """A stand-in node agent: removes every pod marked for deletion until the test ends."""
    stop = threading.Event()
    rt = server.resource("pods")

    def run():
        for type_, obj in server.watch(rt, since=server.store.revision(), stop=stop):
            meta = obj["metadata"]
            if type_ != "DELETED" and meta.get("deletionTimestamp"):
                try:
                    server.delete(rt, meta["name"], namespace=meta["namespace"], grace_period=0)
                except NotFound:
                    pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(WAIT)


@pytest.fixture
def fast_retry(monkeypatch):
    """Refused evictions are tried again after 0.1 s, not 5 s (the printed line still says 5s, as kubectl)."""
    from kctl.ops import drain

    monkeypatch.setattr(drain, "RETRY_SECONDS", 0.1)


def _lines_of(err: str, name: str) -> list[str]:
    return [line for line in err.splitlines() if f"/{name}" in line or f'"{name}"' in line]


def test_a_refused_eviction_is_retried_until_the_budget_allows(kctl, node, agent, fast_retry, monkeypatch):
    """The budget refuses (kubectl's 429 line), drain tries again; once the budget allows, the pods go."""
    from kctl.cli import nodes

    refused = threading.Event()
    original = nodes._refused

    def spy(key: str, message: str) -> None:
        original(key, message)
        refused.set()

    monkeypatch.setattr(nodes, "_refused", spy)

    def allow_later() -> None:
        if refused.wait(WAIT):
            set_allowed(node, 2)

    helper = threading.Thread(target=allow_later, daemon=True)
    helper.start()
    result = kctl("drain", "n1", "--timeout", "60s")
    helper.join(WAIT)
    assert result.code == 0, result.err
    out = result.out.splitlines()
    assert out[0] == "node/n1 cordoned" and out[-1] == "node/n1 drained"
    assert sorted(out[1:-1]) == ["pod/web-1 evicted", "pod/web-2 evicted"]
    web1 = _lines_of(result.err, "web-1")
    assert web1[:2] == ["evicting pod default/web-1", _refusal("web-1")]
    assert web1[-1] == "evicting pod default/web-1"
    assert set(web1) == {"evicting pod default/web-1", _refusal("web-1")}
    assert node.list(node.resource("pods"), namespace="default")[0] == []


def test_a_budget_that_never_allows_ends_at_timeout(kctl, node, fast_retry):
    """Still refused at --timeout: kubectl's global-timeout error per pod, the pods still there, exit 9."""
    result = kctl("drain", "n1", "--timeout", "500ms")
    assert result.code == 9
    errors = [f'error when evicting pods/"{n}" -n "default": global timeout reached: 500ms' for n in ("web-1", "web-2")]
    aggregate = "[" + ", ".join(errors) + "]"
    assert result.err.splitlines()[-8:] == [
        f'There are pending pods in node "n1" when an error occurred: {aggregate}', "pod/web-1", "pod/web-2",
        f'error: unable to drain node "n1" due to error: {aggregate}, continuing command...',
        "There are pending nodes to be drained:", " n1", *errors]
    assert _refusal("web-1") in result.err.splitlines()
    assert len(node.list(node.resource("pods"), namespace="default")[0]) == 2


def test_an_eviction_error_ends_that_pod_with_kubectls_message(kctl, node):
    """Two budgets select the pods: the eviction's 500 is reported per pod and the drain exits 1 at once."""
    set_allowed(node, 1, create=True, name="other")
    set_allowed(node, 1)
    result = kctl("drain", "n1")
    assert result.code == 1
    errors = [f'error when evicting pods/"{n}" -n "default": {MORE_THAN_ONE}' for n in ("web-1", "web-2")]
    assert result.err.splitlines()[-len(errors):] == errors
    assert "There are pending nodes to be drained:" in result.err


def test_disable_eviction_deletes_past_the_budget(kctl, node, agent):
    """--disable-eviction deletes the pods though the budget allows nothing: `pod/NAME deleted`, no refusal."""
    result = kctl("drain", "n1", "--disable-eviction", "--timeout", "60s")
    assert result.code == 0, result.err
    out = result.out.splitlines()
    assert out[0] == "node/n1 cordoned" and out[-1] == "node/n1 drained"
    assert sorted(out[1:-1]) == ["pod/web-1 deleted", "pod/web-2 deleted"]
    assert "error when evicting" not in result.err and "evicting pod" not in result.err
    assert node.list(node.resource("pods"), namespace="default")[0] == []
