"""Fixtures for end-to-end tests of `kctl daemon` against the session's private Podman.

`daemon` starts `kctl daemon` as a user would (a subprocess, its own store file, the Node
named `it-node` reached through the private service's socket) with quick back-off and
heartbeats, and stops it after the test (SIGTERM, then SIGKILL). `kctl` runs the CLI on
that store. Every kctl-labelled pod, container and volume is removed after each test by
the `runtime` fixture, whatever the test did.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest

from kctl.apiserver.server import APIServer
from kctl.machinery.errors import NotFound
from kctl.store.sqlite import Store

NODE = "it-node"
WAIT = 60.0  # seconds any one condition may take before a test fails


@dataclass
class Daemon:
    """A `kctl daemon` subprocess on a store; start() again after kill() to restart it."""

    store: Path
    url: str
    log: Path
    extra: tuple[str, ...] = ()
    process: subprocess.Popen | None = field(default=None, repr=False)

    def start(self) -> None:
        argv = [sys.executable, "-m", "kctl", "daemon", "--store", str(self.store), "--node", NODE,
                "--podman-url", self.url, "--resync", "1", "--heartbeat", "1",
                "--backoff-initial", "0.5", "--backoff-max", "2", "--log-level", "debug", *self.extra]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                            env={**os.environ, "KCTL_STORE": str(self.store)})

    def kill(self, sig: int = signal.SIGKILL) -> int:
        """Send `sig` and wait for the exit status."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=30)
        finally:
            self.process = None

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    return tmp_path / "kctl.db"


@pytest.fixture
def api(store_file: Path) -> Iterator[APIServer]:
    """The API over the daemon's store (another connection to the same SQLite file)."""
    store = Store(store_file)
    try:
        yield APIServer(store, user="it")
    finally:
        store.close()


@pytest.fixture
def daemon(podman_service, runtime, store_file: Path, api: APIServer, tmp_path: Path) -> Iterator[Daemon]:
    """`kctl daemon` running on the private Podman; its node is Ready when the test starts."""
    proc = Daemon(store=store_file, url=podman_service.url, log=tmp_path / "daemon.log")
    proc.start()
    try:
        wait_for(lambda: _node_ready(api), what="node it-node Ready", daemon=proc)
        yield proc
    finally:
        proc.stop()


def _node_ready(api: APIServer) -> bool:
    try:
        node = api.get(api.resource("nodes"), NODE)
    except NotFound:
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def wait_for(check: Callable[[], object], *, what: str, timeout: float = WAIT,
             daemon: Daemon | None = None, detail: Callable[[], object] | None = None) -> object:
    """Poll `check` until it returns something truthy; fail naming `what` (and the daemon's log tail)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            tail = "\n".join(daemon.log_text().splitlines()[-30:]) if daemon else ""
            seen = f" (last seen: {detail()})" if detail else ""
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}{seen}\n{tail}")
        time.sleep(0.2)


@pytest.fixture
def kctl(store_file: Path) -> Callable[..., subprocess.CompletedProcess]:
    """Run `kctl ARGS...` on the daemon's store; returns the completed process (bytes)."""

    def run(*args: str, input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kctl", *args], input=input, capture_output=True,
                              timeout=timeout, env={**os.environ, "KCTL_STORE": str(store_file)})

    return run
