"""Node registration, the Node status a kubelet posts, and the heartbeat (Lease + status)."""

from __future__ import annotations

import logging

import re
import time

import pytest

from kctl.agent import node as nodes
from kctl.runtime.hostprobe import HostCheck
from kctl.runtime.interface import HostInfo, ImageInfo, RuntimeError_

INFO = HostInfo(cpus=2, memory_bytes=24 * 1024 ** 3, os="Debian GNU/Linux 12 (bookworm)", kernel="6.1.0",
                arch="amd64", runtime_version="podman://4.3.1", hostname="h1")
IMAGES = [ImageInfo(id="sha256:a", names=("localhost/busybox:latest",), size=1000),
          ImageInfo(id="sha256:b", names=(), size=5000)]
T0 = 1_796_227_200.0  # 2026-12-02T16:00:00Z


class FakeHost:
    """A runtime without check_host: `down` makes info/images fail, as a local Podman that stopped."""

    def __init__(self) -> None:
        self.down = False
        self.why = "connection refused"

    def info(self) -> HostInfo:
        if self.down:
            raise RuntimeError_(self.why)
        return INFO

    def list_images(self) -> list[ImageInfo]:
        if self.down:
            raise RuntimeError_(self.why)
        return list(IMAGES)


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def ready(status: dict) -> dict:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


@pytest.fixture
def registered(api):
    return nodes.register_node(api, "h1", podman_url="unix:///run/podman/podman.sock", identity=None,
                               labels={"zone": "a"})


@pytest.fixture
def heartbeat(api, registered):
    host, clock = FakeHost(), Clock()
    beat = nodes.Heartbeat(api, "h1", host, interval=0.05, internal_ip="10.0.0.5", clock=clock)
    beat.host, beat.fake_clock = host, clock
    yield beat
    beat.stop()


# -- registration ------------------------------------------------------------------------------

@pytest.mark.parametrize("identity, annotations", [
    (None, {"kctl.io/podman-url": "ssh://root@h1/run/podman/podman.sock"}),
    ("/keys/id", {"kctl.io/podman-url": "ssh://root@h1/run/podman/podman.sock", "kctl.io/ssh-identity": "/keys/id"}),
], ids=["no-identity", "identity"])
def test_register_creates_node(api, identity, annotations):
    """A missing Node is created with the Podman URL annotations and hostname/os labels."""
    node = nodes.register_node(api, "h1", podman_url="ssh://root@h1/run/podman/podman.sock", identity=identity,
                               labels={"zone": "a"})
    assert node["metadata"]["annotations"] == annotations
    assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "h1", "kubernetes.io/os": "linux", "zone": "a"}
    assert node["metadata"]["uid"]


def test_register_keeps_existing(api, registered):
    """Registering a Node that exists returns it unchanged."""
    again = nodes.register_node(api, "h1", podman_url="unix:///other.sock", identity=None, labels={})
    assert again == registered


# -- node_status ---------------------------------------------------------------------------------

def test_node_status_fields():
    """Capacity, allocatable, nodeInfo, images (largest first), addresses and Ready, as a kubelet posts."""
    status = nodes.node_status(INFO, IMAGES, ready=True, message="", previous=None, now=T0,
                               internal_ip="10.0.0.5")
    assert status["capacity"] == {"cpu": "2", "memory": f"{24 * 1024 ** 2}Ki", "pods": "110"}
    assert status["allocatable"] == status["capacity"]
    assert status["nodeInfo"]["kubeletVersion"] == "kctl-v0.1.0"
    assert status["nodeInfo"]["containerRuntimeVersion"] == "podman://4.3.1"
    assert (status["nodeInfo"]["operatingSystem"], status["nodeInfo"]["architecture"]) == ("linux", "amd64")
    assert status["images"] == [{"names": ["sha256:b"], "sizeBytes": 5000},
                                {"names": ["localhost/busybox:latest"], "sizeBytes": 1000}]
    assert status["addresses"] == [{"type": "InternalIP", "address": "10.0.0.5"},
                                   {"type": "Hostname", "address": "h1"}]
    assert ready(status) == {"type": "Ready", "status": "True", "reason": "KubeletReady",
                             "message": "kubelet is posting ready status",
                             "lastHeartbeatTime": "2026-12-02T16:00:00Z",
                             "lastTransitionTime": "2026-12-02T16:00:00Z"}


@pytest.mark.parametrize("was, now_ready, transition", [
    (True, True, "2026-12-02T16:00:00Z"),
    (False, False, "2026-12-02T16:00:00Z"),
    (True, False, "2026-12-02T16:01:00Z"),
    (False, True, "2026-12-02T16:01:00Z"),
], ids=["ready-stays", "notready-stays", "goes-notready", "goes-ready"])
def test_transition_time(was, now_ready, transition):
    """lastTransitionTime is kept while Ready's status stays, renewed when it flips."""
    first = nodes.node_status(INFO, IMAGES, ready=was, message="x", previous=None, now=T0)
    second = nodes.node_status(INFO, IMAGES, ready=now_ready, message="x", previous=first, now=T0 + 60)
    assert ready(second)["lastTransitionTime"] == transition
    assert ready(second)["lastHeartbeatTime"] == "2026-12-02T16:01:00Z"


def test_runtime_down_keeps_capacity():
    """Without host info (runtime down) the last capacity stays and Ready is False with the error."""
    first = nodes.node_status(INFO, IMAGES, ready=True, message="", previous=None, now=T0)
    down = nodes.node_status(None, None, ready=False, message="boom", previous=first, now=T0 + 5)
    assert down["capacity"] == first["capacity"] and down["images"] == first["images"]
    assert (ready(down)["status"], ready(down)["reason"], ready(down)["message"]) == ("False", "KubeletNotReady",
                                                                                     "boom")


@pytest.mark.parametrize("old, new, changed", [
    ({"conditions": [{"type": "Ready", "lastHeartbeatTime": "a"}]},
     {"conditions": [{"type": "Ready", "lastHeartbeatTime": "b"}]}, False),
    ({"capacity": {"cpu": "1"}}, {"capacity": {"cpu": "2"}}, True),
    (None, {}, False),
], ids=["heartbeat-only", "capacity", "empty"])
def test_status_changed(old, new, changed):
    """A status differing only in heartbeat times has not changed."""
    assert nodes.status_changed(old, new) is changed


# -- the heartbeat -------------------------------------------------------------------------------

def lease(api):
    return api.get(api.resource("leases"), "h1", namespace="kube-node-lease")


def node_obj(api):
    return api.get(api.resource("nodes"), "h1")


def test_beat_creates_lease_and_ready_node(api, heartbeat, registered):
    """The first beat creates kube-node-lease, the Lease, and posts a Ready status."""
    heartbeat.beat()
    spec = lease(api)["spec"]
    assert spec == {"holderIdentity": "h1", "leaseDurationSeconds": 40, "renewTime": "2026-12-02T16:00:00.000000Z"}
    assert lease(api)["metadata"]["ownerReferences"][0]["uid"] == registered["metadata"]["uid"]
    status = node_obj(api)["status"]
    assert ready(status)["status"] == "True"
    assert status["capacity"]["cpu"] == "2"
    assert {"type": "InternalIP", "address": "10.0.0.5"} in status["addresses"]


def test_lease_renewed_each_beat(api, heartbeat):
    """Each beat moves renewTime (microsecond RFC 3339) forward."""
    heartbeat.beat()
    heartbeat.fake_clock.t += 5.25
    heartbeat.beat()
    assert lease(api)["spec"]["renewTime"] == "2026-12-02T16:00:05.250000Z"


def test_status_written_on_change_or_every_fourth_interval(api, heartbeat):
    """Two beats per interval; an unchanged status is written only every 4th interval (8th beat); a change at once."""
    revisions = []
    for _ in range(10):
        heartbeat.beat()
        heartbeat.fake_clock.t += 2.5
        revisions.append(node_obj(api)["metadata"]["resourceVersion"])
    assert len(set(revisions[:8])) == 1 and revisions[7] != revisions[8] == revisions[9]
    heartbeat.host.down = True
    heartbeat.beat()
    assert node_obj(api)["metadata"]["resourceVersion"] != revisions[9]


def test_runtime_down_makes_node_not_ready(api, heartbeat):
    """A reachable host whose runtime does not answer: Ready False with the cause as reason, Lease renewed; back."""
    heartbeat.beat()
    heartbeat.host.down = True
    heartbeat.fake_clock.t += 5
    heartbeat.beat()
    condition = ready(node_obj(api)["status"])
    assert (condition["status"], condition["reason"]) == ("False", "PodmanNotAnswering")
    assert "connection refused" in condition["message"]
    assert node_obj(api)["status"]["capacity"]["cpu"] == "2"
    assert lease(api)["spec"]["renewTime"] == "2026-12-02T16:00:05.000000Z"
    heartbeat.host.down = False
    heartbeat.beat()
    assert ready(node_obj(api)["status"])["status"] == "True"


def test_missing_node_does_not_raise(api, heartbeat):
    """A Node deleted under the heartbeat: the Lease is still renewed, nothing raises."""
    api.delete(api.resource("nodes"), "h1")
    heartbeat.beat()
    assert lease(api)["spec"]["holderIdentity"] == "h1"


def test_thread_beats_until_stopped(api, heartbeat):
    """start() beats every interval in a thread; stop() ends it."""
    heartbeat.start()
    deadline = time.monotonic() + 5
    while heartbeat.beats < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    heartbeat.stop()
    assert heartbeat.beats >= 3
    assert heartbeat._thread is None


def test_rfc3339_micro():
    """renewTime is MicroTime: six fractional digits and Z."""
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", nodes.rfc3339_micro(time.time()))


@pytest.mark.parametrize("node, expected", [
    ({"metadata": {"annotations": {"kctl.io/podman-url": "ssh://root@127.0.0.1:22/run/p.sock"}}}, "127.0.0.1"),
    ({"metadata": {}, "status": {"addresses": [{"type": "InternalIP", "address": "10.1.1.1"}]}}, "10.1.1.1"),
], ids=["ssh-host", "from-status"])
def test_node_address(node, expected):
    """A Node's InternalIP: its status address, else the SSH host of its Podman URL."""
    assert nodes.node_address(node) == expected


class FarHost(FakeHost):
    """A remote host the heartbeat checks over a connection of its own: `cut` makes it unreachable."""

    def __init__(self) -> None:
        super().__init__()
        self.cut = False
        self.suspended: list[str] = []

    def check_host(self, *, timeout: float, details: bool = True, node: str = "") -> HostCheck:
        if self.cut:
            return HostCheck(reachable=False, answering=False, reason=self.why, message=f"node {node}: {self.why}")
        return HostCheck(reachable=True, answering=True, info=INFO, images=list(IMAGES))

    def suspend(self, reason: str) -> None:
        self.suspended.append(reason)

    def resume(self) -> None:
        self.suspended.append("")


def test_silent_host_keeps_lease_and_status_still(api, registered):
    """A host that cannot be reached: no Ready=False, no Lease renewal, no status write at all."""
    host, clock = FarHost(), Clock()
    heartbeat = nodes.Heartbeat(api, "h1", host, interval=2, clock=clock)
    heartbeat.beat()
    renewed, status = lease(api)["spec"]["renewTime"], node_obj(api)["status"]
    host.cut, host.why = True, "HostUnreachable"
    for _ in range(5):
        clock.t += 2
        heartbeat.beat()
        assert ready(node_obj(api)["status"])["status"] == "True"
        assert node_obj(api)["status"] == status
        assert lease(api)["spec"]["renewTime"] == renewed
    # The node lifecycle controller marks it Unknown; the silent agent does not undo that.
    node = node_obj(api)
    ready(node["status"])["status"] = "Unknown"
    api.update_status(node)
    for _ in range(5):
        clock.t += 2
        heartbeat.beat()
    assert ready(node_obj(api)["status"])["status"] == "Unknown"
    assert lease(api)["spec"]["renewTime"] == renewed


def test_silence_logs_each_new_reason_once(api, registered, caplog):
    """A silent host's reason is logged once, and again only when it changes (a refused host key after a restart)."""
    host, clock = FarHost(), Clock()
    heartbeat = nodes.Heartbeat(api, "h1", host, interval=2, clock=clock, monotonic=clock)
    heartbeat.beat()
    host.cut = True
    with caplog.at_level(logging.WARNING, logger="kctl.agent.node"):
        for why in ["ConnectionRefused", "ConnectionRefused", "HostKeyChanged", "HostKeyChanged"]:
            host.why = why
            clock.t += 5
            heartbeat.beat()
    said = [r.getMessage() for r in caplog.records if "no heartbeat until" in r.getMessage()]
    assert [("Refused" in m, "HostKey" in m) for m in said] == [(True, False), (False, True)]


def test_before_ready_gates_the_return(api, registered):
    """Back after silence, the Lease is renewed at once, but the node is Ready only once the fence succeeded."""
    host, clock, answers = FarHost(), Clock(), []
    beat = nodes.Heartbeat(api, "h1", host, interval=0.05, clock=clock, before_ready=lambda: answers.pop(0))
    answers.append(True)
    beat.beat()  # at start
    assert lease(api)["spec"]["renewTime"] == "2026-12-02T16:00:00.000000Z"
    host.cut = True
    clock.t += 5
    beat.beat()
    host.cut = False
    answers.extend([False, True])
    clock.t += 5
    node = node_obj(api)  # meanwhile the controller marked it Unknown
    ready(node["status"])["status"] = "Unknown"
    api.update_status(node)
    beat.beat()  # the fence failed: the Lease is renewed (the host answered) but nothing says Ready
    assert lease(api)["spec"]["renewTime"] == "2026-12-02T16:00:10.000000Z"
    assert ready(node_obj(api)["status"])["status"] == "Unknown"
    clock.t += 5
    beat.beat()
    assert ready(node_obj(api)["status"])["status"] == "True"
    assert lease(api)["spec"]["renewTime"] == "2026-12-02T16:00:15.000000Z"
    clock.t += 5
    beat.beat()  # answering all along: the fence is not asked again
    assert answers == []
