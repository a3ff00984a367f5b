"""Fixtures for the end-to-end tests: a test bed of three SSH hosts and a `kctl daemon` driving them.

`testbed` (session): kctl.testing.testbed.TestBed with hosts h1-h3 (network namespaces,
each with its own address, sshd, Podman storage and service, the demo image) in a
temporary folder. Its teardown runs `down`, which works from the bed's state file, so
everything goes also when a test fails or the bed came up only in part.

`cluster` (module): a store in a temporary folder; h1-h3 added as a user would
(`kctl node add` with the bed's key and socket, `kctl node trust --yes`); and
`kctl daemon` with short node-lifecycle timings (--node-monitor-grace-period 6,
--default-toleration-seconds 4, heartbeat 1 s), whose image source is the control host's
Podman: the private service of tests/integration/conftest.py (`podman_service`, with
the demo image). The daemon is stopped after the module.

Without root, ip or nsenter the tests are skipped (they need network namespaces); with
them but without podman or sshd they fail: `make test` installs those.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

from integration.agent.conftest import Daemon, wait_for
from integration.conftest import podman_service  # noqa: F401 - the control host's Podman (image source)
from kctl.apiserver.server import APIServer
from kctl.machinery.errors import NotFound
from kctl.store.sqlite import Store
from kctl.runtime.interface import LABEL_CONTAINER, ContainerState
from kctl.runtime.podman import PodmanRuntime
from kctl.testing.testbed import Host, TestBed, TestBedError

HOSTS = ("h1", "h2", "h3")
GRACE = 6.0          # --node-monitor-grace-period of the tests' daemon
TOLERATION = 4.0     # --default-toleration-seconds
WAIT = 90.0          # seconds any one condition may take before a test fails


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: needs root and a test bed of SSH hosts (tests/e2e)")
    # The node-mode test reuses tests/integration's NodeModeDaemon; its module marks itself so.
    config.addinivalue_line("markers", "integration: needs a real Podman (tests/integration)")


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the e2e tests need root (network namespaces, rootful Podman)"
    missing = [tool for tool in ("ip", "nsenter") if shutil.which(tool) is None]
    return f"the e2e tests need {' and '.join(missing)} (iproute2, util-linux)" if missing else None


@pytest.fixture(scope="session")
def testbed() -> Iterator[TestBed]:
    """Three hosts h1-h3 on a bed of their own; removed after the session, whatever happened."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    bed = TestBed(tempfile.mkdtemp(prefix="kctl-e2e-bed-"))
    try:
        try:
            bed.up(len(HOSTS))
        except TestBedError as error:
            pytest.fail(f"the test bed did not come up: {error}")
        yield bed
    finally:
        bed.down()


@dataclass
class Cluster:
    """The store, the daemon and the bed of a module's tests, with the checks they share."""

    bed: TestBed
    store: Path
    api: APIServer
    daemon: Daemon

    def kctl(self, *args: str, input: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run `kctl ARGS...` on the store (bytes out)."""
        return subprocess.run([sys.executable, "-m", "kctl", *args], input=input, capture_output=True,
                              timeout=timeout, env={**os.environ, "KCTL_STORE": str(self.store)})

    def add_node(self, name: str) -> None:
        """`kctl node add` the bed's host `name` and trust its key, as the README says."""
        added = self.kctl("node", "add", name, *self.bed.node_add_args(name))
        assert added.returncode == 0, added.stderr.decode()
        trusted = self.kctl("node", "trust", name, "--yes")
        assert trusted.returncode == 0, trusted.stderr.decode()

    def wait(self, check: Callable[[], object], *, what: str, timeout: float = WAIT,
             detail: Callable[[], object] | None = None) -> object:
        return wait_for(check, what=what, timeout=timeout, daemon=self.daemon, detail=detail)

    def ready(self, node: str) -> str:
        """The status of the Node's Ready condition ("" when it has none or is gone)."""
        try:
            obj = self.api.get(self.api.resource("nodes"), node)
        except NotFound:
            return ""
        return next((c.get("status", "") for c in (obj.get("status") or {}).get("conditions") or ()
                     if c.get("type") == "Ready"), "")

    def pods(self, namespace: str) -> list[dict]:
        return self.api.list(self.api.resource("pods"), namespace=namespace)[0]

    def running(self, namespace: str) -> list[dict]:
        """The namespace's pods that are Running and not being deleted."""
        return [pod for pod in self.pods(namespace) if (pod.get("status") or {}).get("phase") == "Running"
                and not pod["metadata"].get("deletionTimestamp")]

    def events(self, namespace: str, reason: str) -> list[dict]:
        return [e for e in self.api.list(self.api.resource("events"), namespace=namespace)[0]
                if e.get("reason") == reason]

    def containers(self, host: Host, namespace: str) -> list[ContainerState]:
        """The app containers (no infra) kctl made on host's Podman for pods of namespace."""
        with contextlib.closing(PodmanRuntime(host.url)) as runtime:
            return [c for c in runtime.list_containers({"io.kctl.pod.namespace": namespace})
                    if LABEL_CONTAINER in c.labels]

    def apply(self, *objects: dict) -> None:
        applied = self.kctl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects).encode())
        assert applied.returncode == 0, applied.stderr.decode()

    def exec(self, pod: str, namespace: str, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """`kctl exec POD -n NAMESPACE -- ARGV...` (bytes out), e.g. a client's requests from inside a pod."""
        return self.kctl("exec", pod, "-n", namespace, "--", *argv, timeout=timeout)

    def delete_namespace(self, namespace: str) -> None:
        """Delete a test's namespace and wait until it (its pods and their containers) is gone."""
        deleted = self.kctl("delete", "namespace", namespace, "--ignore-not-found", "--wait", "--timeout", "120",
                            timeout=150)
        assert deleted.returncode == 0, deleted.stderr.decode() + "\n" + self.daemon.log_text()[-3000:]


@contextlib.contextmanager
def running_cluster(testbed: TestBed, podman_service, folder: Path, *, user: str,
                    extra: tuple[str, ...]) -> Iterator[Cluster]:
    """h1-h3 added to a new store in folder with `kctl node add` + `node trust`, and `kctl daemon`
    (with extra flags) Ready on them; the daemon is stopped and the store closed after."""
    store_file = folder / "kctl.db"
    daemon = Daemon(store=store_file, url=podman_service.url, log=folder / "daemon.log",
                    extra=("--image-source", podman_service.url, *extra))
    store = Store(store_file)
    try:
        cluster = Cluster(bed=testbed, store=store_file, api=APIServer(store, user=user), daemon=daemon)
        for name in HOSTS:
            cluster.add_node(name)
        daemon.start()
        for name in HOSTS:
            cluster.wait(lambda name=name: cluster.ready(name) == "True", what=f"node {name} Ready")
        yield cluster
    finally:
        daemon.stop()
        store.close()


@contextlib.contextmanager
def namespace_of_test(cluster: Cluster, request: pytest.FixtureRequest, prefix: str) -> Iterator[str]:
    """A namespace named after the test, deleted (pods and containers too) after it, whatever happened."""
    name = prefix + request.node.name.removeprefix("test_").replace("_", "-")[:40].rstrip("-")
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        cluster.delete_namespace(name)


@pytest.fixture(scope="module")
def cluster(testbed: TestBed, podman_service, tmp_path_factory) -> Iterator[Cluster]:  # noqa: F811
    """h1-h3 and `kctl daemon` with the short timings of this suite."""
    with running_cluster(testbed, podman_service, tmp_path_factory.mktemp("cluster"), user="e2e", extra=(
            "--node-monitor-grace-period", str(GRACE), "--default-toleration-seconds", str(TOLERATION))) as c:
        yield c


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own, deleted (pods and containers too) after it, whatever happened."""
    with namespace_of_test(cluster, request, "e2e-") as name:
        yield name
