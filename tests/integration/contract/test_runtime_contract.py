"""The Runtime contract: every test here runs on MemoryRuntime and on PodmanRuntime with the same assertions.

The fixtures (conftest.py) give one runtime per kind and a shared pod; what differs between
the two is a bug of the in-memory runtime (kctl/runtime/memory.py follows Podman), except
where a test says why a case cannot be asked of both.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Callable, TypeVar

import pytest

from kctl.runtime.interface import (
    DEATH_EVENTS,
    LABEL_MANAGED,
    LABEL_POD_UID,
    ContainerEvent,
    ContainerSpec,
    ContainerState,
    ExecSession,
    ImageNotFound,
    Mount,
    NotFoundInRuntime,
    PodSandbox,
    PodSandboxSpec,
    PortMapping,
    Runtime,
    RuntimeError_,
)

from ..conftest import DEMO_IMAGE
from .conftest import CONTRACT_LABEL, RUN, contract_labels, unique

pytestmark = pytest.mark.integration

T = TypeVar("T")
DEADLINE = 20.0  # seconds a container may take to get somewhere on a loaded 2-core machine


# -- helpers


def wait_for(probe: Callable[[], T | None], *, what: str, timeout: float = DEADLINE) -> T:
    """Poll `probe` until it returns something truthy; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not (result := probe()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)
    return result


def create(runtime: Runtime, pod: PodSandbox, *, labels: dict[str, str] | None = None,
           **fields: object) -> str:
    """Create (not start) a container of the demo image in `pod`."""
    spec = ContainerSpec(**{"name": unique("ctr"), "image": DEMO_IMAGE,
                            "labels": contract_labels(**(labels or {})), **fields})
    return runtime.create_container(pod.id, spec)


def run(runtime: Runtime, pod: PodSandbox, **fields: object) -> str:
    """Create and start a container of the demo image in `pod`."""
    container_id = create(runtime, pod, **fields)
    runtime.start_container(container_id)
    return container_id


def wait_exited(runtime: Runtime, container_id: str) -> ContainerState:
    return wait_for(lambda: (state := runtime.inspect_container(container_id)).state == "exited" and state,
                    what=f"container {container_id[:12]} exits")


def log_lines(runtime: Runtime, container_id: str, **options: object) -> list[str]:
    return [chunk.decode() for chunk in runtime.logs(container_id, **options)]  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def sleeper(runtime: Runtime, pod: PodSandbox) -> str:
    """A running container of the shared pod, for exec."""
    return run(runtime, pod, command=["sleep", "1000"], env={"GREETING": "hi"}, working_dir="/work")


# -- host


def test_info_describes_the_host(runtime: Runtime) -> None:
    """info() gives capacity and identity of the host."""
    info = runtime.info()
    assert info.cpus >= 1 and info.memory_bytes > 1 << 20
    assert info.os == "linux" and info.kernel and info.arch and info.hostname
    assert "://" in info.runtime_version


# -- pod sandboxes


def test_pods_are_listed_by_labels_and_removed_with_their_containers(runtime: Runtime) -> None:
    """create_pod gives a running pod with an IP; list_pods filters by labels; remove_pod takes its containers."""
    port = free_port()
    first = runtime.create_pod(PodSandboxSpec(name=unique("pa"), labels=contract_labels(app="a"), hostname="web",
                                              port_mappings=(PortMapping(container_port=8080, host_port=port),)))
    second = runtime.create_pod(PodSandboxSpec(name=unique("pb"), labels=contract_labels(app="b")))
    for sandbox in (first, second):
        assert sandbox.running and sandbox.ip and sandbox.labels[LABEL_MANAGED] == "true"
    assert [p.id for p in runtime.list_pods(contract_labels(app="a"))] == [first.id]
    assert {p.id for p in runtime.list_pods({CONTRACT_LABEL: RUN, "app": "b"})} == {second.id}
    assert runtime.list_pods({CONTRACT_LABEL: RUN, "app": "c"}) == []
    with pytest.raises(RuntimeError_) as taken:  # the same name again
        runtime.create_pod(PodSandboxSpec(name=first.name, labels=contract_labels()))
    assert "\n" not in str(taken.value)
    container_id = run(runtime, first, command=["sleep", "1000"], labels={"app": "a"})
    assert [c.id for c in runtime.list_containers(contract_labels(app="a"))] == [container_id]
    runtime.remove_pod(first.id)
    assert runtime.list_pods(contract_labels(app="a")) == []
    assert runtime.list_containers(contract_labels(app="a")) == []
    with pytest.raises(NotFoundInRuntime):
        runtime.inspect_container(container_id)
    runtime.remove_pod(first.id)  # again: fine


def test_a_host_port_in_use_fails_the_pod_and_leaves_nothing(runtime: Runtime) -> None:
    """A second pod publishing a taken host port raises one line and is not left behind."""
    port = free_port()
    runtime.create_pod(PodSandboxSpec(name=unique("port"), labels=contract_labels(),
                                      port_mappings=(PortMapping(container_port=80, host_port=port),)))
    name = unique("clash")
    with pytest.raises(RuntimeError_) as raised:
        runtime.create_pod(PodSandboxSpec(name=name, labels=contract_labels(pod=name),
                                          port_mappings=(PortMapping(container_port=80, host_port=port),)))
    assert "\n" not in str(raised.value)
    assert runtime.list_pods(contract_labels(pod=name)) == []


# -- containers


def test_created_running_and_listed(runtime: Runtime, pod: PodSandbox) -> None:
    """A created container is "created" with no times; started, it is "running"; labels are kept."""
    container_id = create(runtime, pod, command=["sleep", "1000"], labels={"which": "state"})
    created = runtime.inspect_container(container_id)
    assert (created.state, created.exit_code, created.started_at, created.finished_at, created.pod_id) == (
        "created", None, "", "", pod.id)
    assert created.image == DEMO_IMAGE and created.image_id and created.name
    assert created.labels["which"] == "state" and created.labels[LABEL_MANAGED] == "true"
    runtime.start_container(container_id)
    running = runtime.inspect_container(container_id)
    assert (running.state, running.exit_code, running.finished_at) == ("running", None, "")
    assert running.started_at.endswith("Z")
    assert [c.id for c in runtime.list_containers(contract_labels(which="state"))] == [container_id]
    runtime.remove_container(container_id)


@pytest.mark.parametrize(("command", "code"), [
    (["true"], 0), (["false"], 1), (["sh", "-c", "exit 3"], 3), (["sh", "-c", "echo hi; exit 0"], 0),
], ids=["true", "false", "exit-3", "echo-exit-0"])
def test_exit_codes_and_times(runtime: Runtime, pod: PodSandbox, command: list[str], code: int) -> None:
    """An exited container reports its exit code and RFC 3339 start and finish times."""
    state = wait_exited(runtime, run(runtime, pod, command=command))
    assert (state.state, state.exit_code, state.oom_killed) == ("exited", code, False)
    assert state.started_at.endswith("Z") and state.finished_at.endswith("Z")
    assert state.started_at <= state.finished_at


@pytest.mark.parametrize(("fields", "expected"), [
    ({"command": ["sh", "-c", "echo $GREETING; echo $EMPTY."], "env": {"GREETING": "hi there", "EMPTY": ""}},
     ["hi there\n", ".\n"]),
    ({"command": ["pwd"], "working_dir": "/no/such/dir"}, ["/no/such/dir\n"]),
    ({"entrypoint": ["echo", "only"]}, ["only\n"]),
    ({"entrypoint": ["echo"], "command": ["a", "b"]}, ["a b\n"]),
    ({"command": ["sh", "-c", "echo out; echo err >&2"]}, ["out\n", "err\n"]),
], ids=["env", "working-dir-created", "entrypoint-only", "entrypoint-and-args", "stdout-and-stderr"])
def test_the_process_sees_its_spec(runtime: Runtime, pod: PodSandbox, fields: dict[str, object],
                                   expected: list[str]) -> None:
    """command, entrypoint, env and working dir reach the process; its output reaches the log."""
    container_id = run(runtime, pod, **fields)
    assert wait_exited(runtime, container_id).exit_code == 0
    assert log_lines(runtime, container_id) == expected


@pytest.mark.parametrize(("command", "code"), [
    (["sleep", "1000"], 137),
    (["sh", "-c", "trap 'exit 143' TERM; echo ready; sleep 1000 & wait"], 143),
], ids=["pid-1-ignores-sigterm", "traps-sigterm"])
def test_stop_restart_and_remove(runtime: Runtime, pod: PodSandbox, command: list[str], code: int) -> None:
    """stop sends SIGTERM, SIGKILL after the timeout (PID 1 has no default action: `sleep` dies by
    SIGKILL); a stopped container starts again; remove and stop are idempotent."""
    container_id = run(runtime, pod, command=command)
    wait_for(lambda: runtime.inspect_container(container_id).state == "running", what="running")
    if code == 143:
        wait_for(lambda: log_lines(runtime, container_id) == ["ready\n"], what="the trap set")
    started = time.monotonic()
    runtime.stop_container(container_id, timeout=1)
    assert time.monotonic() - started < 10
    stopped = runtime.inspect_container(container_id)
    assert (stopped.state, stopped.exit_code) == ("exited", code) and stopped.finished_at
    runtime.stop_container(container_id, timeout=1)  # stopped already: fine
    runtime.start_container(container_id)
    again = runtime.inspect_container(container_id)
    assert (again.state, again.exit_code, again.finished_at) == ("running", None, "")
    runtime.remove_container(container_id)
    runtime.remove_container(container_id)  # gone already: fine
    with pytest.raises(NotFoundInRuntime):
        runtime.inspect_container(container_id)


def test_create_errors(runtime: Runtime, pod: PodSandbox) -> None:
    """A missing image is ImageNotFound; a second container of the same name fails with one line."""
    with pytest.raises(ImageNotFound):
        create(runtime, pod, image="localhost/kctl-no-such-image:1")
    name = unique("twice")
    create(runtime, pod, name=name, command=["true"])
    with pytest.raises(RuntimeError_) as raised:
        create(runtime, pod, name=name, command=["true"])
    assert "\n" not in str(raised.value)


# -- volumes and files


def test_volumes_and_write_files(runtime: Runtime, pod: PodSandbox) -> None:
    """Volumes are created (twice is fine), listed by labels and removed; write_files lands in them."""
    volume = unique("vol")
    runtime.create_volume(volume, contract_labels(volume=volume))
    runtime.create_volume(volume, contract_labels(volume=volume))
    assert runtime.list_volumes(contract_labels(volume=volume)) == [volume]
    writer = create(runtime, pod, command=["sleep", "1000"], mounts=(Mount(target="/data", volume=volume),))
    runtime.write_files(writer, "/data", {"a/b.txt": (b"before start\n", 0o644)})  # a created container
    runtime.start_container(writer)
    runtime.write_files(writer, "/data", {"c.txt": (b"while running\n", 0o600)})
    reader = run(runtime, pod, command=["cat", "/v/a/b.txt", "/v/c.txt"],
                 mounts=(Mount(target="/v", volume=volume, read_only=True),))
    assert wait_exited(runtime, reader).exit_code == 0
    assert "".join(log_lines(runtime, reader)) == "before start\nwhile running\n"
    result = runtime.exec(writer, ["cat", "/data/a/b.txt"], timeout=10)
    assert (result.exit_code, result.stdout) == (0, b"before start\n")
    for container_id in (writer, reader):
        runtime.remove_container(container_id)
    runtime.remove_volume(volume)
    runtime.remove_volume(volume)  # gone already: fine
    assert runtime.list_volumes(contract_labels(volume=volume)) == []


# -- exec and logs


@pytest.mark.parametrize(("argv", "stdin", "expected"), [
    (["sh", "-c", "echo out; echo err >&2; exit 4"], None, (4, b"out\n", b"err\n")),
    (["cat"], b"piped in\n", (0, b"piped in\n", b"")),
    (["true"], b"", (0, b"", b"")),
    (["false"], None, (1, b"", b"")),
    (["sh", "-c", "echo $GREETING; pwd"], None, (0, b"hi\n/work\n", b"")),
], ids=["exit-stdout-stderr", "stdin", "empty-stdin", "false", "env-and-working-dir"])
def test_exec(runtime: Runtime, sleeper: str, argv: list[str], stdin: bytes | None,
              expected: tuple[int, bytes, bytes]) -> None:
    """exec returns the exit code, stdout and stderr apart, feeds stdin, and sees the container's env."""
    result = runtime.exec(sleeper, argv, stdin=stdin, timeout=10)
    assert (result.exit_code, result.stdout, result.stderr) == expected


def test_exec_timeout_and_errors(runtime: Runtime, pod: PodSandbox, sleeper: str) -> None:
    """exec past its timeout, in an exited or in a missing container raises, with one line."""
    with pytest.raises(RuntimeError_, match="timed out"):
        runtime.exec(sleeper, ["sleep", "10"], timeout=0.5)
    with pytest.raises(NotFoundInRuntime):
        runtime.exec("kctl-no-such-container", ["true"])
    exited = run(runtime, pod, command=["true"])
    wait_exited(runtime, exited)
    with pytest.raises(RuntimeError_) as raised:
        runtime.exec(exited, ["true"])
    assert "\n" not in str(raised.value)


def drain(session: ExecSession) -> list[tuple[int, bytes]]:
    """Every (stream, data) a session reads until its output ends, joined per stream in order of arrival."""
    pieces: list[tuple[int, bytes]] = []
    while (piece := session.read()) is not None:
        if pieces and pieces[-1][0] == piece[0]:
            pieces[-1] = (piece[0], pieces[-1][1] + piece[1])
        else:
            pieces.append(piece)
    return pieces


@pytest.mark.parametrize(("argv", "stdin", "tty", "expected", "code"), [
    (["sh", "-c", "cat; echo err >&2; exit 3"], b"piped in\n", False, {1: b"piped in\n", 2: b"err\n"}, 3),
    (["echo", "hi"], None, False, {1: b"hi\n"}, 0),
    (["sh", "-c", "echo out; echo err >&2"], None, True, {1: b"out"}, 0),
], ids=["stdin-stderr-exit", "no-stdin", "tty-merges"])
def test_exec_session_streams(runtime: Runtime, sleeper: str, argv: list[str], stdin: bytes | None, tty: bool,
                              expected: dict[int, bytes], code: int) -> None:
    """exec_session takes stdin until it is closed, streams stdout/stderr apart (one stream with a TTY), exits."""
    session = runtime.exec_session(sleeper, argv, stdin=stdin is not None, tty=tty)
    try:
        if stdin is not None:
            session.write(stdin)
            session.close_stdin()
        session.resize(80, 24)
        got: dict[int, bytes] = {}
        for stream, data in drain(session):
            got[stream] = got.get(stream, b"") + data
        assert session.exit_code() == code
    finally:
        session.close()
    if tty:  # a TTY turns \n into \r\n and merges stderr into stdout
        assert set(got) == {1} and got[1].startswith(expected[1])
    else:
        assert got == expected


def test_exec_session_close_and_errors(runtime: Runtime, sleeper: str) -> None:
    """close() ends a session still waiting for stdin; a missing container cannot start one."""
    session = runtime.exec_session(sleeper, ["cat"], stdin=True)
    done = threading.Event()
    reader = threading.Thread(target=lambda: (drain(session), done.set()), daemon=True)
    reader.start()
    session.close()
    assert done.wait(10)
    with pytest.raises(NotFoundInRuntime):
        runtime.exec_session("kctl-no-such-container", ["true"])


def test_attach_session_follows_the_main_process_until_it_stops(runtime: Runtime, pod: PodSandbox,
                                                                  sleeper: str) -> None:
    """attach_session ends when the container stops (its exit code then known); close() ends it early;
    a missing container cannot be attached to."""
    short = run(runtime, pod, command=["sleep", "2"])
    session = runtime.attach_session(short)
    try:
        session.resize(80, 24)
        drain(session)
        wait_exited(runtime, short)
        assert session.exit_code() == 0
    finally:
        session.close()
    waiting = runtime.attach_session(sleeper, stdin=True)
    done = threading.Event()
    threading.Thread(target=lambda: (drain(waiting), done.set()), daemon=True).start()
    waiting.write(b"ignored\n")
    waiting.close_stdin()
    assert not done.wait(0.5)  # closing stdin (no stdin_once) does not end the attach
    waiting.close()
    assert done.wait(10)
    assert waiting.exit_code() == -1  # still running
    with pytest.raises(NotFoundInRuntime):
        runtime.attach_session("kctl-no-such-container")


def test_a_followed_log_ends_when_closed_from_another_thread(runtime: Runtime, sleeper: str) -> None:
    """close() of a log followed on a quiet running container ends its iteration promptly."""
    stream = runtime.logs(sleeper, follow=True, tail=0)
    done = threading.Event()
    threading.Thread(target=lambda: (list(stream), done.set()), daemon=True).start()
    stream.close()
    assert done.wait(10)


def test_logs_tail_timestamps_since_and_follow(runtime: Runtime, pod: PodSandbox) -> None:
    """logs yields lines as written; tail, timestamps and since narrow them; follow of an exited one ends."""
    container_id = run(runtime, pod, command=["sh", "-c", "echo line1; echo line2; echo line3; sleep 2; echo late"])
    wait_for(lambda: len(log_lines(runtime, container_id)) == 3, what="three lines logged")
    middle = time.time()
    assert log_lines(runtime, container_id) == ["line1\n", "line2\n", "line3\n"]
    assert log_lines(runtime, container_id, tail=2) == ["line2\n", "line3\n"]
    stamped = log_lines(runtime, container_id, tail=1, timestamps=True)
    assert len(stamped) == 1 and stamped[0].endswith(" line3\n") and stamped[0][:4].isdigit()
    assert wait_exited(runtime, container_id).exit_code == 0
    assert log_lines(runtime, container_id, since=middle) == ["late\n"]
    assert log_lines(runtime, container_id, follow=True) == ["line1\n", "line2\n", "line3\n", "late\n"]
    with pytest.raises(NotFoundInRuntime):
        list(runtime.logs("kctl-no-such-container"))


# -- images


def test_images_present_listed_saved_and_loaded(runtime: Runtime) -> None:
    """The demo image is present and listed; it saves to an archive that loads back under its name."""
    assert runtime.image_present(DEMO_IMAGE)
    assert not runtime.image_present("localhost/kctl-no-such-image:1")
    assert any(DEMO_IMAGE in image.names for image in runtime.list_images())
    runtime.pull_image(DEMO_IMAGE)  # a localhost/ image that is there: nothing to do
    with pytest.raises(ImageNotFound):
        runtime.pull_image("localhost/kctl-no-such-image:1")
    assert runtime.load_image(runtime.save_image(DEMO_IMAGE)) == [DEMO_IMAGE]
    with pytest.raises(ImageNotFound):
        list(runtime.save_image("localhost/kctl-no-such-image:1"))
    with pytest.raises(RuntimeError_):
        runtime.load_image([b"not an image archive"])


# -- events


def test_container_events_bring_deaths_with_exit_codes(runtime: Runtime, pod: PodSandbox) -> None:
    """A subscribed stream brings "died" with the exit code and pod uid, filters by labels, and
    ends promptly when closed from another thread."""
    uid = unique("uid")
    stream = runtime.container_events({CONTRACT_LABEL: RUN, LABEL_POD_UID: uid}, events=DEATH_EVENTS)
    got: list[ContainerEvent] = []
    reader = threading.Thread(target=lambda: got.extend(stream), daemon=True)
    reader.start()
    try:
        other = run(runtime, pod, command=["sh", "-c", "exit 5"])  # not the subscribed uid
        wait_exited(runtime, other)
        quick = run(runtime, pod, command=["sh", "-c", "exit 3"], labels={LABEL_POD_UID: uid})
        wait_for(lambda: any(e.container_id == quick for e in got), what="death of the exiting container")
        killed = run(runtime, pod, command=["sleep", "1000"], labels={LABEL_POD_UID: uid})
        wait_for(lambda: runtime.inspect_container(killed).state == "running", what="running")
        runtime.stop_container(killed, timeout=0)
        wait_for(lambda: any(e.container_id == killed for e in got), what="death of the killed container")
    finally:
        closed = time.monotonic()
        stream.close()
        reader.join(10)
    assert not reader.is_alive() and time.monotonic() - closed < 10
    deaths = [(e.container_id, e.event, e.exit_code, e.pod_uid) for e in got if e.event == "died"]
    assert deaths == [(quick, "died", 3, uid), (killed, "died", 137, uid)]
    assert all(e.container_id in (quick, killed) for e in got)


def test_usage_of_running_containers_and_of_the_host(runtime: Runtime, pod: PodSandbox) -> None:
    """container_stats lists running containers matching the labels (with their labels), not created ones;
    host_stats gives the host's cumulative CPU time, which does not go back, and memory in use."""
    running = run(runtime, pod, command=["sleep", "1000"], labels={"which": "stats"})
    created = create(runtime, pod, command=["sleep", "1000"], labels={"which": "stats"})
    try:
        samples = runtime.container_stats(contract_labels(which="stats"))
        assert [sample.id for sample in samples] == [running]
        (sample,) = samples
        assert sample.cpu_nanos >= 0 and sample.memory_bytes >= 0 and sample.timestamp > 0
        assert sample.labels["which"] == "stats"
        first, second = runtime.host_stats(), runtime.host_stats()
        assert first.cpu_nanos >= 0 and first.memory_used_bytes >= 0 and first.timestamp > 0
        assert second.cpu_nanos >= first.cpu_nanos and second.timestamp >= first.timestamp
    finally:
        runtime.remove_container(running)
        runtime.remove_container(created)


def test_every_protocol_method_is_exercised() -> None:
    """Each method of the Runtime Protocol is called somewhere in this suite (a new one needs a case)."""
    source = open(__file__, encoding="utf-8").read()
    methods = [name for name in vars(Runtime) if not name.startswith("_")]
    assert methods and [name for name in methods if f"runtime.{name}(" not in source] == []


# -- the host: networks and host commands


def test_networks_made_read_and_removed(runtime: Runtime) -> None:
    """ensure_network makes a bridge with its subnet (again: nothing), refuses another subnet under that name;
    remove_network removes it, and a missing one is fine."""
    import random

    name, subnet = unique("net"), f"10.251.{random.randint(0, 254)}.0/24"
    gateway = subnet.replace(".0/24", ".1")
    assert runtime.network_subnet(name) is None
    runtime.ensure_network(name, subnet=subnet, gateway=gateway, labels=contract_labels())
    try:
        runtime.ensure_network(name, subnet=subnet, gateway=gateway, labels=contract_labels())
        assert runtime.network_subnet(name) == subnet
        with pytest.raises(RuntimeError_):
            runtime.ensure_network(name, subnet="10.252.0.0/24", gateway="10.252.0.1", labels=contract_labels())
    finally:
        runtime.remove_network(name)
    assert runtime.network_subnet(name) is None
    runtime.remove_network(name)


def test_a_host_command_runs(runtime: Runtime) -> None:
    """run_on_host runs argv on the runtime's host and gives its exit status (the in-memory host records it)."""
    assert runtime.run_on_host(["true"], timeout=30).exit_code == 0
