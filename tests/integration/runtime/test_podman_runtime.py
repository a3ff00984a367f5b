"""PodmanRuntime against a real, private Podman service (fixtures in tests/integration/conftest.py)."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor
import urllib.request
import uuid
from pathlib import Path

import pytest

from kctl.runtime.interface import (
    LABEL_MANAGED,
    ContainerSpec,
    ContainerState,
    ImageNotFound,
    Mount,
    NotFoundInRuntime,
    PodSandbox,
    PodSandboxSpec,
    PortMapping,
    RuntimeError_,
)
from kctl.runtime.connect import DEFAULT_SOCKET, podman_url, runtime_for_node
from kctl.runtime.podman import PodmanRuntime
from kctl.runtime.service import LocalPodmanService, containers_conf_text

pytestmark = pytest.mark.integration

IMAGE = "localhost/busybox:demo"


# -- helpers


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_pod(runtime: PodmanRuntime, *, labels: dict[str, str] | None = None,
             ports: tuple[PortMapping, ...] = ()) -> PodSandbox:
    name = unique("pod")
    return runtime.create_pod(PodSandboxSpec(name=name, labels={"test": name, **(labels or {})},
                                             hostname="web", port_mappings=ports))


def run_container(runtime: PodmanRuntime, pod: PodSandbox, **fields: object) -> str:
    spec = ContainerSpec(**{"name": unique("ctr"), "image": IMAGE, "labels": dict(pod.labels), **fields})
    container_id = runtime.create_container(pod.id, spec)
    runtime.start_container(container_id)
    return container_id


def wait_exited(runtime: PodmanRuntime, container_id: str, *, timeout: float = 10) -> ContainerState:
    deadline = time.monotonic() + timeout
    while (state := runtime.inspect_container(container_id)).state != "exited":
        assert time.monotonic() < deadline, f"container still {state.state} after {timeout} s"
        time.sleep(0.05)
    return state


def http_get(url: str, *, timeout: float = 5) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                return response.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def output_lines(runtime: PodmanRuntime, container_id: str) -> list[str]:
    return [line.decode().rstrip("\n") for line in runtime.logs(container_id)]


# -- pods, volumes and files


def test_httpd_serves_a_file_written_into_a_volume(runtime: PodmanRuntime) -> None:
    """A pod's published port reaches busybox httpd serving a file put in a named volume."""
    port = free_port()
    pod = make_pod(runtime, ports=(PortMapping(container_port=8080, host_port=port),))
    volume = unique("www")
    runtime.create_volume(volume, dict(pod.labels))
    spec = ContainerSpec(name=unique("web"), image=IMAGE, labels=dict(pod.labels),
                         command=["httpd", "-f", "-p", "8080", "-h", "/www"],
                         mounts=(Mount(target="/www", volume=volume, read_only=True),))
    container_id = runtime.create_container(pod.id, spec)
    runtime.write_files(container_id, "/www", {"index.html": (b"hello kctl\n", 0o644),
                                               "deep/er/page.html": (b"deep\n", 0o640)})
    runtime.start_container(container_id)
    assert pod.running and pod.ip
    assert http_get(f"http://127.0.0.1:{port}/index.html") == b"hello kctl\n"
    assert http_get(f"http://127.0.0.1:{port}/deep/er/page.html") == b"deep\n"


def test_write_files_keeps_modes_and_makes_folders(runtime: PodmanRuntime) -> None:
    """write_files creates parent folders (0755) and gives each file its mode."""
    pod = make_pod(runtime)
    volume = unique("data")
    runtime.create_volume(volume, dict(pod.labels))
    container_id = run_container(runtime, pod, command=["sleep", "1000"],
                                 mounts=(Mount(target="/data", volume=volume),))
    runtime.write_files(container_id, "/data", {"a/b/run.sh": (b"#!/bin/sh\necho ran\n", 0o755),
                                                "secret": (b"s3cret", 0o600)})
    result = runtime.exec(container_id, ["sh", "-c", "stat -c '%a %n' /data/a /data/a/b /data/a/b/run.sh "
                                         "/data/secret && /data/a/b/run.sh"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.decode().splitlines() == [
        "755 /data/a", "755 /data/a/b", "755 /data/a/b/run.sh", "600 /data/secret", "ran"]


def test_host_path_and_volume_sub_path_mounts(runtime: PodmanRuntime, tmp_path: Path) -> None:
    """A host path is bind-mounted (read-only), and a volume's sub_path is mounted alone."""
    (tmp_path / "host.txt").write_text("from host\n")
    pod = make_pod(runtime)
    volume = unique("vol")
    runtime.create_volume(volume, dict(pod.labels))
    writer = run_container(runtime, pod, command=["sleep", "1000"], mounts=(Mount(target="/v", volume=volume),))
    runtime.write_files(writer, "/v", {"sub/inner.txt": (b"inner\n", 0o644)})
    reader = run_container(runtime, pod, command=["sh", "-c", "cat /h/host.txt /s/inner.txt; touch /h/x || echo ro"],
                           mounts=(Mount(target="/h", host_path=str(tmp_path), read_only=True),
                                   Mount(target="/s", volume=volume, sub_path="sub")))
    assert wait_exited(runtime, reader).exit_code == 0
    assert output_lines(runtime, reader)[:2] == ["from host", "inner"]
    assert "ro" in output_lines(runtime, reader)


def test_a_host_port_in_use_fails_the_pod_and_leaves_nothing(runtime: PodmanRuntime) -> None:
    """A second pod publishing a taken host port raises RuntimeError_ and is removed again."""
    port = free_port()
    make_pod(runtime, ports=(PortMapping(container_port=80, host_port=port),))
    name = unique("pod")
    with pytest.raises(RuntimeError_) as raised:
        runtime.create_pod(PodSandboxSpec(name=name, labels={"test": name},
                                          port_mappings=(PortMapping(container_port=80, host_port=port),)))
    assert "\n" not in str(raised.value)
    assert runtime.list_pods({"test": name}) == []


def test_list_by_labels(runtime: PodmanRuntime) -> None:
    """Pods, containers and volumes are listed by all their labels; infra containers never."""
    first, second = make_pod(runtime, labels={"app": "a"}), make_pod(runtime, labels={"app": "b"})
    ids = {pod.name: run_container(runtime, pod, command=["sleep", "1000"]) for pod in (first, second)}
    for pod in (first, second):
        runtime.create_volume(unique("vol"), dict(pod.labels))
    assert [pod.id for pod in runtime.list_pods({"app": "a"})] == [first.id]
    assert [state.id for state in runtime.list_containers({"app": "b"})] == [ids[second.name]]
    assert [state.id for state in runtime.list_containers({"app": "a", "test": second.name})] == []
    assert len(runtime.list_volumes({"app": "b", LABEL_MANAGED: "true"})) == 1
    listed = {state.id for state in runtime.list_containers({LABEL_MANAGED: "true"})}
    assert listed == set(ids.values())
    assert all(pod.running and pod.ip for pod in runtime.list_pods({LABEL_MANAGED: "true"}))


def test_remove_pod_removes_its_containers_fast(runtime: PodmanRuntime) -> None:
    """remove_pod kills and removes the pod with its containers, quickly, and again is fine."""
    pod = make_pod(runtime)
    container_id = run_container(runtime, pod, command=["sleep", "1000"])
    started = time.monotonic()
    runtime.remove_pod(pod.id)
    assert time.monotonic() - started < 5
    assert runtime.list_pods({"test": pod.name}) == []
    with pytest.raises(NotFoundInRuntime):
        runtime.inspect_container(container_id)
    runtime.remove_pod(pod.id)


# -- container behaviour


@pytest.mark.parametrize("fields, expected", [
    ({"command": ["sh", "-c", "echo $GREETING; echo $EMPTY."], "env": {"GREETING": "hi there", "EMPTY": ""}},
     ["hi there", "."]),
    ({"command": ["pwd"], "working_dir": "/no/such/dir"}, ["/no/such/dir"]),
    ({"entrypoint": ["echo", "only"]}, ["only"]),
    ({"entrypoint": ["echo"], "command": ["a", "b"]}, ["a b"]),
    ({"command": ["id", "-u"], "user": "1000:1000"}, ["1000"]),
    ({"command": ["sh", "-c", "touch /x 2>/dev/null || echo read-only"], "read_only_rootfs": True},
     ["read-only"]),
], ids=["env", "working-dir-created", "entrypoint-only", "entrypoint-and-args", "user", "read-only-rootfs"])
def test_container_spec_is_honoured(runtime: PodmanRuntime, fields: dict[str, object],
                                    expected: list[str]) -> None:
    """What a ContainerSpec asks for is what the process sees."""
    container_id = run_container(runtime, make_pod(runtime), **fields)
    assert wait_exited(runtime, container_id).exit_code == 0
    assert output_lines(runtime, container_id) == expected


def test_resource_limits_reach_the_cgroup(runtime: PodmanRuntime) -> None:
    """cpu_limit_millis and memory_limit_bytes become the container's cgroup limits."""
    script = ("cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cut -d' ' -f1 /sys/fs/cgroup/cpu.max; "
              "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max")
    container_id = run_container(runtime, make_pod(runtime), command=["sh", "-c", script],
                                 cpu_limit_millis=250, memory_limit_bytes=64 << 20)
    assert wait_exited(runtime, container_id).exit_code == 0
    assert output_lines(runtime, container_id) == ["25000", str(64 << 20)]


@pytest.mark.parametrize("code", [0, 3], ids=["success", "exit-3"])
def test_exit_code_and_times(runtime: PodmanRuntime, code: int) -> None:
    """An exited container reports its exit code and RFC 3339 start and finish times."""
    container_id = run_container(runtime, make_pod(runtime), command=["sh", "-c", f"exit {code}"])
    state = wait_exited(runtime, container_id)
    assert (state.state, state.exit_code, state.oom_killed) == ("exited", code, False)
    assert state.started_at.endswith("Z") and state.finished_at.endswith("Z")
    assert state.started_at <= state.finished_at


def test_created_and_running_states(runtime: PodmanRuntime) -> None:
    """A created container is "created" with no times; a started one "running"."""
    pod = make_pod(runtime)
    spec = ContainerSpec(name=unique("ctr"), image=IMAGE, labels=dict(pod.labels), command=["sleep", "1000"])
    container_id = runtime.create_container(pod.id, spec)
    created = runtime.inspect_container(container_id)
    assert (created.state, created.exit_code, created.started_at, created.pod_id) == ("created", None, "", pod.id)
    assert created.name == spec.name and created.image == IMAGE and created.labels["test"] == pod.name
    runtime.start_container(container_id)
    running = runtime.inspect_container(container_id)
    assert (running.state, running.exit_code, running.finished_at) == ("running", None, "")


def test_memory_limit_kills_the_container(runtime: PodmanRuntime) -> None:
    """A process over its memory limit is killed (137).

    oom_killed is not asserted: Podman 4.3.1 with runc and cgroupfs on this project's
    hybrid-cgroup hosts reports OOMKilled=false for such a kill (measured).
    """
    container_id = run_container(runtime, make_pod(runtime), memory_limit_bytes=16 << 20,
                                 command=["sh", "-c", "x=$(head -c 100000000 /dev/zero | tr '\\0' a)"])
    assert wait_exited(runtime, container_id, timeout=20).exit_code == 137


def test_stop_honours_a_short_timeout(runtime: PodmanRuntime) -> None:
    """`sleep` as PID 1 ignores SIGTERM; stop(timeout=1) kills it after about 1 s."""
    container_id = run_container(runtime, make_pod(runtime), command=["sleep", "1000"])
    started = time.monotonic()
    runtime.stop_container(container_id, timeout=1)
    assert time.monotonic() - started < 3
    state = runtime.inspect_container(container_id)
    assert (state.state, state.exit_code) == ("exited", 137)
    runtime.stop_container(container_id, timeout=1)
    runtime.remove_container(container_id)
    runtime.remove_container(container_id)
    with pytest.raises(NotFoundInRuntime):
        runtime.inspect_container(container_id)


# -- exec and logs


@pytest.mark.parametrize("argv, stdin, expected", [
    (["sh", "-c", "echo out; echo err >&2; exit 4"], None, (4, b"out\n", b"err\n")),
    (["cat"], b"piped in\n", (0, b"piped in\n", b"")),
    (["sh", "-c", "wc -c"], b"x" * 1_000_000, (0, b"1000000\n", b"")),
    (["true"], b"", (0, b"", b"")),
    (["no-such-command"], None, (127, b"", None)),
], ids=["exit-stdout-stderr", "stdin", "large-stdin", "empty-stdin", "missing-command"])
def test_exec(runtime: PodmanRuntime, argv: list[str], stdin: bytes | None,
              expected: tuple[int, bytes, bytes | None]) -> None:
    """exec returns the exit code, stdout and stderr apart, and feeds stdin."""
    container_id = run_container(runtime, make_pod(runtime), command=["sleep", "1000"])
    result = runtime.exec(container_id, argv, stdin=stdin, timeout=10)
    code, stdout, stderr = expected
    assert (result.exit_code, result.stdout) == (code, stdout)
    assert stderr is None or result.stderr == stderr


def test_exec_timeout_and_errors(runtime: PodmanRuntime) -> None:
    """exec past its timeout, in a stopped or in a missing container raises, with one line."""
    pod = make_pod(runtime)
    container_id = run_container(runtime, pod, command=["sleep", "1000"])
    started = time.monotonic()
    with pytest.raises(RuntimeError_, match="timed out"):
        runtime.exec(container_id, ["sleep", "10"], timeout=0.5)
    assert time.monotonic() - started < 2
    with pytest.raises(NotFoundInRuntime):
        runtime.exec("no-such-container", ["true"])
    stopped = run_container(runtime, pod, command=["true"])
    wait_exited(runtime, stopped)
    with pytest.raises(RuntimeError_) as raised:
        runtime.exec(stopped, ["true"])
    assert "\n" not in str(raised.value)


def test_logs_tail_timestamps_since_and_follow(runtime: PodmanRuntime) -> None:
    """logs yields lines; tail, timestamps and since narrow them; follow ends with the container."""
    script = "for i in 1 2 3 4 5; do echo line$i; done; sleep 1.5; echo late; sleep 0.5"
    container_id = run_container(runtime, make_pod(runtime), command=["sh", "-c", script])
    time.sleep(0.5)
    middle = time.time()
    assert list(runtime.logs(container_id)) == [f"line{i}\n".encode() for i in range(1, 6)]
    assert list(runtime.logs(container_id, tail=2)) == [b"line4\n", b"line5\n"]
    stamped = list(runtime.logs(container_id, tail=1, timestamps=True))
    assert len(stamped) == 1 and stamped[0].endswith(b" line5\n") and stamped[0][:4].isdigit()
    assert list(runtime.logs(container_id, follow=True, tail=0)) == [b"late\n"]
    assert list(runtime.logs(container_id, since=middle)) == [b"late\n"]


def test_logs_of_missing_container(runtime: PodmanRuntime) -> None:
    """logs of a container that does not exist raises NotFoundInRuntime."""
    with pytest.raises(NotFoundInRuntime):
        list(runtime.logs("no-such-container"))


# -- images, host, errors


def test_images(runtime: PodmanRuntime) -> None:
    """The demo image is present and listed; an unknown one is not present."""
    assert runtime.image_present(IMAGE)
    assert not runtime.image_present("localhost/no-such-image:1")
    assert any(IMAGE in image.names and image.size > 0 for image in runtime.list_images())


@pytest.mark.parametrize("ref", ["localhost/no-such-image:1", "docker.io/library/kctl-no-such-image:1"],
                         ids=["localhost", "remote-registry"])
def test_pull_of_a_missing_image_fails_fast(runtime: PodmanRuntime, ref: str) -> None:
    """Pulling an image that cannot be had raises ImageNotFound with one line, quickly."""
    started = time.monotonic()
    with pytest.raises(ImageNotFound) as raised:
        runtime.pull_image(ref)
    assert time.monotonic() - started < 10
    assert "\n" not in str(raised.value)


def test_pull_of_a_present_localhost_image_is_a_no_op(runtime: PodmanRuntime) -> None:
    """A localhost/ image that is there needs no pull."""
    runtime.pull_image(IMAGE)


def test_create_with_a_missing_image_raises_image_not_found(runtime: PodmanRuntime) -> None:
    """Creating a container from an absent image raises ImageNotFound."""
    pod = make_pod(runtime)
    with pytest.raises(ImageNotFound):
        runtime.create_container(pod.id, ContainerSpec(name=unique("ctr"), image="localhost/nope:1", labels={}))


def test_info(runtime: PodmanRuntime) -> None:
    """info() gives the capacity and identity of the host."""
    info = runtime.info()
    assert info.cpus >= 1 and info.memory_bytes > 1 << 20
    assert info.os == "linux" and info.kernel and info.arch and info.hostname
    assert info.runtime_version.startswith("podman://4.")


def test_calls_from_many_threads_at_once(runtime: PodmanRuntime) -> None:
    """One runtime serves many threads at once (each thread gets its own client)."""
    container_id = run_container(runtime, make_pod(runtime), command=["sleep", "1000"])

    def call(index: int) -> tuple[int, bytes, str]:
        result = runtime.exec(container_id, ["echo", str(index)], timeout=10)
        return result.exit_code, result.stdout, runtime.inspect_container(container_id).state

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(call, range(48)))
    assert results == [(0, f"{index}\n".encode(), "running") for index in range(48)]


def test_unreachable_service_raises_one_line(tmp_path: Path) -> None:
    """A socket nobody listens on gives a RuntimeError_ of one line, not a traceback."""
    with PodmanRuntime(f"unix://{tmp_path}/none.sock", timeout=2) as runtime:
        with pytest.raises(RuntimeError_) as raised:
            runtime.list_pods({})
    assert "\n" not in str(raised.value)


def test_containers_conf_ships_with_the_package() -> None:
    """The conf kctl's services use (and `make system` installs) holds the settings this host needs."""
    text = containers_conf_text()
    assert 'runtime = "runc"' in text and "default_ulimits" in text and "exit_command_delay" in text


# -- the local service and the connection a Node names


def test_ensure_uses_a_service_that_answers(podman_service: object) -> None:
    """ensure() on a socket that answers owns nothing, and its stop() leaves the service up."""
    service = LocalPodmanService.ensure(podman_service.socket)  # type: ignore[attr-defined]
    assert not service.owned and service.pid is None
    service.stop()
    with PodmanRuntime(service.url) as runtime:
        assert runtime.info().cpus >= 1


@pytest.mark.parametrize("annotations, expected", [
    ({}, f"unix://{DEFAULT_SOCKET}"),
    ({"kctl.io/podman-url": "unix:///run/podman/podman.sock"}, "unix:///run/podman/podman.sock"),
    ({"kctl.io/podman-url": "ssh://core@10.0.0.5:2222/run/podman/podman.sock",
      "kctl.io/ssh-identity": "/keys/id"}, "ssh://core@10.0.0.5:2222/run/podman/podman.sock"),
], ids=["default-socket", "unix", "ssh"])
def test_podman_url_of_a_node(annotations: dict[str, str], expected: str) -> None:
    """A Node's kctl.io/podman-url annotation names its Podman; the default is kctl's socket."""
    node = {"metadata": {"name": "n1", "annotations": annotations}}
    assert podman_url(node) == expected
    runtime_for_node(node).close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("url", ["tcp://10.0.0.5:8080", "ssh://", "/run/podman.sock"],
                         ids=["tcp", "ssh-without-host", "bare-path"])
def test_a_bad_podman_url_is_refused(url: str) -> None:
    """A Podman URL that is not unix:// or ssh://user@host/path raises RuntimeError_."""
    with pytest.raises(RuntimeError_):
        runtime_for_node({"metadata": {"name": "n1", "annotations": {"kctl.io/podman-url": url}}})
