"""The fake kubelet: registers Nodes, makes bound pods Running+Ready, fails or completes them, deletes."""

from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

from kctl.machinery.errors import NotFound
from kctl.testing.fake_kubelet import LABEL_EXIT_CODE as EXIT_CODE_LABEL
from kctl.testing.fake_kubelet import LABEL_NEVER_READY as NEVER_READY_LABEL
from kctl.testing.fake_kubelet import FakeKubelet


def wait_for(predicate: Callable[[], object], *, what: str, timeout: float = 30.0) -> object:
    """Poll until true; the limit only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)
    return value


@pytest.fixture
def kubelet(api):
    stop = threading.Event()
    fake = FakeKubelet(api, nodes=["n1", "n2"])
    fake.start(stop)
    yield fake
    stop.set()
    getattr(fake, "stop", lambda: None)()


def pod(name: str, *, node: str | None = "n1", labels: dict | None = None) -> dict:
    spec: dict = {"containers": [{"name": "app", "image": "img:1"}, {"name": "side", "image": "img:2"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default",
                                                             "labels": labels or {}}, "spec": spec}


def get_pod(api, name: str) -> dict | None:
    try:
        return api.get(api.resource("pods"), name, namespace="default")
    except NotFound:
        return None


def condition(p: dict, type_: str) -> str | None:
    return next((c["status"] for c in (p.get("status") or {}).get("conditions") or () if c["type"] == type_), None)


def test_registers_ready_nodes(api, kubelet):
    """Each name becomes a Node with capacity, allocatable, Ready=True and an InternalIP."""
    nodes, _ = api.list(api.resource("nodes"))
    assert [n["metadata"]["name"] for n in nodes] == ["n1", "n2"]
    status = nodes[0]["status"]
    assert status["capacity"] == kubelet.capacity.as_resources() == status["allocatable"]
    assert set(status["capacity"]) == {"cpu", "memory", "pods"}
    assert condition(nodes[0], "Ready") == "True"
    assert status["addresses"][0]["type"] == "InternalIP"


def test_bound_pod_becomes_running_and_ready(api, kubelet):
    """A pod bound to a fake node gets phase Running, Ready, container statuses, IPs and startTime."""
    api.create(pod("web"))
    p = wait_for(lambda: (q := get_pod(api, "web")) and condition(q, "Ready") == "True" and q, what="Ready")
    status = p["status"]
    assert status["phase"] == "Running" and status["podIP"] and status["hostIP"] and status["startTime"]
    assert condition(p, "ContainersReady") == "True"
    assert [(c["name"], c["ready"], "running" in c["state"]) for c in status["containerStatuses"]] == [
        ("app", True, True), ("side", True, True)]


def test_pods_elsewhere_are_left_alone(api, kubelet):
    """Unbound pods and pods on other nodes are not touched."""
    api.create(pod("unbound", node=None))
    api.create(pod("foreign", node="elsewhere"))
    api.create(pod("mine"))
    wait_for(lambda: condition(get_pod(api, "mine"), "Ready") == "True", what="mine Ready")
    assert not get_pod(api, "unbound").get("status", {}).get("phase") == "Running"
    assert (get_pod(api, "foreign").get("status") or {}).get("phase") != "Running"


@pytest.mark.parametrize("labels, phase, ready", [
    ({NEVER_READY_LABEL: "true"}, "Running", "False"),
    ({EXIT_CODE_LABEL: "0"}, "Succeeded", "False"),
    ({EXIT_CODE_LABEL: "3"}, "Failed", "False"),
], ids=["never-ready", "exit-0", "exit-3"])
def test_labels_choose_the_outcome(api, kubelet, labels, phase, ready):
    """Labels make a pod never Ready, or end it Succeeded / Failed with the exit code."""
    api.create(pod("job", labels=labels))
    p = wait_for(lambda: (q := get_pod(api, "job")) and (q.get("status") or {}).get("phase") == phase and q,
                 what=phase)
    assert condition(p, "Ready") == ready
    if EXIT_CODE_LABEL in labels:
        codes = {c["state"]["terminated"]["exitCode"] for c in p["status"]["containerStatuses"]}
        assert codes == {int(labels[EXIT_CODE_LABEL])}


def test_terminating_pod_is_removed(api, kubelet):
    """A pod deleted with a grace period (so marked terminating) is removed by the fake kubelet."""
    api.create(pod("web"))
    wait_for(lambda: condition(get_pod(api, "web"), "Ready") == "True", what="Ready")
    api.delete(api.resource("pods"), "web", namespace="default")
    wait_for(lambda: get_pod(api, "web") is None, what="removed")
    assert kubelet.deleted == 1


def test_ready_delay_waits_from_first_sight(api):
    """With ready_delay and a frozen clock, a pod is started only once the clock passes the delay."""
    now = [1000.0]
    stop = threading.Event()
    fake = FakeKubelet(api, nodes=["n1"], ready_delay=30.0, clock=lambda: now[0])
    fake.register_nodes()
    fake.pods.start(stop)
    try:
        api.create(pod("slow"))
        wait_for(lambda: fake.pods.get("default", "slow"), what="pod in the fake kubelet's cache")
        assert fake.sync_due() == 0
        assert (get_pod(api, "slow").get("status") or {}).get("phase") != "Running"
        now[0] += 31.0
        assert fake.sync_due() == 1
        assert get_pod(api, "slow")["status"]["phase"] == "Running"
    finally:
        stop.set()


def test_register_nodes_twice_keeps_existing(api):
    """Registering again creates nothing new and fails on nothing."""
    fake = FakeKubelet(api, nodes=["n1"])
    first = fake.register_nodes()
    again = fake.register_nodes()
    assert [n["metadata"]["uid"] for n in first] == [n["metadata"]["uid"] for n in again]


def test_many_pods_written_in_batches(api):
    """200 pods on 4 nodes all become Ready with distinct IPs when statuses are committed 50 at a time."""
    fake = FakeKubelet(api, nodes=[f"n{i}" for i in range(4)], batch=50)
    stop = threading.Event()
    api.write_all([("create", pod(f"p{i}", node=f"n{i % 4}")) for i in range(200)])
    fake.start(stop)
    try:
        rt = api.resource("pods")
        wait_for(lambda: all(condition(p, "Ready") == "True" for p in api.list(rt)[0]), what="all Ready")
        assert len({p["status"]["podIP"] for p in api.list(rt)[0]}) == 200
        assert fake.started == 200
    finally:
        stop.set()


def test_node_leases_are_renewed(api):
    """With lease_interval, each node gets a Lease in kube-node-lease held by the node."""
    fake = FakeKubelet(api, nodes=["n1", "n2"], lease_interval=5.0)
    fake.register_nodes()
    leases, _ = api.list(api.resource("leases"), namespace="kube-node-lease")
    holders = {(lease["metadata"]["name"], lease["spec"]["holderIdentity"]) for lease in leases}
    assert holders == {("n1", "n1"), ("n2", "n2")}
    fake.renew_leases()
    again, _ = api.list(api.resource("leases"), namespace="kube-node-lease")
    assert len(again) == 2
