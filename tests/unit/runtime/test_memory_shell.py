"""MemoryRuntime's small shell: what commands print and exit with, SIGTERM by PID 1, logs over time.

These are the in-memory halves of behaviours the runtime contract suite
(tests/integration/contract) checks against Podman, here on a FakeClock.
"""

from __future__ import annotations

import pytest

from kctl.runtime.interface import ContainerSpec, ExecResult, Mount, PodSandboxSpec, PortMapping, RuntimeError_
from kctl.runtime.fakeshell import Script, ignores_sigterm, interpret
from kctl.runtime.memory import FakeClock, MemoryRuntime

IMAGE = "localhost/busybox:demo"


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock."""
    return FakeClock()


@pytest.fixture
def runtime(clock: FakeClock) -> MemoryRuntime:
    """A MemoryRuntime holding IMAGE, with one pod "p"."""
    memory = MemoryRuntime(images={IMAGE}, clock=clock)
    memory.create_pod(PodSandboxSpec(name="p", labels={"pod": "p"}))
    return memory


def start(runtime: MemoryRuntime, command: list[str] | None = None, **fields: object) -> str:
    pod_id = runtime.list_pods({"pod": "p"})[0].id
    spec = ContainerSpec(**{"name": f"c{len(runtime.container_ids())}", "image": IMAGE, "labels": {},
                            "command": command, **fields})
    container_id = runtime.create_container(pod_id, spec)
    runtime.start_container(container_id)
    return container_id


@pytest.mark.parametrize(("argv", "expected"), [
    (["echo", "a", "b"], Script(((0.0, 1, b"a b\n"),), 0, 0.0)),
    (["echo", "-n", "x"], Script(((0.0, 1, b"x"),), 0, 0.0)),
    (["sh", "-c", "echo out; echo err >&2; exit 4"], Script(((0.0, 1, b"out\n"), (0.0, 2, b"err\n")), 4, 0.0)),
    (["sh", "-c", "echo $A ${B}.; echo $NONE."], Script(((0.0, 1, b"1 2.\n"), (0.0, 1, b".\n")), 0, 0.0)),
    (["sh", "-c", "echo a; sleep 1.5; echo b"], Script(((0.0, 1, b"a\n"), (1.5, 1, b"b\n")), 0, 1.5)),
    (["sh", "-c", "false && echo no || echo yes"], Script(((0.0, 1, b"yes\n"),), 0, 0.0)),
    (["sh", "-c", "true || exit 9"], Script((), 0, 0.0)),
    (["false"], Script((), 1, 0.0)),
    (["pwd"], Script(((0.0, 1, b"/w\n"),), 0, 0.0)),
    (["cat"], Script(((0.0, 1, b"in"),), 0, 0.0)),
    (["cat", "/known"], Script(((0.0, 1, b"file"),), 0, 0.0)),
    (["sleep", "infinity"], Script((), None, 0.0)),
    (["cat", "/unknown"], None),
    (["httpd", "-f"], None),
    (["sh", "-c", "touch /x 2>/dev/null || echo ro"], None),
    (["sh", "-c", "sleep 1 & wait"], None),
    ([], None),
    (["sh", "-c", "trap 'exit 1' TERM; echo ready"], Script(((0.0, 1, b"ready\n"),), 0, 0.0)),
], ids=["echo", "echo-n", "stdout-stderr-exit", "env", "sleep-between", "and-or", "or-skips", "false", "pwd",
        "cat-stdin", "cat-file", "sleep-infinity", "cat-unknown-file", "unknown-command", "redirect", "background",
        "empty", "trap-skipped"])
def test_interpret(argv: list[str], expected: Script | None) -> None:
    """interpret runs what it knows as a shell would, and gives up (None) on anything else."""
    files = {"/known": b"file"}
    assert interpret(argv, env={"A": "1", "B": "2"}, stdin=b"in", workdir="/w", read=files.get) == expected


@pytest.mark.parametrize(("argv", "expected"), [
    (["sh", "-c", "echo a; sleep 1; httpd -f; echo b"], Script(((0.0, 1, b"a\n"),), None, 1.0, complete=False)),
    (["sh", "-c", "echo a; exit 2"], Script(((0.0, 1, b"a\n"),), 2, 0.0)),
    (["httpd"], Script((), None, 0.0, complete=False)),
], ids=["stops-at-unknown", "complete", "unknown-first"])
def test_interpret_partial(argv: list[str], expected: Script) -> None:
    """With partial, what runs before the first unknown command is kept (complete=False)."""
    assert interpret(argv, partial=True) == expected


def test_a_server_started_by_a_script_logs_what_came_first(runtime: MemoryRuntime) -> None:
    """`echo starting; httpd -f` logs "starting" and keeps running, as a shell would."""
    container_id = start(runtime, ["sh", "-c", "echo starting; httpd -f"])
    assert runtime.inspect_container(container_id).state == "running"
    assert list(runtime.logs(container_id)) == [b"starting\n"]


@pytest.mark.parametrize(("argv", "ignores"), [
    (["sleep", "1000"], True), (["/bin/sh", "-c", "sleep 5"], True), (["sh", "-c", "trap 'exit' TERM; wait"], False),
    (["httpd", "-f"], False), ([], False),
], ids=["sleep", "shell", "trap", "server", "image-default"])
def test_ignores_sigterm(argv: list[str], ignores: bool) -> None:
    """A shell or sleep as PID 1 without a trap dies only by SIGKILL."""
    assert ignores_sigterm(argv) is ignores


def test_stop_of_a_pid_1_sleep_waits_the_timeout_then_kills(runtime: MemoryRuntime, clock: FakeClock) -> None:
    """Stopping `sleep` as PID 1 takes the timeout and gives 137; a server gives 143 at once."""
    sleeper, server = start(runtime, ["sleep", "1000"]), start(runtime)
    before = clock()
    runtime.stop_container(sleeper, timeout=7)
    assert runtime.inspect_container(sleeper).exit_code == 137 and clock() == before + 7
    runtime.stop_container(server, timeout=7)
    assert runtime.inspect_container(server).exit_code == 143 and clock() == before + 7


def test_logs_follow_the_clock(runtime: MemoryRuntime, clock: FakeClock) -> None:
    """Output written later appears later; since and timestamps narrow and stamp it; a restart appends."""
    container_id = start(runtime, ["sh", "-c", "echo one; sleep 2; echo two; sleep 1"])
    started = clock()
    assert list(runtime.logs(container_id)) == [b"one\n"]
    clock.advance(2.5)
    assert list(runtime.logs(container_id)) == [b"one\n", b"two\n"]
    assert list(runtime.logs(container_id, since=started + 1)) == [b"two\n"]
    stamped = list(runtime.logs(container_id, tail=1, timestamps=True))
    assert len(stamped) == 1 and stamped[0].endswith(b"Z two\n") and stamped[0][:4].isdigit()
    clock.advance(1)
    assert runtime.inspect_container(container_id).exit_code == 0
    runtime.start_container(container_id)
    assert list(runtime.logs(container_id)) == [b"one\n", b"two\n", b"one\n"]


def test_a_stopped_container_loses_what_it_would_have_written(runtime: MemoryRuntime, clock: FakeClock) -> None:
    """Output planned after the container stopped never reaches the log."""
    container_id = start(runtime, ["sh", "-c", "echo one; sleep 5; echo two"])
    runtime.stop_container(container_id, timeout=1)
    clock.advance(10)
    assert list(runtime.logs(container_id)) == [b"one\n"]


def test_exec_runs_known_commands_after_rules(runtime: MemoryRuntime, clock: FakeClock) -> None:
    """exec runs known commands (cat of written files, env), rules still win, sleeps move the clock."""
    container_id = start(runtime, ["sleep", "1000"], env={"X": "y"})
    runtime.write_files(container_id, "/etc/app", {"conf": (b"k=v\n", 0o644)})
    assert runtime.exec(container_id, ["cat", "/etc/app/conf"]) == ExecResult(0, b"k=v\n", b"")
    assert runtime.exec(container_id, ["sh", "-c", "echo $X >&2; exit 2"]) == ExecResult(2, b"", b"y\n")
    assert runtime.exec(container_id, ["cat", "/tmp/healthy"]) == ExecResult(0, b"", b"")  # unknown: 0
    runtime.set_exec_result(ExecResult(5, b"rule", b""), argv=["cat", "/etc/app/conf"])
    assert runtime.exec(container_id, ["cat", "/etc/app/conf"]).exit_code == 5
    before = clock()
    with pytest.raises(RuntimeError_, match="timed out"):
        runtime.exec(container_id, ["sleep", "10"], timeout=2)
    assert clock() == before + 2


def test_the_main_process_reads_files_written_before_start(runtime: MemoryRuntime) -> None:
    """A container's `cat` reads what write_files put into its volume before it started."""
    runtime.create_volume("v", {})
    pod_id = runtime.list_pods({"pod": "p"})[0].id
    container_id = runtime.create_container(pod_id, ContainerSpec(
        name="reader", image=IMAGE, labels={}, command=["cat", "/v/f"], mounts=(Mount(target="/v", volume="v"),)))
    runtime.write_files(container_id, "/v", {"f": (b"data\n", 0o644)})
    runtime.start_container(container_id)
    assert runtime.inspect_container(container_id).exit_code == 0
    assert list(runtime.logs(container_id)) == [b"data\n"]


def test_host_ports_and_localhost_pulls_as_podman(runtime: MemoryRuntime) -> None:
    """A taken host port fails a second pod (nothing left); a present localhost/ image needs no pull."""
    port = (PortMapping(container_port=80, host_port=18080),)
    runtime.create_pod(PodSandboxSpec(name="a", labels={"x": "a"}, port_mappings=port))
    with pytest.raises(RuntimeError_, match="address already in use"):
        runtime.create_pod(PodSandboxSpec(name="b", labels={"x": "b"}, port_mappings=port))
    assert runtime.list_pods({"x": "b"}) == []
    runtime.pull_image(IMAGE)
