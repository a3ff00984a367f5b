"""Fixtures for tests against a real Podman: a private service per session, a runtime per test.

`podman_service` starts `podman system service` with its own storage (--root/--runroot
under a temporary folder), its own socket and the containers.conf kctl recommends, and
builds localhost/busybox:demo into it with tools/build-demo-image.sh. Its teardown removes
every pod, container and volume, stops the service by its PID, unmounts what Podman left
mounted under the folder and deletes it, whatever the tests did.

The service has its own Podman network definitions (`network_config_dir` in its
containers.conf, the folder's networks/), so the `kctl` pod network a daemon makes there
(kctl.agent.podnetwork) is the session's own. A daemon run against this service treats this
machine as its node's host: the teardown also removes what the pod network made here
(`remove_pod_network_leftovers`: the `kctl` network, the nft table `ip kctl-net`, routes of
proto 76).

`runtime` is a PodmanRuntime on that service; after each test it removes every pod,
container and volume labelled io.kctl.managed=true, so tests do not leak into each other.

Without podman installed these fixtures fail (they do not skip): `make test` installs it.
The sshd config, key, unmount and leftover-process helpers are kctl.testing.testbed's,
shared with the multi-host test bed (tests/e2e).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from kctl.runtime.interface import LABEL_MANAGED, RuntimeError_
from kctl.runtime.podman import PodmanRuntime
from kctl.runtime.service import LocalPodmanService, containers_conf_text
from kctl.testing.testbed import (TestBedError, kill_processes_naming, make_key, sshd_config, unmount_under,
                                  wait_for_port)

REPO = Path(__file__).resolve().parents[2]
BUILD_DEMO_IMAGE = REPO / "tools" / "build-demo-image.sh"
DEMO_IMAGE = "localhost/busybox:demo"
SERVICE_START_TIMEOUT = 30.0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs a real Podman (tests/integration)")


@dataclass(frozen=True)
class PodmanTestService:
    """The private Podman service of a test session."""

    url: str
    socket: str
    root: str
    runroot: str
    folder: str
    conf: str
    image: str = DEMO_IMAGE


@pytest.fixture(scope="session")
def podman_service() -> Iterator[PodmanTestService]:
    """A private Podman service (own storage, socket, containers.conf) with the demo image."""
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: run `make system` (tools/install-system-deps.sh) as root")
    folder = tempfile.mkdtemp(prefix="kctl-it-")
    service: LocalPodmanService | None = None
    try:
        settings = _settings(folder)
        service = LocalPodmanService.ensure(settings.socket, conf=settings.conf, root=settings.root,
                                           runroot=settings.runroot, timeout=SERVICE_START_TIMEOUT)
        if not service.owned:
            pytest.fail(f"a Podman service already answers on {settings.socket}")
        _build_demo_image(settings)
        yield settings
    finally:
        _tear_down(folder, service)


def _settings(folder: str) -> PodmanTestService:
    conf = os.path.join(folder, "containers.conf")
    networks = os.path.join(folder, "networks")
    os.makedirs(networks, mode=0o700, exist_ok=True)
    Path(conf).write_text(containers_conf_text() + f'\n[network]\nnetwork_config_dir = "{networks}"\n')
    socket = os.path.join(folder, "podman.sock")
    return PodmanTestService(url=f"unix://{socket}", socket=socket, root=os.path.join(folder, "storage"),
                             runroot=os.path.join(folder, "run"), folder=folder, conf=conf)


def _build_demo_image(settings: PodmanTestService) -> None:
    result = subprocess.run([str(BUILD_DEMO_IMAGE), "--url", settings.url], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "CONTAINERS_CONF": settings.conf})
    if result.returncode != 0:
        pytest.fail(f"building {DEMO_IMAGE} failed: {result.stderr.strip() or result.stdout.strip()}")


@pytest.fixture
def runtime(podman_service: PodmanTestService) -> Iterator[PodmanRuntime]:
    """A PodmanRuntime on the session's service; kctl-labelled leftovers are removed after."""
    runtime = PodmanRuntime(podman_service.url)
    try:
        yield runtime
    finally:
        remove_everything(runtime, labels={LABEL_MANAGED: "true"})
        runtime.close()


def remove_everything(runtime: PodmanRuntime, *, labels: dict[str, str]) -> None:
    """Remove the pods (in parallel), then the containers and volumes carrying `labels`."""
    with contextlib.suppress(RuntimeError_):
        pods = runtime.list_pods(labels)
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda pod: _quietly(runtime.remove_pod, pod.id), pods))
    with contextlib.suppress(RuntimeError_):
        for container in runtime.list_containers(labels):
            _quietly(runtime.remove_container, container.id)
    with contextlib.suppress(RuntimeError_):
        for volume in runtime.list_volumes(labels):
            _quietly(runtime.remove_volume, volume)


def _quietly(call: object, *args: str) -> None:
    with contextlib.suppress(RuntimeError_):
        call(*args)  # type: ignore[operator]


def _tear_down(folder: str, service: LocalPodmanService | None) -> None:
    """Empty the service, stop it, end what it left running, unmount and delete the folder."""
    if service is not None and service.owned:
        with contextlib.closing(PodmanRuntime(service.url)) as runtime:
            _warn_about_leftovers(runtime)
            remove_everything(runtime, labels={})
            remove_pod_network_leftovers(runtime)
        service.stop()
    kill_processes_naming(folder)
    unmount_under(folder)
    shutil.rmtree(folder, ignore_errors=True)
    if service is not None:  # the fence folders daemons leading over ssh:// made for this socket
        from kctl.runtime.fencing import remove_local_fence

        remove_local_fence(service.socket_path)


def remove_pod_network_leftovers(runtime: PodmanRuntime) -> None:
    """Remove what a daemon's pod network made on this machine: the `kctl` network, kctl's nft table and routes."""
    from kctl.agent.podnetwork.plan import NETWORK_NAME, ROUTE_PROTO, TABLE

    with contextlib.suppress(RuntimeError_):
        runtime.remove_network(NETWORK_NAME)
    if os.geteuid() != 0:
        return
    for argv in (["nft", "delete", "table", "ip", TABLE], ["nft", "delete", "table", "ip", "kctl"],  # kube-proxy's
                 ["ip", "route", "flush", "proto", str(ROUTE_PROTO)]):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(argv, capture_output=True, timeout=30, check=False)


def _warn_about_leftovers(runtime: PodmanRuntime) -> None:
    """Warn when something outlived the tests (the `runtime` fixture should have removed it)."""
    with contextlib.suppress(RuntimeError_):
        left = ([f"pod {pod.name}" for pod in runtime.list_pods({})]
                + [f"container {state.name}" for state in runtime.list_containers({})]
                + [f"volume {name}" for name in runtime.list_volumes({})])
        if left:
            warnings.warn(f"integration tests left behind: {', '.join(left)}", stacklevel=1)


# -- a private sshd: this machine reached as a remote host -----------------------------------

@dataclass(frozen=True)
class SSHServer:
    """A private sshd on 127.0.0.1:port that lets this user in with `identity`."""

    host: str
    port: int
    user: str
    identity: str
    known_hosts: str
    folder: str

    def podman_url(self, socket_path: str) -> str:
        return f"ssh://{self.user}@{self.host}:{self.port}{socket_path}"


@pytest.fixture(scope="session")
def sshd() -> Iterator[SSHServer]:
    """sshd with its own host key, authorized key and known_hosts file; stopped and deleted after."""
    if not Path("/usr/sbin/sshd").exists():
        pytest.fail("sshd is not installed: run `make system` (tools/install-system-deps.sh) as root")
    folder = tempfile.mkdtemp(prefix="kctl-sshd-")
    process: subprocess.Popen | None = None
    try:
        for name in ("host_key", "id_ed25519"):
            make_key(f"{folder}/{name}")
        shutil.copy(f"{folder}/id_ed25519.pub", f"{folder}/authorized_keys")
        os.chmod(f"{folder}/authorized_keys", 0o600)
        port = _free_port()
        Path(f"{folder}/sshd_config").write_text(sshd_config(
            listen="127.0.0.1", port=port, host_key=f"{folder}/host_key", pid_file=f"{folder}/sshd.pid",
            authorized_keys=f"{folder}/authorized_keys"))
        host_key = Path(f"{folder}/host_key.pub").read_text().split()
        Path(f"{folder}/known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
        process = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", f"{folder}/sshd_config"],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=open(f"{folder}/sshd.log", "wb"))
        try:
            wait_for_port("127.0.0.1", port, pid=process.pid, log=f"{folder}/sshd.log")
        except TestBedError as error:
            pytest.fail(str(error))
        yield SSHServer(host="127.0.0.1", port=port, user=pwd.getpwuid(os.getuid()).pw_name,
                        identity=f"{folder}/id_ed25519", known_hosts=f"{folder}/known_hosts", folder=folder)
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
