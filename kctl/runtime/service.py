"""A Podman REST service on a local unix socket: use the one that answers, or start one.

`kctl daemon` calls LocalPodmanService.ensure(DEFAULT_SOCKET) for the Node of its own
host, and the integration-test fixtures (tests/integration/conftest.py) start a private
service with its own storage. A service this module started is stopped by its PID only,
never by name; one it found running is left alone.

kctl/runtime/containers.conf is the containers.conf a kctl host needs: services started
here use it when the host has none, and `make system` installs it as the host's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from podman import PodmanClient

from kctl.runtime.interface import RuntimeError_

STOP_GRACE = 5.0          # seconds between SIGTERM and SIGKILL
PING_TIMEOUT = 2.0        # seconds one ping may take

CONTAINERS_CONF_FILE = Path(__file__).with_name("containers.conf")
SYSTEM_CONTAINERS_CONF = "/etc/containers/containers.conf"


def containers_conf_text() -> str:
    """The containers.conf recommended for kctl hosts (runc, cgroupfs, explicit ulimits)."""
    return CONTAINERS_CONF_FILE.read_text()


def default_conf() -> str | None:
    """The containers.conf for a service kctl starts: kctl's own, unless the host has one.

    None (inherit) when CONTAINERS_CONF is set or /etc/containers/containers.conf exists:
    the host's administrator has chosen.
    """
    if os.environ.get("CONTAINERS_CONF") or os.path.exists(SYSTEM_CONTAINERS_CONF):
        return None
    return str(CONTAINERS_CONF_FILE)


def ping(socket_path: str, *, timeout: float = PING_TIMEOUT) -> bool:
    """True when a Podman service answers on the unix socket."""
    if not os.path.exists(socket_path):
        return False
    try:
        with PodmanClient(base_url=f"unix://{socket_path}", timeout=timeout) as client:
            return bool(client.ping())
    except Exception:  # noqa: BLE001 - any failure means "not answering"
        return False


def service_command(socket_path: str, *, root: str | None = None,
                    runroot: str | None = None) -> list[str]:
    """argv of `podman [--root R --runroot RR] system service --time=0 unix://SOCKET`."""
    command = ["podman"]
    if root:
        command += ["--root", root]
    if runroot:
        command += ["--runroot", runroot]
    return [*command, "system", "service", "--time=0", f"unix://{socket_path}"]


def log_path_for(socket_path: str) -> str:
    """The service's log file: next to the socket, named after it (podman.sock -> podman.log)."""
    path = Path(socket_path)
    return str(path.with_name(f"{path.stem}.log"))


@dataclass
class LocalPodmanService:
    """A Podman service on `socket_path`; `process` is set only when we started it."""

    socket_path: str
    log_path: str | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def owned(self) -> bool:
        """True when this object started the service (and stop() will end it)."""
        return self.process is not None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @classmethod
    def ensure(cls, socket_path: str, *, conf: str | None = None, root: str | None = None,
               runroot: str | None = None, timeout: float = 15) -> "LocalPodmanService":
        """The service answering on socket_path, started (setsid, logged) if none answers.

        `conf` becomes CONTAINERS_CONF of a service we start (else it inherits ours);
        `root`/`runroot` give it its own storage. RuntimeError_ when it does not come up
        within `timeout` seconds (the process is then stopped again).
        """
        socket_path = os.path.abspath(socket_path)
        if ping(socket_path):
            return cls(socket_path=socket_path)
        service = cls(socket_path=socket_path, log_path=log_path_for(socket_path))
        service._start(conf=conf, root=root, runroot=runroot)
        service._wait_until_answering(timeout)
        return service

    def _start(self, *, conf: str | None, root: str | None, runroot: str | None) -> None:
        """Start the service in the socket's folder (conmon drops an `oom` file in its cwd)."""
        folder = Path(self.socket_path).parent
        if not folder.exists():
            folder.mkdir(mode=0o700, parents=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)  # a stale socket of a service that is gone
        env = dict(os.environ)
        if conf:
            env["CONTAINERS_CONF"] = conf
        assert self.log_path is not None
        with open(self.log_path, "ab") as log:
            try:
                self.process = subprocess.Popen(
                    service_command(self.socket_path, root=root, runroot=runroot),
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=env, cwd=folder, start_new_session=True)
            except OSError as error:
                raise RuntimeError_(f"cannot start podman system service: {error}") from error

    def _wait_until_answering(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ping(self.socket_path, timeout=min(PING_TIMEOUT, timeout)):
            exited = self.process is not None and self.process.poll() is not None
            if exited or time.monotonic() > deadline:
                self.stop()
                why = "exited" if exited else f"did not answer within {timeout:g} s"
                raise RuntimeError_(f"podman service on {self.socket_path} {why}: {self._last_log_line()}")
            time.sleep(0.05)

    def _last_log_line(self) -> str:
        try:
            lines = Path(self.log_path or "").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return lines[-1] if lines else "(empty log)"

    def stop(self, *, grace: float = STOP_GRACE) -> None:
        """End the service if we started it: SIGTERM, then SIGKILL after `grace` seconds."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                process.wait()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)

    def __enter__(self) -> "LocalPodmanService":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
