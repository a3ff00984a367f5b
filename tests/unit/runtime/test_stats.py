"""Usage samples: Podman's stats answer and /proc parsed (kctl.runtime.podman.stats), and MemoryRuntime's fakes."""

from __future__ import annotations

import pytest

from kctl.runtime.interface import (LABEL_CONTAINER, LABEL_MANAGED, LABEL_POD_UID, ContainerSpec, ExecResult,
                                    HostStats, PodSandboxSpec, RuntimeError_)
from kctl.runtime.memory import FakeClock, MemoryRuntime
from kctl.runtime.podman.stats import HOST_STATS_COMMAND, Stats, parse_container_stats, parse_host_stats

BURN = "c0b363c4e90e1a5eef73b8b118a406388ed0dedf9eade6385e0542130c1fceea"
IDLE = "6ca567bd40ee9845694a891c014fff4e97727da08c63af497503b5a113bac8fc"
#: `GET /libpod/containers/stats?stream=false` of Podman 4.3.1 (this machine), two containers
PODMAN_4_3_STATS = {
    "Error": None,
    "Stats": [
        {"AvgCPU": 1.289, "ContainerID": IDLE, "Name": "idle", "PerCPU": [26231300, 0], "CPU": 1.289,
         "CPUNano": 26231300, "CPUSystemNano": 16000000, "SystemNano": 1796423579409479614, "MemUsage": 237568,
         "MemLimit": 25276203008, "MemPerc": 0.00094, "NetInput": 516, "NetOutput": 1302, "BlockInput": 0,
         "BlockOutput": 0, "PIDs": 1, "UpTime": 26231300, "Duration": 26231300},
        {"AvgCPU": 83.6, "ContainerID": BURN, "Name": "burn", "PerCPU": [27284164, 1896013543], "CPU": 83.6,
         "CPUNano": 1923297707, "CPUSystemNano": 8000000, "SystemNano": 1796423579410302026, "MemUsage": 471040,
         "MemLimit": 25276203008, "MemPerc": 0.0019, "NetInput": 426, "NetOutput": 1736, "BlockInput": 0,
         "BlockOutput": 0, "PIDs": 1, "UpTime": 1923297707, "Duration": 1923297707},
    ],
}
PROC = """cpu  2000 50 1000 90000 700 30 20 10 0 0
cpu0 1000 25 500 45000 350 15 10 5 0 0
intr 12345
MemTotal:       24683792 kB
MemFree:        23185228 kB
MemAvailable:   23795416 kB
Buffers:           35012 kB
"""


def test_container_stats_joined_with_listed_labels() -> None:
    """Each listed container gets its cumulative CPU ns, memory bytes, Podman's clock (s) and its labels."""
    listed = [{"Id": BURN, "Labels": {"app": "burn"}}, {"Id": IDLE, "Labels": {"app": "idle"}}]
    burn, idle = parse_container_stats(PODMAN_4_3_STATS, listed)
    assert (burn.id, burn.cpu_nanos, burn.memory_bytes, burn.labels) == (BURN, 1923297707, 471040, {"app": "burn"})
    assert burn.timestamp == pytest.approx(1796423579.410302)
    assert (idle.id, idle.cpu_nanos, idle.memory_bytes) == (IDLE, 26231300, 237568)


@pytest.mark.parametrize("payload, listed, expected", [
    (PODMAN_4_3_STATS, [{"Id": "gone", "Labels": {}}], []),
    ({"Error": None, "Stats": []}, [{"Id": BURN}], []),
    ({"Error": None, "Stats": None}, [{"Id": BURN}], []),
], ids=["stopped-in-between", "empty", "null-stats"])
def test_container_stats_leave_out_what_podman_did_not_sample(payload, listed, expected) -> None:
    """A container listed but absent from the stats answer (it stopped meanwhile) is left out."""
    assert parse_container_stats(payload, listed) == expected


@pytest.mark.parametrize("payload, message", [
    ({"Error": {"cause": "no such container", "message": "no such container"}, "Stats": None},
     "container stats: {'cause': 'no such container', 'message': 'no such container'}"),
    ([1, 2], "container stats: unexpected answer '[1, 2]'"),
], ids=["error", "not-an-object"])
def test_container_stats_error_answer_is_one_runtime_error(payload, message) -> None:
    """Podman's error answer (or a malformed one) is one RuntimeError_ line."""
    with pytest.raises(RuntimeError_) as error:
        parse_container_stats(payload, [{"Id": BURN}])
    assert str(error.value) == message


def test_host_stats_from_proc() -> None:
    """Busy ticks (user nice system irq softirq steal; not idle, iowait) become ns; memory is total - available."""
    stats = parse_host_stats(PROC, timestamp=5.0)
    assert stats == HostStats(cpu_nanos=(2000 + 50 + 1000 + 30 + 20 + 10) * 10_000_000,
                              memory_used_bytes=(24683792 - 23795416) * 1024, timestamp=5.0)


@pytest.mark.parametrize("text", ["MemTotal: 1 kB\nMemAvailable: 1 kB\n", "cpu 1 2 3 4\nMemTotal: 1 kB\n", ""],
                         ids=["no-cpu", "no-available", "empty"])
def test_host_stats_missing_lines_are_one_error(text: str) -> None:
    """/proc output without the cpu, MemTotal or MemAvailable line is a RuntimeError_ naming them."""
    with pytest.raises(RuntimeError_, match="lacks the cpu, MemTotal or MemAvailable line"):
        parse_host_stats(text, timestamp=0.0)


class _FakeHost(Stats):
    """Stats over a run_on_host that answers what the test says (no Podman)."""

    _timeout = 5.0

    def __init__(self, result: ExecResult) -> None:
        self.result = result
        self.argv: list[str] = []

    def run_on_host(self, argv: list[str], *, stdin: bytes | None = None, timeout: float = 30.0) -> ExecResult:
        self.argv = argv
        return self.result


def test_podman_host_stats_runs_one_command_on_the_host() -> None:
    """host_stats reads /proc/stat and /proc/meminfo with one command on the runtime's host."""
    host = _FakeHost(ExecResult(0, PROC.encode(), b""))
    assert host.host_stats().memory_used_bytes == (24683792 - 23795416) * 1024
    assert host.argv == HOST_STATS_COMMAND == ["cat", "/proc/stat", "/proc/meminfo"]


def test_podman_host_stats_failure_is_one_line() -> None:
    """A failing command on the host is one RuntimeError_ with its stderr."""
    host = _FakeHost(ExecResult(1, b"", b"cat: /proc/stat: No such file\n"))
    with pytest.raises(RuntimeError_, match=r"^host stats: cat /proc/stat /proc/meminfo: cat: /proc/stat: No such"):
        host.host_stats()


def _running(runtime: MemoryRuntime, name: str, *, uid: str = "u1") -> str:
    pod = runtime.create_pod(PodSandboxSpec(name=f"pod-{uid}", labels={LABEL_MANAGED: "true", LABEL_POD_UID: uid}))
    labels = {LABEL_MANAGED: "true", LABEL_POD_UID: uid, LABEL_CONTAINER: name}
    cid = runtime.create_container(pod.id, ContainerSpec(name=name, image="img", labels=labels))
    runtime.start_container(cid)
    return cid


def test_memory_runtime_reports_what_was_set_for_running_containers() -> None:
    """MemoryRuntime's container_stats: running containers with the labels, their set usage (0 unset), the clock."""
    clock = FakeClock(start=100.0)
    runtime = MemoryRuntime(images={"img"}, clock=clock)
    busy, quiet = _running(runtime, "busy"), _running(runtime, "quiet", uid="u2")
    stopped = _running(runtime, "stopped", uid="u3")
    runtime.stop_container(stopped, timeout=0)
    runtime.set_usage(busy, cpu_nanos=5_000_000_000, memory_bytes=3 << 20)
    by_id = {s.id: s for s in runtime.container_stats({LABEL_MANAGED: "true"})}
    assert set(by_id) == {busy, quiet}
    assert (by_id[busy].cpu_nanos, by_id[busy].memory_bytes, by_id[busy].timestamp) == (5_000_000_000, 3 << 20,
                                                                                        clock())
    assert (by_id[quiet].cpu_nanos, by_id[quiet].memory_bytes) == (0, 0)
    assert by_id[busy].labels[LABEL_CONTAINER] == "busy"
    assert [s.id for s in runtime.container_stats({LABEL_POD_UID: "u2"})] == [quiet]


def test_memory_runtime_host_usage_and_stats_error() -> None:
    """host_stats reports host_usage at the clock's time; stats_error makes both calls fail."""
    clock = FakeClock(start=100.0)
    runtime = MemoryRuntime(clock=clock)
    runtime.host_usage = HostStats(cpu_nanos=7, memory_used_bytes=9, timestamp=0.0)
    assert runtime.host_stats() == HostStats(cpu_nanos=7, memory_used_bytes=9, timestamp=100.0)
    runtime.stats_error = "connection refused"
    with pytest.raises(RuntimeError_, match="connection refused"):
        runtime.container_stats({})
    with pytest.raises(RuntimeError_, match="connection refused"):
        runtime.host_stats()
