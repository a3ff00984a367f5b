"""The heartbeat when a host cannot be reached: no heartbeat written, the cause named once, pod work paused."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from kctl.agent import node as nodes
from kctl.agent.agent import NodeAgent
from kctl.runtime.hostprobe import UNREACHABLE_REASONS, HostCheck
from kctl.runtime.interface import HostInfo, ImageInfo, RuntimeError_

INFO = HostInfo(cpus=2, memory_bytes=8 * 1024 ** 3, os="Debian", kernel="6.1", arch="amd64",
                runtime_version="podman://4.3.1", hostname="h1")
IMAGES = [ImageInfo(id="sha256:a", names=("localhost/busybox:latest",), size=1000)]
T0 = 1_796_227_200.0
INTERVAL = 2.0
GRACE = 10.0
SEE_HEAL = 1.2


class Clock:
    """A clock the fake host moves forward by what its calls would cost."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class RemoteHost:
    """A remote Podman host: pod-work calls go over a shared tunnel that hangs 30 s when cut;
    check_host looks over a connection of its own, bounded by its timeout."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.cause = ""  # "": reachable; else an UNREACHABLE_REASONS or NOT_ANSWERING reason
        self.calls: list[str] = []

    def _tunnel_call(self):
        if self.cause:
            self.clock.t += 30.0  # the shared tunnel's request timeout, behind TCP retransmission
            raise RuntimeError_("cannot reach the Podman service: timed out")

    def info(self) -> HostInfo:
        self._tunnel_call()
        return INFO

    def list_images(self) -> list[ImageInfo]:
        self._tunnel_call()
        return list(IMAGES)

    def check_host(self, *, timeout: float, details: bool = True, node: str = "") -> HostCheck:
        self.calls.append("check")
        if self.cause in UNREACHABLE_REASONS:
            self.clock.t += timeout
            return HostCheck(reachable=False, answering=False, reason=self.cause,
                             message=f"node {node}: {self.cause} at 10.0.0.1:22; run: kctl node trust {node}")
        self.clock.t += 0.05
        if self.cause:
            return HostCheck(reachable=True, answering=False, reason=self.cause, message=f"node {node}: {self.cause}")
        return HostCheck(reachable=True, answering=True, info=INFO if details else None,
                         images=list(IMAGES) if details else None)

    def suspend(self, reason: str) -> None:
        self.calls.append("suspend")

    def resume(self) -> None:
        self.calls.append("resume")


@pytest.fixture
def h1(api):
    return nodes.register_node(api, "h1", podman_url="ssh://root@10.0.0.1/run/podman/podman.sock")


@pytest.fixture
def setup(api, h1):
    clock = Clock()
    host = RemoteHost(clock)
    beat = nodes.Heartbeat(api, "h1", host, interval=INTERVAL, clock=clock, monotonic=clock)
    return beat, host, clock


def node_obj(api) -> dict:
    return api.get(api.resource("nodes"), "h1")


def ready(api) -> dict:
    return next(c for c in node_obj(api)["status"]["conditions"] if c["type"] == "Ready")


def signature(api) -> tuple:
    """What the node lifecycle controller counts as a heartbeat: Lease renewTime, Ready lastHeartbeatTime."""
    lease = api.get(api.resource("leases"), "h1", namespace="kube-node-lease")
    return lease["spec"]["renewTime"], ready(api).get("lastHeartbeatTime")


def node_events(api) -> list[dict]:
    return [e for e in api.list(api.resource("events"), namespace="default")[0]
            if e["involvedObject"]["kind"] == "Node"]


@pytest.mark.parametrize("cause", UNREACHABLE_REASONS)
def test_unreachable_host_writes_no_heartbeat(api, setup, cause):
    """Unreachable (any cause): no Ready=False, no Lease renewal, no status write; the cause annotated; pod work
    suspended."""
    beat, host, clock = setup
    beat.beat()
    before, status = signature(api), node_obj(api)["status"]
    host.cause = cause
    for _ in range(10):
        beat.beat()
        clock.t += INTERVAL
        assert signature(api) == before
        assert node_obj(api)["status"] == status
    annotations = node_obj(api)["metadata"]["annotations"]
    assert annotations[nodes.ANNOTATION_UNREACHABLE_REASON] == cause
    assert "kctl node trust h1" in annotations[nodes.ANNOTATION_UNREACHABLE_MESSAGE]
    assert annotations[nodes.ANNOTATION_UNREACHABLE_SINCE] == nodes.rfc3339(T0 + 0.05 + nodes.check_timeout(INTERVAL))
    assert "suspend" in host.calls and beat.paused


@pytest.mark.parametrize("cause", ["PodmanSocketMissing", "PodmanNotAnswering"])
def test_reachable_host_without_podman_posts_not_ready(api, setup, cause):
    """SSH answers but Podman does not: the host itself says Ready=False (reason = cause); the Lease is renewed."""
    beat, host, clock = setup
    beat.beat()
    host.cause = cause
    clock.t += INTERVAL
    before = signature(api)
    beat.beat()
    assert (ready(api)["status"], ready(api)["reason"]) == ("False", cause)
    assert signature(api) != before
    assert nodes.ANNOTATION_UNREACHABLE_REASON not in node_obj(api)["metadata"].get("annotations", {})
    assert "suspend" not in host.calls


def test_one_warning_event_per_change_of_cause_repeats_counted(api, setup):
    """Each change of cause is one Warning Event on the Node; the same cause again bumps its count; heal clears
    the annotations."""
    beat, host, clock = setup
    for cause in ["", "HostKeyChanged", "HostKeyChanged", "HostKeyChanged", "", "", "HostKeyChanged",
                  "ConnectionRefused", "ConnectionRefused", ""]:
        host.cause = cause
        beat.beat()
        clock.t += INTERVAL
    events = sorted((e["type"], e["reason"], e.get("count", 1)) for e in node_events(api))
    assert events == [("Warning", "ConnectionRefused", 1), ("Warning", "HostKeyChanged", 2)]
    annotations = node_obj(api)["metadata"].get("annotations") or {}
    assert not set(annotations) & set(nodes.UNREACHABLE_ANNOTATIONS)
    assert ready(api)["status"] == "True"


def test_lasting_cause_logged_once_then_at_most_once_a_minute(api, setup, caplog):
    """A cause lasting 200 s is logged when it starts and then at most once a minute, never per beat."""
    beat, host, clock = setup
    beat.beat()
    host.cause = "HostKeyChanged"
    with caplog.at_level(logging.INFO, logger="kctl"):
        start = clock.t
        while clock.t - start < 200:
            beat.beat()
            clock.t += INTERVAL
    said = [r.getMessage() for r in caplog.records if "HostKeyChanged" in r.getMessage()]
    assert 2 <= len(said) <= 1 + 200 // 60
    assert len(caplog.records) <= 6


class CutHost(RemoteHost):
    """A host cut off from `cut` to `heal` (fake time); its check knocks all along its timeout, so a heal
    during a check is seen SEE_HEAL s later (ARP, then a fresh ssh login on a loaded machine)."""

    def __init__(self, clock: Clock, cut: float, heal: float) -> None:
        super().__init__(clock)
        self.cut, self.heal = cut, heal

    def check_host(self, *, timeout: float, details: bool = True, node: str = "") -> HostCheck:
        start = self.clock.t
        self.cause = "HostUnreachable" if self.cut <= start < self.heal else ""
        if self.cause and start + timeout > self.heal:  # healed while knocking
            self.clock.t = self.heal + SEE_HEAL
            self.cause = ""
        return super().check_host(timeout=timeout, details=details, node=node)


@pytest.mark.parametrize("outage", [7.0, GRACE - INTERVAL - 0.5], ids=["7s", "grace-minus-interval"])
@pytest.mark.parametrize("phase", [0.0, 0.4, 1.0, 1.6, 1.99])
@pytest.mark.parametrize("fence", [0.0, 3.0], ids=["quick-fence", "slow-fence"])
def test_short_outage_never_leaves_heartbeat_gap_of_grace(api, h1, outage, phase, fence):
    """A cut shorter than grace - interval, wherever it falls between beats and however long the fence takes
    after it: the heartbeats the controller sees never stop for the grace period; after the heal the next one
    comes within one interval + 2 s."""
    clock = Clock()
    cut = T0 + 20 + phase
    host = CutHost(clock, cut, cut + outage)

    def fence_run() -> bool:
        clock.t += fence  # the fence lists and removes over the pod work's fresh tunnel
        return True

    beat = nodes.Heartbeat(api, "h1", host, interval=INTERVAL, clock=clock, monotonic=clock, before_ready=fence_run)
    renew = beat.renew_lease
    seen: list[tuple[float, str]] = []  # (time, renewTime): what the controller counts

    def renew_and_note() -> dict:
        lease = renew()
        seen.append((clock.t, lease["spec"]["renewTime"]))
        return lease

    beat.renew_lease = renew_and_note  # type: ignore[method-assign]
    due = clock.t
    while clock.t < T0 + 60:  # as Heartbeat._run schedules beats
        started = clock.t
        beat.beat()
        due += beat.period
        if due < clock.t or beat._looking_for_host(clock.t - started):
            due = clock.t
        clock.t = due
    gaps = [b[0] - a[0] for a, b in zip(seen, seen[1:])]
    assert max(gaps) < GRACE, gaps
    first_after_heal = next(t for t, _ in seen if t >= host.heal)
    assert first_after_heal - host.heal <= INTERVAL + 2


def test_beat_never_waits_behind_pod_work(api, h1):
    """A pod-work call hung on the shared tunnel (here: blocked forever) does not delay a beat."""
    release = threading.Event()

    class Hung(RemoteHost):
        def info(self) -> HostInfo:
            release.wait(60)
            raise RuntimeError_("timed out")

        list_images = info  # type: ignore[assignment]

    host = Hung(Clock())
    beat = nodes.Heartbeat(api, "h1", host, interval=INTERVAL)
    def pod_work() -> None:
        try:
            host.info()
        except RuntimeError_:
            pass

    blocked = threading.Thread(target=pod_work, daemon=True)  # pod work, stuck
    blocked.start()
    done = threading.Event()
    runner = threading.Thread(target=lambda: (beat.beat(), done.set()), daemon=True)
    try:
        runner.start()
        assert done.wait(10), "the beat waited behind pod work"
        assert ready(api)["status"] == "True"
    finally:
        release.set()
        runner.join(10)
        blocked.join(10)


class FailingAPI:
    """An API every write to which fails: a node-mode agent whose control plane cannot be reached."""

    def __init__(self, api) -> None:
        self._api = api

    def __getattr__(self, name):
        if name in ("create", "update", "update_status", "patch", "get", "list"):
            def fail(*args, **kwargs):
                raise ConnectionError("ssh: connect to host control port 22: Connection timed out")
            return fail
        return getattr(self._api, name)


def test_node_mode_control_plane_unreachable(api, h1, caplog):
    """Node mode (local socket): the control plane unreachable means nothing is written, beats never raise, and
    the failure is logged once, not per beat."""
    clock = Clock()
    beat = nodes.Heartbeat(FailingAPI(api), "h1", RemoteHost(clock), interval=INTERVAL, clock=clock, monotonic=clock)
    with caplog.at_level(logging.WARNING, logger="kctl"):
        for _ in range(20):
            beat.beat()
            clock.t += INTERVAL
    assert api.list(api.resource("leases"), namespace="kube-node-lease")[0] == []
    assert "status" not in node_obj(api)
    assert len(caplog.records) <= 3


def test_node_mode_runtime_down_is_not_ready_not_unknown(api, h1):
    """Node mode: a local Podman that stops answering is Ready=False (the host reports it), the Lease renewed."""

    class LocalDown:
        def info(self) -> HostInfo:
            raise RuntimeError_("cannot reach the Podman service: [Errno 2] No such file or directory")

        list_images = info

    clock = Clock()
    beat = nodes.Heartbeat(api, "h1", LocalDown(), interval=INTERVAL, clock=clock)
    beat.beat()
    assert (ready(api)["status"], ready(api)["reason"]) == ("False", "PodmanNotAnswering")
    assert api.get(api.resource("leases"), "h1", namespace="kube-node-lease")["spec"]["renewTime"]


def test_agent_pauses_pod_work_while_host_unreachable(api, h1, monkeypatch):
    """While the heartbeat finds the host unreachable, a pod's sync is not attempted (no per-pod errors or logs)."""
    from kctl.agent import podsync

    def no_sync(*args, **kwargs):
        raise AssertionError("pod synced while the host is unreachable")

    monkeypatch.setattr(podsync, "sync_pod", no_sync)
    clock = Clock()
    host = RemoteHost(clock)
    uid = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                      "spec": {"nodeName": "h1", "containers": [{"name": "c", "image": "busybox"}]}})["metadata"]["uid"]
    agent = NodeAgent(api, "h1", host, heartbeat_interval=INTERVAL, clock=clock)
    agent.start_informers()  # the pods known, no workers
    host.cause = "HostUnreachable"
    agent.heartbeat.beat()
    try:
        assert agent.pods.informer.wait_for_sync(10) and agent.pods.get(uid) is not None
        assert agent.queue.get(timeout=1) == uid  # the informer's add
        agent.queue.done(uid)
        assert agent.process(uid) is True
        deadline = time.monotonic() + 10
        while agent.queue.get(timeout=0.1) != uid:  # re-queued after one interval
            assert time.monotonic() < deadline
    finally:
        agent.stop(5)


class SlowHost(RemoteHost):
    """A host whose checks in `slow` only run out of time (no definite cause)."""

    def __init__(self, clock: Clock, slow: list[bool]) -> None:
        super().__init__(clock)
        self.slow = slow

    def check_host(self, *, timeout: float, details: bool = True, node: str = "") -> HostCheck:
        if not details and self.slow.pop(0):  # each beat pings first (details come after, if due)
            self.clock.t += timeout
            return HostCheck(reachable=False, answering=False, reason="HostUnreachable",
                             message=f"node {node}: no answer", definite=False)
        return super().check_host(timeout=timeout, details=details, node=node)


@pytest.mark.parametrize("slow, declared", [
    ([False, True, False, True, False], False),
    ([False, True, True, False], True),
], ids=["one-slow-beat-at-a-time", "two-in-a-row"])
def test_a_single_slow_check_is_not_unreachable(api, h1, slow, declared):
    """A check that only ran out of time renews nothing, but the host is called unreachable (pod work suspended,
    cause annotated and evented) only when the next check fails too."""
    clock = Clock()
    host = SlowHost(clock, list(slow))
    beat = nodes.Heartbeat(api, "h1", host, interval=INTERVAL, clock=clock, monotonic=clock)
    for _ in slow:
        beat.beat()
        clock.t += INTERVAL
    assert ("suspend" in host.calls) is declared
    assert bool(node_events(api)) is declared
