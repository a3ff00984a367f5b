"""Several `kctl daemon`s on a test bed's control hosts, sharing its etcd store: `ControlDaemons`.

A bed brought up with control hosts (kctl.testing.testbed: `up(n, control=3)` or
`start_control(3)`) runs one TLS etcd cluster, a member per control host. `ControlDaemons`
adds what issue 17's HA setup needs on top, as docs/ha.md describes it for real hosts:

- an admin state folder (`<folder>/admin`, the `--etcd-state-dir` of the commands run from
  this machine: the store's key file and kctl's known_hosts live there); `prepare()` makes
  the key file (one throwaway Secret), so every copy seals Secrets with the same key;
- per control host cN a copy of that folder (`<folder>/cN/state`: the same key file and
  known_hosts, a leader lock file of its own) and one `kctl daemon` run inside cN (its
  network namespace, and a UTS namespace whose hostname is cN: leader identity `cN_0`),
  with short leader-election timings, its log in `<folder>/cN/daemon.log`; its --store
  lists cN's own etcd member first (`own_member_first`);
- `kctl(...)` runs a kctl command on the store (from this machine or inside a control host,
  through every member or only the named ones), `api(...)` gives an in-process APIServer
  on the store, `lease()`/`leader()` read the leader Lease (kube-system/kctl-controller-manager).

Used by tests/e2e/test_ha.py and benchmarks/failover.py. Needs root (the bed) and the etcd
backend (kctl.store.etcd).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from kctl.testing.processes import spawn
from kctl.testing.testbed import TestBed, TestBedError

if TYPE_CHECKING:
    from kctl.apiserver.server import APIServer

LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "kctl-controller-manager"
STOP_TIMEOUT = 30.0   # seconds a daemon may take to stop after SIGTERM before SIGKILL
KCTL_TIMEOUT = 120.0  # seconds one kctl command may take


@dataclass
class ControlDaemon:
    """One `kctl daemon` of a control host: its state folder, its log and its process."""

    host: str
    state_dir: Path
    log: Path
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


class ControlDaemons:
    """A `kctl daemon` in each control host of `bed`, on its etcd store (module doc)."""

    def __init__(self, bed: TestBed, folder: str | os.PathLike, *, lease_duration: int = 6,
                 renew_deadline: float = 4.0, retry_period: float = 1.0, extra: Sequence[str] = (),
                 log_level: str = "info") -> None:
        self.bed = bed
        self.folder = Path(folder).resolve()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.extra = tuple(extra)
        self.log_level = log_level
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.admin_dir.mkdir(mode=0o700, exist_ok=True)
        self.daemons = {host.name: ControlDaemon(host=host.name, state_dir=self.folder / host.name / "state",
                                                 log=self.folder / host.name / "daemon.log")
                        for host in bed.control_hosts}
        if not self.daemons:
            raise TestBedError(f"the test bed in {bed.folder} has no control hosts")

    # -- the store, from this machine or a control host ---------------------------------------------

    @property
    def admin_dir(self) -> Path:
        """The --etcd-state-dir of commands run from this machine (key file, known_hosts)."""
        return self.folder / "admin"

    @property
    def names(self) -> list[str]:
        return list(self.daemons)

    def env(self, *, state_dir: Path | None = None, members: Sequence[str] = ()) -> dict[str, str]:
        """The environment choosing the bed's etcd store (only the named members, when given)."""
        info = self.bed.etcd
        return {**os.environ, "KCTL_STORE": self.bed.etcd_address(*members) if members else info.address,
                "KCTL_ETCD_CAFILE": info.ca_file, "KCTL_ETCD_CERTFILE": info.cert_file,
                "KCTL_ETCD_KEYFILE": info.key_file, "KCTL_ETCD_STATE_DIR": str(state_dir or self.admin_dir)}

    def kctl(self, *args: str, host: str | None = None, members: Sequence[str] = (), input: bytes | None = None,
             timeout: float = KCTL_TIMEOUT) -> subprocess.CompletedProcess:
        """`kctl ARGS...` on the store (bytes out): from this machine, or inside control host `host` (with
        that host's state folder); through every member, or only the named ones."""
        argv = [sys.executable, "-m", "kctl", *args]
        state_dir = None
        if host is not None:
            argv = self.bed.control_command(host, argv)
            state_dir = self.daemons[host].state_dir
        return subprocess.run(argv, input=input, capture_output=True, timeout=timeout,
                              env=self.env(state_dir=state_dir, members=members), stdin=None if input else
                              subprocess.DEVNULL)

    def check(self, *args: str, host: str | None = None, members: Sequence[str] = (), input: bytes | None = None,
              timeout: float = KCTL_TIMEOUT) -> subprocess.CompletedProcess:
        """kctl(...) that must succeed (TestBedError with its stderr otherwise)."""
        done = self.kctl(*args, host=host, members=members, input=input, timeout=timeout)
        if done.returncode != 0:
            raise TestBedError(f"kctl {' '.join(args[:4])}: {done.stderr.decode(errors='replace').strip()}")
        return done

    @contextlib.contextmanager
    def api(self, *members: str, user: str = "ha") -> Iterator[APIServer]:
        """An in-process APIServer on the store, through the named members only (all when none are given)."""
        from kctl.apiserver.server import APIServer
        from kctl.store.etcd.address import EtcdTLS
        from kctl.store.open import open_store

        info = self.bed.etcd
        store = open_store(self.bed.etcd_address(*members) if members else info.address, state_dir=self.admin_dir,
                           tls=EtcdTLS(ca_file=info.ca_file, cert_file=info.cert_file, key_file=info.key_file))
        api = APIServer(store, user=user)
        try:
            yield api
        finally:
            api.close()
            with contextlib.suppress(Exception):
                store.close()

    # -- the daemons ---------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Make the store's key file in the admin folder (a throwaway Secret), so the copies share it."""
        secret = b'{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kctl-ha-key", "namespace": ' \
                 b'"default"}, "stringData": {"k": "v"}}'
        self.check("apply", "-f", "-", input=secret)
        self.check("delete", "secret", "kctl-ha-key", "-n", "default")
        if not any(self.admin_dir.glob("*.keys")):
            raise TestBedError(f"no key file appeared in {self.admin_dir} after writing a Secret")

    def daemon_argv(self) -> list[str]:
        return [sys.executable, "-m", "kctl", "daemon", "--log-level", self.log_level,
                "--leader-elect-lease-duration", str(self.lease_duration),
                "--leader-elect-renew-deadline", f"{self.renew_deadline:g}",
                "--leader-elect-retry-period", f"{self.retry_period:g}", *self.extra]

    def own_member_first(self, name: str) -> list[str]:
        """The members a daemon on control host `name` lists: its own first, then the others (docs/ha.md: a
        daemon keeps talking to the member on its own host, as kubeadm's API servers talk to their local etcd,
        and another host's loss never leaves it waiting on that host's member)."""
        return [name, *(other for other in self.names if other != name)]

    def start(self, *names: str) -> None:
        """Start the daemon of each named control host (all by default), on a fresh copy of the admin folder."""
        for name in names or self.names:
            daemon = self.daemons[name]
            if daemon.running:
                continue
            if not daemon.state_dir.exists():
                shutil.copytree(self.admin_dir, daemon.state_dir, ignore=shutil.ignore_patterns("*.lock"))
                daemon.state_dir.chmod(0o700)
            daemon.process = spawn(self.bed.control_command(name, self.daemon_argv()), log=daemon.log,
                                   env=self.env(state_dir=daemon.state_dir, members=self.own_member_first(name)))

    def stop(self, *names: str, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the named daemons (all by default): sig, SIGKILL after timeout seconds."""
        chosen = [self.daemons[name] for name in names or self.names]
        for daemon in chosen:
            if daemon.running:
                with contextlib.suppress(ProcessLookupError):
                    daemon.process.send_signal(sig)  # type: ignore[union-attr]
        for daemon in chosen:
            if daemon.process is None:
                continue
            try:
                daemon.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                daemon.process.kill()
                daemon.process.wait()
            daemon.process = None

    def logs(self, *, lines: int = 20) -> str:
        """The last lines of every daemon's log, for a failure message."""
        parts = []
        for name, daemon in self.daemons.items():
            tail = "\n".join(daemon.log_text().splitlines()[-lines:])
            parts.append(f"--- {name} ({'running' if daemon.running else 'stopped'}) ---\n{tail}")
        return "\n".join(parts)

    # -- leadership ----------------------------------------------------------------------------------

    def lease(self, api: APIServer) -> dict | None:
        """The leader Lease (None when there is none yet)."""
        from kctl.machinery.errors import NotFound

        try:
            return api.get(api.resource("leases"), LEASE_NAME, namespace=LEASE_NAMESPACE)
        except NotFound:
            return None

    def leader(self, api: APIServer) -> str | None:
        """The control host whose daemon holds the Lease (its identity is `<hostname>_<slot>`), or None."""
        lease = self.lease(api)
        holder = ((lease or {}).get("spec") or {}).get("holderIdentity") or ""
        host = holder.rsplit("_", 1)[0]
        return host if host in self.daemons else None

    def wait_leader(self, api: APIServer, *, timeout: float, other_than: str | None = None,
                    poll: float = 0.1) -> tuple[str, float]:
        """Until a control host other than `other_than` holds the Lease: (that host, seconds waited);
        TestBedError with the daemons' logs on timeout. Store errors (a lost member) count as "not yet"."""
        start = time.monotonic()
        seen: object = None
        while True:
            try:
                leader = self.leader(api)
                seen = leader
            except Exception as error:  # noqa: BLE001 - the store may fail while a member is cut
                leader, seen = None, f"{type(error).__name__}: {error}"
            if leader is not None and leader != other_than:
                return leader, time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise TestBedError(f"no new leader within {timeout:g} s (last seen: {seen})\n{self.logs()}")
            time.sleep(poll)


__all__ = ["ControlDaemon", "ControlDaemons", "LEASE_NAME", "LEASE_NAMESPACE"]
