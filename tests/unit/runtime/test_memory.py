"""MemoryRuntime: the Runtime protocol in memory, its process convention and its test controls."""

from __future__ import annotations

import pytest

from kctl.runtime.interface import (
    ContainerSpec,
    ExecResult,
    ImageNotFound,
    Mount,
    NotFoundInRuntime,
    PodSandboxSpec,
    Runtime,
    RuntimeError_,
)
from kctl.runtime.memory import FakeClock, MemoryRuntime, planned_exit

IMAGE = "localhost/busybox:demo"


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock."""
    return FakeClock()


@pytest.fixture
def runtime(clock: FakeClock) -> MemoryRuntime:
    """A MemoryRuntime holding IMAGE."""
    return MemoryRuntime(images={IMAGE}, clock=clock)


def start(runtime: MemoryRuntime, command: list[str] | None = None, *, name: str = "c",
          mounts: tuple[Mount, ...] = ()) -> str:
    pod = runtime.list_pods({"pod": "p"}) or [runtime.create_pod(PodSandboxSpec(name="p", labels={"pod": "p"}))]
    container_id = runtime.create_container(pod[0].id, ContainerSpec(
        name=name, image=IMAGE, labels={"io.kctl.container.name": name}, command=command, mounts=mounts))
    runtime.start_container(container_id)
    return container_id


def test_is_a_runtime(runtime: MemoryRuntime) -> None:
    """MemoryRuntime provides every method of the Runtime protocol."""
    wanted = [name for name in vars(Runtime) if not name.startswith("_")]
    assert wanted and all(callable(getattr(runtime, name)) for name in wanted)


@pytest.mark.parametrize(("argv", "planned"), [
    ([], None), (["sleep", "infinity"], None), (["httpd", "-f"], None),
    (["true"], (0, 0.0)), (["/bin/false"], (1, 0.0)), (["sh", "-c", "true"], (0, 0.0)),
    (["sh", "-c", "echo hi; exit 3"], (3, 0.0)), (["sleep", "5"], (0, 5.0)),
    (["sh", "-c", "sleep 2; exit 4"], (4, 2.0)), (["sh", "-c", "sleep 1.5 && exit 0"], (0, 1.5)),
], ids=["none", "sleep-infinity", "server", "true", "false", "sh-true", "exit-n", "sleep", "sleep-exit",
        "sleep-and-exit"])
def test_process_convention(argv: list[str], planned: tuple[int, float] | None) -> None:
    """The command line says when and how a container's process exits."""
    assert planned_exit(argv) == planned


def test_lifecycle_and_exit_codes(runtime: MemoryRuntime, clock: FakeClock) -> None:
    """Containers run, exit by convention (at once or after sleeping on the clock), stop with 143."""
    quick = start(runtime, ["sh", "-c", "exit 3"], name="quick")
    assert runtime.inspect_container(quick).state == "exited" and runtime.inspect_container(quick).exit_code == 3
    sleepy = start(runtime, ["sleep", "5"], name="sleepy")
    assert runtime.inspect_container(sleepy).state == "running"
    clock.advance(5)
    assert runtime.inspect_container(sleepy).exit_code == 0
    server = start(runtime, name="server")
    runtime.stop_container(server, timeout=10)
    assert runtime.inspect_container(server).exit_code == 143


def test_crash_and_oom(runtime: MemoryRuntime) -> None:
    """crash() makes a running container exit with a code, OOM-killed if asked."""
    container_id = start(runtime)
    runtime.crash(container_id, 137, oom=True)
    state = runtime.inspect_container(container_id)
    assert (state.state, state.exit_code, state.oom_killed) == ("exited", 137, True)
    assert state.finished_at


def test_sigterm_ignored_takes_the_timeout(runtime: MemoryRuntime, clock: FakeClock) -> None:
    """A container ignoring SIGTERM is killed (137) after the stop timeout, on the clock."""
    runtime.ignores_sigterm.add("c")
    container_id = start(runtime)
    before = clock()
    runtime.stop_container(container_id, timeout=7)
    assert runtime.inspect_container(container_id).exit_code == 137 and clock() == before + 7


def test_images_and_pulls(runtime: MemoryRuntime) -> None:
    """Only present images create; pulls succeed only for pullable refs."""
    pod = runtime.create_pod(PodSandboxSpec(name="p", labels={}))
    with pytest.raises(ImageNotFound):
        runtime.create_container(pod.id, ContainerSpec(name="c", image="other:1", labels={}))
    with pytest.raises(ImageNotFound):
        runtime.pull_image("other:1")
    runtime.pullable.add("other:1")
    runtime.pull_image("other:1")
    assert runtime.image_present("other:1") and "other:1" in {n for i in runtime.list_images() for n in i.names}


def test_names_are_unique_and_volumes_must_exist(runtime: MemoryRuntime) -> None:
    """A second pod or container of a name is refused, as is a mount of a volume not created."""
    pod = runtime.create_pod(PodSandboxSpec(name="p", labels={}))
    with pytest.raises(RuntimeError_):
        runtime.create_pod(PodSandboxSpec(name="p", labels={}))
    runtime.create_container(pod.id, ContainerSpec(name="c", image=IMAGE, labels={}))
    with pytest.raises(RuntimeError_):
        runtime.create_container(pod.id, ContainerSpec(name="c", image=IMAGE, labels={}))
    with pytest.raises(RuntimeError_):
        runtime.create_container(pod.id, ContainerSpec(name="d", image=IMAGE, labels={},
                                                       mounts=(Mount(target="/v", volume="nope"),)))


def test_labels_filter_lists(runtime: MemoryRuntime) -> None:
    """Lists return objects carrying every label asked for; the managed label is added."""
    runtime.create_pod(PodSandboxSpec(name="a", labels={"k": "1"}))
    runtime.create_pod(PodSandboxSpec(name="b", labels={"k": "2"}))
    assert [p.name for p in runtime.list_pods({"k": "2"})] == ["b"]
    assert runtime.list_pods({"k": "1"})[0].labels["io.kctl.managed"] == "true"
    runtime.create_volume("v", {"k": "1"})
    assert runtime.list_volumes({"k": "1"}) == ["v"] and runtime.list_volumes({"k": "2"}) == []


def test_write_files_land_in_volumes_and_rootfs(runtime: MemoryRuntime) -> None:
    """write_files under a volume mount fills the volume (seen by others); elsewhere the container."""
    runtime.create_volume("v", {})
    first = start(runtime, name="a", mounts=(Mount(target="/etc/app", volume="v"),))
    second = start(runtime, name="b", mounts=(Mount(target="/config", volume="v"),))
    runtime.write_files(first, "/etc/app", {"conf/x": (b"1", 0o600)})
    runtime.write_files(first, "/opt", {"y": (b"2", 0o644)})
    assert runtime.read_file(second, "/config/conf/x") == (b"1", 0o600)
    assert runtime.volume_files("v") == {"conf/x": (b"1", 0o600)}
    assert runtime.read_file(first, "/opt/y") == (b"2", 0o644) and runtime.read_file(second, "/opt/y") is None
    with pytest.raises(RuntimeError_):
        runtime.write_files(first, "/etc/app", {"../escape": (b"", 0o644)})


def test_read_only_mount_of_running_container_refuses_writes(runtime: MemoryRuntime) -> None:
    """As Podman: a running container's read-only mount cannot be written; a created one's can."""
    runtime.create_volume("v", {})
    pod = runtime.list_pods({}) or [runtime.create_pod(PodSandboxSpec(name="p", labels={"pod": "p"}))]
    spec = ContainerSpec(name="ro", image=IMAGE, labels={}, mounts=(Mount(target="/cfg", volume="v", read_only=True),))
    container_id = runtime.create_container(pod[0].id, spec)
    runtime.write_files(container_id, "/cfg", {"a": (b"1", 0o644)})
    runtime.start_container(container_id)
    with pytest.raises(RuntimeError_, match="read-only file system"):
        runtime.write_files(container_id, "/cfg", {"a": (b"2", 0o644)})
    assert runtime.volume_files("v") == {"a": (b"1", 0o644)}


def test_exec_rules_hooks_and_timeouts(runtime: MemoryRuntime, clock: FakeClock) -> None:
    """exec returns 0 by default, the latest matching rule otherwise; durations move the clock."""
    container_id = start(runtime)
    assert runtime.exec(container_id, ["x"]).exit_code == 0
    runtime.set_exec_result(ExecResult(2, b"o", b"e"), container="c")
    runtime.set_exec_result(0, container="c", argv=["ok"], duration=3)
    assert runtime.exec(container_id, ["x"]) == ExecResult(2, b"o", b"e")
    before = clock()
    assert runtime.exec(container_id, ["ok"], timeout=5).exit_code == 0 and clock() == before + 3
    with pytest.raises(RuntimeError_, match="timed out"):
        runtime.exec(container_id, ["ok"], timeout=1)
    runtime.exec_hook = lambda state, argv: 9
    assert runtime.exec(container_id, ["x"]).exit_code == 9


def test_exec_needs_a_running_container(runtime: MemoryRuntime) -> None:
    """exec in an exited container fails."""
    container_id = start(runtime, ["true"])
    with pytest.raises(RuntimeError_, match="not running"):
        runtime.exec(container_id, ["x"])


def test_remove_pod_removes_its_containers_and_records_calls(runtime: MemoryRuntime) -> None:
    """remove_pod takes its containers along; every call is recorded in order."""
    container_id = start(runtime)
    pod_id = runtime.list_pods({})[0].id
    runtime.remove_pod(pod_id)
    assert runtime.list_containers({}) == []
    with pytest.raises(NotFoundInRuntime):
        runtime.inspect_container(container_id)
    assert [c[0] for c in runtime.calls if c[0] != "list_pods"][:3] == ["create_pod", "create_container",
                                                                         "start_container"]
    assert runtime.count("remove_pod") == 1


def test_stop_sandbox_and_logs(runtime: MemoryRuntime) -> None:
    """stop_sandbox stops the pod and its containers; logs give what was emitted."""
    container_id = start(runtime)
    runtime.emit(container_id, b"line 1\n")
    runtime.emit(container_id, b"line 2\n")
    assert list(runtime.logs(container_id, tail=1)) == [b"line 2\n"]
    runtime.stop_sandbox(runtime.list_pods({})[0].id)
    assert not runtime.list_pods({})[0].running
    assert runtime.inspect_container(container_id).state == "exited"
