"""ProbeManager: handlers (exec, httpGet, tcpSocket, locally and through exec for remote hosts),
timing (initialDelay, period) and thresholds (success/failure, startup gating)."""

from __future__ import annotations

import http.server
import socket
import threading
from typing import Iterator

import pytest
from podharness import IMAGE

from kctl.agent.probes import ProbeManager, named_ports
from kctl.runtime.interface import ContainerSpec, ContainerState, ExecResult, PodSandboxSpec
from kctl.runtime.memory import MemoryRuntime

POD = {"metadata": {"uid": "uid-1", "name": "web", "namespace": "default"}}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        codes = {"/healthz": 200, "/moved": 302, "/broken": 500}
        code = codes.get(self.path, 404)
        if self.path == "/header" and self.headers.get("X-Probe") == "yes":
            code = 200
        self.send_response(code)
        if code == 302:
            self.send_header("Location", "/healthz")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    """An HTTP server on 127.0.0.1 answering /healthz 200, /moved 302, /broken 500, else 404."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def runtime_with_container() -> tuple[MemoryRuntime, str]:
    """A MemoryRuntime with one running container named app."""
    runtime = MemoryRuntime(images={IMAGE})
    pod = runtime.create_pod(PodSandboxSpec(name="p", labels={}))
    container_id = runtime.create_container(pod.id, ContainerSpec(name="c", image=IMAGE,
                                                                  labels={"io.kctl.container.name": "app"}))
    runtime.start_container(container_id)
    return runtime, container_id


def run(probe: dict, runtime: MemoryRuntime, container_id: str, *, remote: bool = False,
        pod_ip: str = "127.0.0.1") -> tuple[bool, str]:
    return ProbeManager().run(probe, runtime=runtime, container_id=container_id, pod_ip=pod_ip, host_ip="",
                              remote=remote, ports={"web": 0})


@pytest.mark.parametrize(("path", "ok"), [("/healthz", True), ("/moved", True), ("/broken", False),
                                          ("/missing", False)],
                         ids=["200", "302-followed", "500", "404"])
def test_http_get_local(http_port: int, runtime_with_container: tuple[MemoryRuntime, str], path: str,
                        ok: bool) -> None:
    """httpGet from the agent's process: 200-399 is success."""
    runtime, container_id = runtime_with_container
    result, message = run({"httpGet": {"path": path, "port": http_port}}, runtime, container_id)
    assert result is ok
    if not ok:
        assert "statuscode" in message


def test_http_get_headers_and_named_port(http_port: int, runtime_with_container: tuple[MemoryRuntime, str]) -> None:
    """httpHeaders are sent; a named port is looked up in the container's ports."""
    runtime, container_id = runtime_with_container
    probe = {"httpGet": {"path": "/header", "port": "web", "httpHeaders": [{"name": "X-Probe", "value": "yes"}]}}
    ok, _ = ProbeManager().run(probe, runtime=runtime, container_id=container_id, pod_ip="127.0.0.1", host_ip="",
                               ports={"web": http_port})
    assert ok


def test_tcp_socket_local(http_port: int, runtime_with_container: tuple[MemoryRuntime, str]) -> None:
    """tcpSocket succeeds on a listening port and fails on a closed one."""
    runtime, container_id = runtime_with_container
    assert run({"tcpSocket": {"port": http_port}}, runtime, container_id)[0]
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = free.getsockname()[1]
    ok, message = run({"tcpSocket": {"port": closed}, "timeoutSeconds": 1}, runtime, container_id)
    assert not ok and "dial tcp" in message


@pytest.mark.parametrize(("probe", "argv"), [
    ({"httpGet": {"path": "/healthz", "port": 8080, "httpHeaders": [{"name": "A", "value": "b"}]}},
     ["wget", "-q", "-O", "/dev/null", "--no-check-certificate", "--header", "A: b", "http://127.0.0.1:8080/healthz"]),
    ({"httpGet": {"path": "healthz", "port": 8443, "scheme": "HTTPS"}},
     ["wget", "-q", "-O", "/dev/null", "--no-check-certificate", "https://127.0.0.1:8443/healthz"]),
    ({"tcpSocket": {"port": 5432}, "timeoutSeconds": 2},
     ["sh", "-c", "nc -z -w 2 127.0.0.1 5432 2>/dev/null || nc -w 2 127.0.0.1 5432 </dev/null >/dev/null"]),
], ids=["http", "https-relative-path", "tcp"])
def test_remote_probes_run_in_the_container(runtime_with_container: tuple[MemoryRuntime, str], probe: dict,
                                            argv: list[str]) -> None:
    """For a remote host, httpGet/tcpSocket run inside the container with wget / nc."""
    runtime, container_id = runtime_with_container
    seen: list[list[str]] = []

    def hook(state: ContainerState, command: list[str]) -> ExecResult:
        seen.append(command)
        return ExecResult(1, b"", b"wget: server returned error: HTTP/1.1 503")

    runtime.exec_hook = hook
    ok, message = run(probe, runtime, container_id, remote=True)
    assert seen == [argv] and not ok and message


@pytest.mark.parametrize(("code", "ok"), [(0, True), (1, False)], ids=["exit-0", "exit-1"])
def test_exec_probe(runtime_with_container: tuple[MemoryRuntime, str], code: int, ok: bool) -> None:
    """An exec probe succeeds when the command exits 0."""
    runtime, container_id = runtime_with_container
    runtime.set_exec_result(ExecResult(code, b"out", b""), container="app")
    assert run({"exec": {"command": ["check"]}}, runtime, container_id) == (ok, "out")


def test_exec_probe_timeout(runtime_with_container: tuple[MemoryRuntime, str]) -> None:
    """A command outliving timeoutSeconds fails the probe."""
    runtime, container_id = runtime_with_container
    runtime.set_exec_result(0, container="app", duration=5)
    ok, message = run({"exec": {"command": ["slow"]}, "timeoutSeconds": 1}, runtime, container_id)
    assert not ok and "timed out" in message


def test_grpc_is_not_supported(runtime_with_container: tuple[MemoryRuntime, str]) -> None:
    """A grpc probe counts as success with a message saying it is not supported."""
    runtime, container_id = runtime_with_container
    ok, message = run({"grpc": {"port": 9000}}, runtime, container_id)
    assert ok and "not supported" in message


def test_named_ports() -> None:
    """named_ports maps port names to container ports."""
    assert named_ports({"ports": [{"name": "web", "containerPort": 80}, {"containerPort": 81}]}) == {"web": 80}


# -- timing and thresholds -----------------------------------------------------------------------


def test_due_honours_initial_delay_and_period() -> None:
    """A probe is due after initialDelaySeconds from first sight, then every periodSeconds."""
    manager = ProbeManager()
    app = {"name": "app", "livenessProbe": {"exec": {"command": ["x"]}, "initialDelaySeconds": 5, "periodSeconds": 3}}
    assert manager.due(POD, app, 100.0, container_id="c1") == []
    assert manager.due(POD, app, 105.0, container_id="c1") == ["liveness"]
    manager.record("uid-1", app, "liveness", True, "", 105.0, container_id="c1")
    assert manager.due(POD, app, 107.0, container_id="c1") == []
    assert manager.due(POD, app, 108.0, container_id="c1") == ["liveness"]
    assert manager.next_due({**POD, "spec": {"containers": [app]}}, {"app": "c1"}, 106.0) == pytest.approx(2.0)
    assert manager.due(POD, app, 108.0, container_id="c2") == [], "a new instance starts its delay afresh"


@pytest.mark.parametrize(("results", "ready"), [
    ([True], False), ([True, True], True), ([True, True, False], True), ([True, True, False, False], False),
], ids=["one-success", "threshold-met", "one-failure", "failure-threshold"])
def test_readiness_thresholds(results: list[bool], ready: bool) -> None:
    """Ready after successThreshold successes; not ready after failureThreshold failures."""
    manager = ProbeManager()
    app = {"name": "app", "readinessProbe": {"exec": {"command": ["x"]}, "successThreshold": 2,
                                             "failureThreshold": 2}}
    for t, ok in enumerate(results):
        manager.record("uid-1", app, "readiness", ok, "", float(t), container_id="c1")
    assert manager.ready("uid-1", app, "c1") is ready


def test_liveness_kill_after_failure_threshold() -> None:
    """Liveness says kill on the failureThreshold-th failure in a row, not before."""
    manager = ProbeManager()
    app = {"name": "app", "livenessProbe": {"exec": {"command": ["x"]}, "failureThreshold": 3}}
    outcomes = [manager.record("uid-1", app, "liveness", ok, "m", float(t), container_id="c1")
                for t, ok in enumerate([False, False, True, False, False, False])]
    assert [o.kill for o in outcomes] == [False, False, False, False, False, True]


def test_startup_gates_other_probes() -> None:
    """Only the startup probe is due until it succeeds; then liveness and readiness."""
    manager = ProbeManager()
    app = {"name": "app", "startupProbe": {"exec": {"command": ["s"]}, "periodSeconds": 1},
           "livenessProbe": {"exec": {"command": ["l"]}}, "readinessProbe": {"exec": {"command": ["r"]}}}
    assert manager.due(POD, app, 0.0, container_id="c1") == ["startup"]
    assert not manager.started("uid-1", app, "c1") and not manager.ready("uid-1", app, "c1")
    manager.record("uid-1", app, "startup", True, "", 0.0, container_id="c1")
    assert manager.started("uid-1", app, "c1")
    assert manager.due(POD, app, 1.0, container_id="c1") == ["liveness", "readiness"]


def test_no_probes_means_started_and_ready() -> None:
    """A container without probes is started and ready while it runs."""
    manager = ProbeManager()
    assert manager.started("uid-1", {"name": "app"}, "c1") and manager.ready("uid-1", {"name": "app"}, "c1")


def test_forget() -> None:
    """forget drops a pod's probe state."""
    manager = ProbeManager()
    app = {"name": "app", "readinessProbe": {"exec": {"command": ["x"]}}}
    manager.record("uid-1", app, "readiness", True, "", 0.0, container_id="c1")
    manager.forget("uid-1")
    assert not manager.ready("uid-1", app, "c1")
