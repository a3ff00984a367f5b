"""The node agent loop on a real store, with pod sync replaced by a recording fake.

What is checked is the loop's own work: which pods reach sync, when status is written,
termination and removal of deleted pods, orphan clean-up, re-list on Gone, ConfigMap
changes, failure isolation, and the supervisor's one-agent-per-Node.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import pytest

from kctl.agent import agent as agent_mod
from kctl.agent.agent import VOLATILE_STATUS_FIELDS, NodeAgent, references
from kctl.agent.node import rfc3339
from kctl.agent.supervisor import NodeAgentSupervisor
from kctl.client.statuswriter import status_differs
from kctl.machinery.errors import Gone
from kctl.runtime.interface import HostInfo

NODE = "n1"


# -- a fake kctl.agent.podsync ---------------------------------------------------------------

@dataclass
class SyncContext:
    node_name: str
    host_ip: str
    lookup: Callable
    backoff: object
    probes: object
    now: Callable[[], float] = time.time
    remote: bool = False


@dataclass
class EventSpec:
    type: str
    reason: str
    message: str
    field_path: str = ""


@dataclass
class SyncResult:
    status: dict
    events: list
    requeue_after: float | None


@dataclass
class FakeSync:
    """Records every call; `fail` names pods whose sync raises; `terminating` counts pending stops."""

    calls: list = field(default_factory=list)
    fail: set = field(default_factory=set)
    terminating: dict = field(default_factory=dict)
    orphan_calls: list = field(default_factory=list)
    on_sync: Callable | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    SyncContext = SyncContext

    def sync_pod(self, pod, runtime, ctx):
        name = pod["metadata"]["name"]
        with self.lock:
            self.calls.append(("sync", name, pod["metadata"]["uid"]))
        if self.on_sync is not None:
            self.on_sync(pod, ctx)
        if name in self.fail:
            raise RuntimeError(f"sync of {name} broke")
        status = {"phase": "Running", "hostIP": ctx.host_ip,
                  "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": rfc3339(time.time())}]}
        return SyncResult(status=status, events=[EventSpec("Normal", "Started", f"Started {name}")],
                          requeue_after=None)

    def terminate_pod(self, pod, runtime, ctx, *, grace_seconds):
        name = pod["metadata"]["name"]
        with self.lock:
            self.calls.append(("terminate", name, grace_seconds))
            left = self.terminating.get(name, 0)
            self.terminating[name] = max(0, left - 1)
        status = dict(pod.get("status") or {}, phase="Running")
        return SyncResult(status=status, events=[EventSpec("Normal", "Killing", f"Stopping {name}")],
                          requeue_after=0.05 if left else None)

    def cleanup_orphans(self, runtime, *, keep_uids):
        with self.lock:
            self.orphan_calls.append((set(keep_uids), len(self.calls)))
        return ["kctl-orphan"]

    def count(self, kind: str, name: str) -> int:
        with self.lock:
            return sum(1 for c in self.calls if c[0] == kind and c[1] == name)


class FakeHost:
    """The runtime calls a heartbeat makes."""

    def info(self) -> HostInfo:
        return HostInfo(cpus=2, memory_bytes=2 ** 30, os="linux", kernel="6.1", arch="amd64",
                        runtime_version="podman://4.3.1", hostname=NODE)

    def list_images(self) -> list:
        return []


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


@pytest.fixture
def fake(monkeypatch):
    """kctl.agent.podsync replaced by a FakeSync for the agent."""
    sync = FakeSync()
    monkeypatch.setattr(agent_mod, "_podsync", lambda: sync)
    return sync


@pytest.fixture
def nodes(api):
    for name in (NODE, "n2"):
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


@pytest.fixture
def make_agent(api, nodes, fake):
    """make_agent(**options) -> a started NodeAgent for n1, stopped after the test."""
    started: list[NodeAgent] = []

    def make(*, target_api=None, start: bool = True, **options) -> NodeAgent:
        options = {"workers": 2, "resync": 60.0, "heartbeat_interval": None, "backoff": object(),
                   "probes": object(), "host_ip": "10.0.0.1", **options}
        agent = NodeAgent(target_api or api, NODE, FakeHost(), **options)
        if start:
            agent.start()
            started.append(agent)
            assert agent.wait_synced(5)
        return agent

    yield make
    for agent in started:
        agent.stop(5)
        assert not any(t.is_alive() for t in agent._threads)


def pod(name: str, node: str | None = NODE, **spec) -> dict:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}
    if node:
        obj["spec"]["nodeName"] = node
    return obj


def get_pod(api, name: str) -> dict | None:
    from kctl.machinery.errors import NotFound

    try:
        return api.get(api.resource("pods"), name, namespace="default")
    except NotFound:
        return None


# -- syncing and status -------------------------------------------------------------------------

def test_bound_pod_synced_and_status_written(api, make_agent, fake):
    """A Pod bound to the node is synced; its status and the sync's events are written."""
    make_agent()
    created = api.create(pod("web"))
    assert wait_for(lambda: (get_pod(api, "web").get("status") or {}).get("phase") == "Running")
    assert get_pod(api, "web")["status"]["hostIP"] == "10.0.0.1"
    assert wait_for(lambda: api.list(api.resource("events"), namespace="default")[0])
    [event] = api.list(api.resource("events"), namespace="default")[0]
    assert (event["reason"], event["source"], event["involvedObject"]["uid"]) == (
        "Started", {"component": "kubelet", "host": NODE}, created["metadata"]["uid"])


def test_status_not_rewritten_when_unchanged(api, make_agent, fake):
    """Re-syncs that produce the same status (volatile fields aside) write nothing."""
    make_agent(resync=0.05)
    api.create(pod("web"))
    assert wait_for(lambda: (get_pod(api, "web").get("status") or {}).get("phase") == "Running")
    rv = get_pod(api, "web")["metadata"]["resourceVersion"]
    before = fake.count("sync", "web")
    assert wait_for(lambda: fake.count("sync", "web") >= before + 5)
    assert get_pod(api, "web")["metadata"]["resourceVersion"] == rv


def test_pod_bound_elsewhere_or_unbound_ignored(api, make_agent, fake):
    """Pods of another node, or not scheduled yet, are never synced here."""
    make_agent()
    api.create(pod("other", node="n2"))
    api.create(pod("pending", node=None))
    api.create(pod("mine"))
    assert wait_for(lambda: fake.count("sync", "mine") >= 1)
    time.sleep(0.1)
    assert fake.count("sync", "other") == 0 and fake.count("sync", "pending") == 0


def test_deleted_pod_terminated_then_removed(api, make_agent, fake):
    """A Pod marked for deletion is terminated with its grace period, then its object removed."""
    make_agent()
    api.create(pod("web", terminationGracePeriodSeconds=7))
    # Wait for the agent's status (the API gives a new Pod phase Pending): a status write landing
    # on the terminating pod would remove it (kctl's API deletes on an update of a terminating
    # object without finalizers, whatever its grace period).
    assert wait_for(lambda: ((get_pod(api, "web") or {}).get("status") or {}).get("phase") == "Running")
    fake.terminating["web"] = 2  # two rounds "still stopping", then done
    deleted = api.delete(api.resource("pods"), "web", namespace="default")
    assert deleted["metadata"]["deletionTimestamp"]
    assert wait_for(lambda: get_pod(api, "web") is None)
    stops = fake.count("terminate", "web")
    assert stops >= 3, fake.calls  # asked again while "still stopping" (a loaded machine may add a resync's round)
    assert ("terminate", "web", 7) in fake.calls
    time.sleep(0.1)
    assert fake.count("terminate", "web") == stops  # the DELETED change does not stop it again


def test_pod_object_removed_behind_agent_is_stopped(api, make_agent, fake):
    """A Pod object deleted outright (grace 0): what runs for it is stopped at once."""
    make_agent()
    api.create(pod("web"))
    assert wait_for(lambda: fake.count("sync", "web") >= 1)
    api.delete(api.resource("pods"), "web", namespace="default", grace_period=0)
    assert wait_for(lambda: ("terminate", "web", 0) in fake.calls)


def test_orphan_cleanup_keeps_pods_bound_here(api, nodes, make_agent, fake):
    """At start, after listing, cleanup_orphans gets exactly this node's pod uids, before any sync."""
    mine = [api.create(pod(f"p{i}"))["metadata"]["uid"] for i in range(2)]
    api.create(pod("elsewhere", node="n2"))
    make_agent()
    assert fake.orphan_calls == [(set(mine), 0)]


def test_one_failing_pod_does_not_stop_the_agent(api, make_agent, fake):
    """A pod whose sync raises is retried with back-off; the others are synced meanwhile."""
    fake.fail.add("bad")
    make_agent()
    api.create(pod("bad"))
    api.create(pod("good"))
    assert wait_for(lambda: (get_pod(api, "good").get("status") or {}).get("phase") == "Running")
    assert wait_for(lambda: fake.count("sync", "bad") >= 2)
    fake.fail.clear()
    assert wait_for(lambda: (get_pod(api, "bad").get("status") or {}).get("phase") == "Running", timeout=10)


def test_status_conflict_rereads_and_retries(api, make_agent, fake):
    """A status write that meets a newer Pod (Conflict) is written again onto the re-read Pod, keeping its change."""
    labelled = threading.Event()

    def label_once(p, ctx):
        if not labelled.is_set():
            labelled.set()
            api.patch(api.resource("pods"), p["metadata"]["name"], {"metadata": {"labels": {"x": "y"}}},
                      namespace="default")

    fake.on_sync = label_once
    make_agent()
    api.create(pod("web"))
    assert wait_for(lambda: (get_pod(api, "web").get("status") or {}).get("phase") == "Running")
    assert get_pod(api, "web")["metadata"]["labels"] == {"x": "y"}
    assert wait_for(lambda: fake.count("sync", "web") >= 2)  # the label change is a change to sync


def test_configmap_change_resyncs_referencing_pods(api, make_agent, fake):
    """A change to a ConfigMap re-syncs the pods that read it, and lookup serves it."""
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "1"}})
    agent = make_agent()
    api.create(pod("reader", volumes=[{"name": "v", "configMap": {"name": "cfg"}}]))
    api.create(pod("bystander"))
    assert wait_for(lambda: fake.count("sync", "reader") == 1 and fake.count("sync", "bystander") == 1)
    assert agent.lookup("ConfigMap", "default", "cfg")["data"] == {"k": "1"}
    api.patch(api.resource("configmaps"), "cfg", {"data": {"k": "2"}}, namespace="default")
    assert wait_for(lambda: fake.count("sync", "reader") >= 2)
    assert agent.lookup("ConfigMap", "default", "cfg")["data"] == {"k": "2"}
    time.sleep(0.1)
    assert fake.count("sync", "bystander") == 1


def test_lookup_hands_out_copies(api, make_agent):
    """Changing what lookup returned does not change the cache."""
    api.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "eA=="}})
    agent = make_agent()
    agent.lookup("Secret", "default", "s")["data"]["k"] = "changed"
    assert agent.lookup("Secret", "default", "s")["data"] == {"k": "eA=="}
    assert agent.lookup("Secret", "default", "missing") is None


class GoneOnce:
    """The API, but the first Pod watch raises Gone after a pod was created behind the agent's back."""

    def __init__(self, api) -> None:
        self._api = api
        self.lists = 0
        self.gone = False

    def __getattr__(self, name):
        return getattr(self._api, name)

    def list(self, rt, **kwargs):
        if rt.kind == "Pod":
            self.lists += 1
        return self._api.list(rt, **kwargs)

    def watch(self, rt, **kwargs):
        if rt.kind == "Pod" and not self.gone:
            self.gone = True
            self._api.create(pod("missed"))
            raise Gone("too old resource version")
        return self._api.watch(rt, **kwargs)


def test_gone_relists(api, make_agent, fake):
    """A watch that is Gone lists again, and what changed meanwhile is synced."""
    proxy = GoneOnce(api)
    make_agent(target_api=proxy)
    assert wait_for(lambda: fake.count("sync", "missed") >= 1)
    assert proxy.lists == 2


def test_heartbeat_runs_with_agent(api, make_agent):
    """The agent's heartbeat renews the node's Lease and marks the Node Ready."""
    make_agent(heartbeat_interval=0.05)

    def ready() -> bool:
        status = api.get(api.resource("nodes"), NODE).get("status") or {}
        return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or ())

    assert wait_for(ready)
    assert api.get(api.resource("leases"), NODE, namespace="kube-node-lease")["spec"]["holderIdentity"] == NODE


# -- helpers ----------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, expected", [
    ({"volumes": [{"name": "a", "configMap": {"name": "cm"}}, {"name": "b", "secret": {"secretName": "s"}}]},
     {("ConfigMap", "cm"), ("Secret", "s")}),
    ({"containers": [{"name": "c", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                      "envFrom": [{"configMapRef": {"name": "cm"}}]}]},
     {("ConfigMap", "cm"), ("Secret", "s")}),
    ({"volumes": [{"name": "p", "projected": {"sources": [{"configMap": {"name": "a"}}, {"secret": {"name": "b"}}]}}]},
     {("ConfigMap", "a"), ("Secret", "b")}),
    ({"initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "s"}}]}]}, {("Secret", "s")}),
    ({"containers": [{"name": "c"}]}, set()),
], ids=["volumes", "env", "projected", "init-containers", "none"])
def test_references(spec, expected):
    """The ConfigMaps and Secrets a pod reads, from volumes, env and envFrom."""
    assert references({"spec": spec}) == expected


@pytest.mark.parametrize("old, new, differs", [
    ({"phase": "Running", "conditions": [{"type": "Ready", "lastProbeTime": 1}]},
     {"phase": "Running", "conditions": [{"type": "Ready", "lastProbeTime": 2}]}, False),
    ({"phase": "Pending"}, {"phase": "Running"}, True),
    (None, {}, False),
], ids=["probe-time-only", "phase", "empty"])
def test_status_differs(old, new, differs):
    """Volatile fields (lastProbeTime, lastHeartbeatTime) do not make a status differ."""
    assert status_differs(old, new, ignore=VOLATILE_STATUS_FIELDS) is differs


# -- the supervisor ---------------------------------------------------------------------------

class RecordingAgent:
    """Stands in for NodeAgent: records start/stop."""

    def __init__(self, api, name, runtime, **options) -> None:
        self.name, self.node_name, self.runtime, self.options = name, name, runtime, options
        self.started = self.stopped = False

    def start(self) -> None:
        self.started = True

    def stop(self, timeout: float = 10.0) -> None:
        self.stopped = True


def test_supervisor_follows_nodes(api):
    """One agent per Node with a Podman URL (of its own); added nodes start one, removed ones stop theirs."""
    made: list[RecordingAgent] = []

    def factory(*args, **kwargs):
        made.append(RecordingAgent(*args, **kwargs))
        return made[-1]

    def runtime_for(node):
        if node["metadata"]["name"] == "broken":
            raise ValueError("no key")
        return f"runtime-{node['metadata']['name']}"

    def node(name, url="unix:///run/p.sock"):
        annotations = {"kctl.io/podman-url": url} if url else {}
        return api.create({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "annotations": annotations}})

    node("a")
    node("no-url", url=None)
    node("broken", url="unix:///broken.sock")
    node("same-podman-as-a")
    supervisor = NodeAgentSupervisor(api, runtime_for_node=runtime_for, agent_factory=factory, retry=0.1, workers=3)
    supervisor.start()
    try:
        assert wait_for(lambda: set(supervisor.agents) == {"a"})
        assert made[0].runtime == "runtime-a" and made[0].options["workers"] == 3 and made[0].started
        node("b", url="ssh://root@127.0.0.1/run/p.sock")
        assert wait_for(lambda: set(supervisor.agents) == {"a", "b"})
        assert supervisor.agents["b"].options["remote"] is True
        first_a = supervisor.agents["a"]
        api.delete(api.resource("nodes"), "a")
        assert wait_for(lambda: set(supervisor.agents) == {"b", "same-podman-as-a"})
        assert first_a.stopped
    finally:
        supervisor.stop(5)
    assert all(a.stopped for a in made)
    assert supervisor._thread is None


def test_supervisor_restarts_agent_when_url_changes(api):
    """A Node whose Podman URL changes gets a new agent on the new runtime."""
    made: list[RecordingAgent] = []

    def factory(*args, **kwargs):
        made.append(RecordingAgent(*args, **kwargs))
        return made[-1]

    api.create({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "a", "annotations": {"kctl.io/podman-url": "unix:///one.sock"}}})
    supervisor = NodeAgentSupervisor(api, runtime_for_node=lambda n: copy.deepcopy(n), agent_factory=factory,
                                     retry=0.1)
    supervisor.start()
    try:
        assert wait_for(lambda: len(made) == 1)
        api.patch(api.resource("nodes"), "a", {"metadata": {"annotations": {"kctl.io/podman-url": "unix:///two.sock"}}})
        assert wait_for(lambda: len(made) == 2)
        assert made[0].stopped and not made[1].stopped
        assert made[1].runtime["metadata"]["annotations"]["kctl.io/podman-url"] == "unix:///two.sock"
    finally:
        supervisor.stop(5)


def test_fence_removes_pods_whose_grace_is_over(api, make_agent, fake):
    """Before Ready again, Podman keeps only live pods and terminating pods still within their grace."""
    agent = make_agent()
    live = api.create(pod("live"))["metadata"]["uid"]
    evicted = api.create(pod("evicted", terminationGracePeriodSeconds=30))["metadata"]["uid"]
    stopping = api.create(pod("stopping", terminationGracePeriodSeconds=30))["metadata"]["uid"]
    fake.terminating.update({"evicted": 1000, "stopping": 1000})  # their hosts never finish stopping them
    # The agent's status (the API gives a new Pod phase Pending): a status write landing on a
    # terminating pod would remove it (kctl's API deletes on such an update, whatever the grace).
    assert wait_for(lambda: all(((get_pod(api, n) or {}).get("status") or {}).get("phase") == "Running"
                                for n in ("live", "evicted", "stopping")))
    for name in ("evicted", "stopping"):
        api.delete(api.resource("pods"), name, namespace="default")
    assert wait_for(lambda: all(agent.pods.get(u) and agent.pods.get(u)["metadata"].get("deletionTimestamp")
                                for u in (evicted, stopping)))
    # The "evicted" one was deleted long ago: move its deletionTimestamp back past its grace.
    cached = agent.pods.get(evicted)
    cached["metadata"]["deletionTimestamp"] = "2020-01-01T00:00:00Z"
    agent.pods.offer({**cached, "metadata": {**cached["metadata"], "resourceVersion": "999999"}})
    fake.orphan_calls.clear()
    assert agent.fence(timeout=5)
    keep, _ = fake.orphan_calls[-1]
    assert keep == {live, stopping}


# -- the informers -----------------------------------------------------------------------------

class _SocketChannel:
    """A remote-API channel whose far end is a kctl.apiserver.serve.Server on a thread (node mode's SSH, in-process)."""

    def __init__(self, api) -> None:
        import socket

        from kctl.apiserver import serve

        self._client, self._server = socket.socketpair()
        self.rfile, self.wfile = self._client.makefile("rb"), self._client.makefile("wb")
        self.server = serve.Server(api, self._server.makefile("rb"), self._server.makefile("wb"), workers=4)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def failure(self) -> str:
        return "the test server went away"

    def close(self) -> None:
        import socket

        for sock in (self._client, self._server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(10)
        for f in (self.rfile, self.wfile):
            try:
                f.close()
            except OSError:
                pass
        self._client.close()
        self._server.close()


class _Sent:
    """The served API, recording every Pod its list and watch answers send to the agent."""

    def __init__(self, api) -> None:
        self._api = api
        self.pods: list[dict] = []
        self.lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self._api, name)

    def _seen(self, obj: dict) -> None:
        if obj.get("kind") == "Pod":
            with self.lock:
                self.pods.append(obj)

    def list(self, rt, **kwargs):
        items, rev = self._api.list(rt, **kwargs)
        for obj in items:
            self._seen(obj)
        return items, rev

    def watch(self, rt, **kwargs):
        for change_type, obj in self._api.watch(rt, **kwargs):
            self._seen(obj)
            yield change_type, obj


@pytest.fixture
def remote_api(api):
    """(a RemoteAPIServer to `api` over socketpairs, the recorder of the Pods that crossed to it)."""
    from kctl.apiserver.remote import RemoteAPIServer

    sent = _Sent(api)
    channels: list[_SocketChannel] = []

    def connect() -> _SocketChannel:
        channels.append(_SocketChannel(sent))
        return channels[-1]

    client = RemoteAPIServer("test://control", channel_factory=connect)
    yield client, sent
    client.close()
    for channel in channels:
        channel.close()


def test_node_mode_receives_only_its_own_pods(api, remote_api, make_agent, fake):
    """Over the remote API (node mode) the agent is sent only the Pods bound to its node, filtered by the server."""
    client, sent = remote_api
    api.create(pod("before-elsewhere", node="n2"))
    make_agent(target_api=client)
    api.create(pod("mine"))
    api.create(pod("elsewhere", node="n2"))
    api.create(pod("pending", node=None))
    assert wait_for(lambda: fake.count("sync", "mine") >= 1, timeout=10)
    assert wait_for(lambda: (get_pod(api, "mine").get("status") or {}).get("phase") == "Running", timeout=10)
    with sent.lock:
        crossed = {(p["metadata"]["name"], p["spec"].get("nodeName")) for p in sent.pods}
    assert crossed and all(node == NODE for _, node in crossed), crossed


def test_pod_replaced_under_the_same_name_while_gone(api, make_agent, fake):
    """A Pod deleted and made again under its name while the watch was Gone: the old one stops, the new one syncs."""
    first = api.create(pod("web"))["metadata"]["uid"]

    class ReplaceWhileGone(GoneOnce):
        def watch(self, rt, **kwargs):
            if rt.kind == "Pod" and not self.gone:
                self.gone = True
                self._api.delete(self._api.resource("pods"), "web", namespace="default", grace_period=0)
                self._api.create(pod("web"))
                raise Gone("too old resource version")
            return self._api.watch(rt, **kwargs)

    proxy = ReplaceWhileGone(api)
    agent = make_agent(target_api=proxy)
    assert wait_for(lambda: proxy.gone and (get_pod(api, "web") or {"metadata": {}})["metadata"].get("uid")
                    not in (None, first))
    second = get_pod(api, "web")["metadata"]["uid"]
    assert wait_for(lambda: ("terminate", "web", 0) in fake.calls)
    assert wait_for(lambda: any(c == ("sync", "web", second) for c in fake.calls))
    assert agent.pods.get(first) is None and agent.pods.get(second) is not None


def test_status_written_is_seen_by_the_next_sync_before_the_watch_brings_it(api, make_agent, fake):
    """A sync right after a status write sees that status, even while the pod watch lags behind."""
    release = threading.Event()
    statuses: list[dict] = []

    class SlowPodWatch:
        """The API, but Pod watch events are held back until `release`."""

        def __init__(self, real) -> None:
            self._api = real

        def __getattr__(self, name):
            return getattr(self._api, name)

        def watch(self, rt, **kwargs):
            for change in self._api.watch(rt, **kwargs):
                if rt.kind == "Pod":
                    release.wait(10)
                yield change

    def record(p, ctx):
        statuses.append(copy.deepcopy(p.get("status") or {}))

    fake.on_sync = record
    api.create(pod("web"))
    agent = make_agent(target_api=SlowPodWatch(api))
    try:
        uid = get_pod(api, "web")["metadata"]["uid"]
        assert wait_for(lambda: (get_pod(api, "web").get("status") or {}).get("phase") == "Running")
        agent.queue.add(uid)
        assert wait_for(lambda: len(statuses) >= 2)
        assert statuses[0].get("phase") != "Running" and statuses[1].get("phase") == "Running"
    finally:
        release.set()


def test_status_not_written_onto_a_pod_whose_deletion_began(api, make_agent, fake):
    """A status write conflicting with a deletion begun meanwhile writes nothing: the pod is stopped with its grace."""
    deleted = threading.Event()

    def delete_once(p, ctx):
        if not deleted.is_set():
            deleted.set()
            api.delete(api.resource("pods"), p["metadata"]["name"], namespace="default")

    fake.on_sync = delete_once
    fake.terminating["web"] = 1000  # its containers never finish stopping: the Pod object stays
    make_agent()
    api.create(pod("web", terminationGracePeriodSeconds=30))
    assert wait_for(lambda: ("terminate", "web", 30) in fake.calls)
    current = get_pod(api, "web")
    assert current is not None and current["metadata"].get("deletionTimestamp")
    assert "hostIP" not in (current.get("status") or {})  # the sync's status (FakeSync's has hostIP) never landed
