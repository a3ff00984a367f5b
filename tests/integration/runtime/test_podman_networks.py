"""PodmanRuntime's networks against the real, private Podman service: made, read, joined by a pod, removed.

The service keeps its network definitions in its own folder (tests/integration/conftest.py);
the bridge a pod's network makes lives on this machine while the pod runs, so the test uses
a name and subnet of its own and removes both whatever happens.
"""

from __future__ import annotations

import contextlib
import ipaddress
import random
import uuid

import pytest

from kctl.runtime.interface import LABEL_MANAGED, PodSandboxSpec, RuntimeError_
from kctl.runtime.podman import PodmanRuntime

pytestmark = pytest.mark.integration


def test_network_made_joined_and_removed(runtime: PodmanRuntime) -> None:
    """ensure_network makes a bridge with the subnet (twice is fine), a pod joining it gets an address in it."""
    name = f"kctl-it-{uuid.uuid4().hex[:6]}"
    subnet = ipaddress.ip_network(f"10.250.{random.randint(0, 255)}.0/24")
    try:
        assert runtime.network_subnet(name) is None
        runtime.ensure_network(name, subnet=str(subnet), gateway=str(subnet.network_address + 1), labels={})
        runtime.ensure_network(name, subnet=str(subnet), gateway=str(subnet.network_address + 1), labels={})
        assert runtime.network_subnet(name) == str(subnet)
        with pytest.raises(RuntimeError_, match="exists with subnet"):
            runtime.ensure_network(name, subnet="10.251.0.0/24", gateway="10.251.0.1", labels={})
        sandbox = runtime.create_pod(PodSandboxSpec(name=f"{name}-pod", labels={LABEL_MANAGED: "true"},
                                                    network=name))
        assert ipaddress.ip_address(sandbox.ip) in subnet
        assert [p.ip for p in runtime.list_pods({LABEL_MANAGED: "true"}) if p.id == sandbox.id] == [sandbox.ip]
        with pytest.raises(RuntimeError_):
            runtime.remove_network(name)  # a running pod uses it
        runtime.remove_pod(sandbox.id)
        runtime.remove_network(name)
        assert runtime.network_subnet(name) is None
        runtime.remove_network(name)  # a missing one is fine
    finally:
        for pod in runtime.list_pods({}):
            if pod.name == f"{name}-pod":
                with contextlib.suppress(RuntimeError_):
                    runtime.remove_pod(pod.id)
        with contextlib.suppress(RuntimeError_):
            runtime.remove_network(name)


def test_run_on_host_runs_here(runtime: PodmanRuntime) -> None:
    """run_on_host on a unix:// runtime runs the command on this machine, stdin passed through."""
    result = runtime.run_on_host(["cat"], stdin=b"hello")
    assert (result.exit_code, result.stdout) == (0, b"hello")


def test_host_commands_share_the_tunnels_ssh_connection(podman_service, sshd, tmp_path) -> None:
    """Over ssh://, run_on_host goes through the Podman tunnel's SSH master: it still works when the identity
    file is gone (no login of its own), and a runtime without a tunnel has to log in (and here cannot)."""
    import shutil

    key = tmp_path / "id"
    shutil.copy(sshd.identity, key)
    key.chmod(0o600)
    url = sshd.podman_url(podman_service.socket)
    remote = PodmanRuntime(url, identity=str(key), known_hosts=sshd.known_hosts)
    cold = PodmanRuntime(url, identity=str(key), known_hosts=sshd.known_hosts)
    try:
        remote.ping()  # the tunnel, and with it the master connection, is up
        key.unlink()
        done = remote.run_on_host(["sh", "-c", "echo shared"])
        assert (done.exit_code, done.stdout) == (0, b"shared\n")
        with pytest.raises(RuntimeError_):
            cold.run_on_host(["true"])  # a login of its own, without the key: refused
    finally:
        remote.close()
        cold.close()
