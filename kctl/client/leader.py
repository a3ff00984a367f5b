"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does.

The ControllerManager (kctl/controllers/manager.py) runs a `LeaderElector` so that when
two `kctl daemon`s share one store only one runs the controllers. The Lease
(kube-system/kctl-controller-manager by default; the namespace is created if missing,
as the node agent does for kube-node-lease) names its holder and when it last renewed:

- a candidate takes the Lease when it does not exist, has no holder (released), or its
  `renewTime + leaseDurationSeconds` has passed; every write carries the resourceVersion
  it read, so of two candidates racing for it one gets Conflict and stays a follower;
- the leader renews every `renew_interval`; when it cannot renew for `renew_deadline`
  (shorter than the lease duration), or finds another holder, it stops leading before
  anyone else can take over;
- on a clean stop the leader releases the Lease (empty holder), so a restarted daemon
  takes over at once (client-go's ReleaseOnCancel); a leader that dies without releasing
  is replaced once its lease expires, except by itself: see below.

`IdentityLock` gives `kctl daemon` (kctl/daemon/controlplane.py) a stable identity
for this host and store: `<hostname>_<slot>`, where slot is the first of
`<store>.leader-<slot>.lock` beside the store that this process can hold an exclusive
`fcntl.flock` on, for its whole life. A daemon restarted after kill -9 gets the same
slot (the kernel dropped the dead process's lock), so it finds its own name on the
Lease and takes it back at once instead of waiting for it to expire; a second daemon on
the same host and store gets the next slot, another identity, and stays a follower
while the first renews. Two daemons on one host can therefore never both lead.

Times are RFC 3339 MicroTime from `clock` (wall seconds; injectable for tests).
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import fcntl
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable

from kctl.machinery.errors import AlreadyExists, APIError, Conflict, NotFound
from kctl.machinery.times import parse_seconds

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.client.leader")

LEASE_NAMESPACE = "kube-system"


@dataclass(frozen=True)
class LeaderElectionSettings:
    """client-go's LeaderElectionConfig: which Lease, and its timings in seconds."""

    lease_name: str = "kctl-controller-manager"
    namespace: str = LEASE_NAMESPACE
    #: how long a Lease holds without renewal (leaseDurationSeconds, whole seconds)
    lease_duration: int = 15
    #: the leader gives up when it could not renew for this long (< lease_duration)
    renew_deadline: float = 10.0
    #: how often the leader renews
    renew_interval: float = 2.0
    #: how often a follower tries to take the Lease
    retry_interval: float = 2.0

    def __post_init__(self) -> None:
        if self.lease_duration < 1:
            raise ValueError("lease_duration must be at least 1 second")
        if not 0 < self.renew_deadline < self.lease_duration:
            raise ValueError("renew_deadline must be positive and shorter than lease_duration")
        if not 0 < self.renew_interval < self.renew_deadline:
            raise ValueError("renew_interval must be positive and shorter than renew_deadline")


def default_identity() -> str:
    """hostname_pid_random: unique per process, readable in `kctl get lease`."""
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


#: how many daemons on one host and store get a stable identity (more get a random one)
IDENTITY_SLOTS = 16


class IdentityLock:
    """A stable leader identity for this host and store, held by an exclusive flock (module doc)."""

    def __init__(self, store_path: str | Path, *, hostname: str | None = None,
                 slots: int = IDENTITY_SLOTS) -> None:
        self.store_path = Path(store_path)
        self.hostname = hostname or socket.gethostname()
        self.slots = max(1, slots)
        self.identity: str | None = None
        self.path: Path | None = None
        self._file: IO[bytes] | None = None

    def lock_path(self, slot: int) -> Path:
        return self.store_path.with_name(f"{self.store_path.name}.leader-{slot}.lock")

    def acquire(self) -> str:
        """Hold the first free slot's lock; its identity (a random one, logged, if none is free)."""
        if self.identity is not None:
            return self.identity
        for slot in range(self.slots):
            path = self.lock_path(slot)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                log.warning("cannot create %s (%s): this daemon's leader identity is not stable", path,
                            exc.strerror or exc)
                break
            handle = os.fdopen(fd, "r+b")
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()  # another live daemon holds this slot
                continue
            self._file, self.path = handle, path
            self.identity = f"{self.hostname}_{slot}"
            return self.identity
        else:
            log.warning("%d daemons already run on this host and store: this one's leader identity is not stable",
                        self.slots)
        self.identity = default_identity()
        return self.identity

    def release(self) -> None:
        """Give the slot up (the kernel does the same when the process dies)."""
        handle, self._file = self._file, None
        if handle is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()
        self.identity = self.path = None

    def __enter__(self) -> str:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def micro_time(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquires and renews one Lease; calls on_started_leading / on_stopped_leading."""

    def __init__(self, api: API, *, identity: str | None = None,
                 settings: LeaderElectionSettings = LeaderElectionSettings(),
                 on_started_leading: Callable[[], None] = lambda: None,
                 on_stopped_leading: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.time) -> None:
        self.api = api
        self.identity = identity or default_identity()
        self.settings = settings
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.clock = clock
        self._leading = threading.Event()
        self._last_renew = 0.0

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def wait_for_leadership(self, timeout: float | None = None) -> bool:
        return self._leading.wait(timeout)

    # -- the loop -------------------------------------------------------------------------

    def run(self, stop: threading.Event, *, release: Callable[[], bool] = lambda: True) -> None:
        """Try to lead until `stop` is set; then stop leading and release if `release()` says so."""
        s = self.settings
        try:
            while not stop.is_set():
                if not self.is_leader:
                    if self.try_acquire_or_renew():
                        log.info("%s: became leader (lease %s/%s)", self.identity, s.namespace, s.lease_name)
                        self._leading.set()
                        self._call(self.on_started_leading)
                        continue
                    stop.wait(s.retry_interval)
                    continue
                stop.wait(s.renew_interval)
                if stop.is_set():
                    break
                if not self._renew_until_deadline(stop):
                    if stop.is_set():
                        break
                    log.warning("%s: lost leadership (lease %s/%s)", self.identity, s.namespace, s.lease_name)
                    self._step_down()
        finally:
            if self.is_leader:
                self._step_down()
                if release():
                    self.release()

    def _renew_until_deadline(self, stop: threading.Event) -> bool:
        """Renew, retrying on errors until renew_deadline since the last renewal; False = lost."""
        s = self.settings
        while True:
            try:
                if self.try_acquire_or_renew(raise_errors=True):
                    return True
                return False  # someone else holds it
            except APIError as exc:
                log.warning("%s: cannot renew lease: %s", self.identity, exc)
            except Exception as exc:  # the store went away: same as an API error
                log.warning("%s: cannot renew lease: %s", self.identity, exc)
            if self.clock() - self._last_renew >= s.renew_deadline:
                return False
            if stop.wait(min(s.retry_interval, s.renew_interval)):
                return False

    def _step_down(self) -> None:
        self._leading.clear()
        self._call(self.on_stopped_leading)

    def _call(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:
            log.exception("%s: leader election callback failed", self.identity)

    # -- the Lease ------------------------------------------------------------------------

    def _lease_rt(self):
        return self.api.resource("leases")

    def get_lease(self) -> dict | None:
        try:
            return self.api.get(self._lease_rt(), self.settings.lease_name, namespace=self.settings.namespace)
        except NotFound:
            return None

    def try_acquire_or_renew(self, *, raise_errors: bool = False) -> bool:
        """One attempt to take or renew the Lease; True when this process now holds it."""
        try:
            return self._try_acquire_or_renew()
        except Conflict:
            return False  # another candidate wrote first
        except Exception as exc:
            if raise_errors:
                raise
            log.warning("%s: cannot acquire lease %s/%s: %s", self.identity, self.settings.namespace,
                        self.settings.lease_name, exc)
            return False

    def _try_acquire_or_renew(self) -> bool:
        s = self.settings
        now = self.clock()
        lease = self.get_lease()
        if lease is None:
            self._ensure_namespace()
            try:
                self.api.create({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": s.lease_name, "namespace": s.namespace},
                    "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": s.lease_duration,
                             "acquireTime": micro_time(now), "renewTime": micro_time(now),
                             "leaseTransitions": 0}})
            except AlreadyExists:
                return False
            self._last_renew = now
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity and not self.expired(spec, now):
            return False
        new = copy.deepcopy(lease)
        new_spec = new.setdefault("spec", {})
        if holder != self.identity:
            new_spec["acquireTime"] = micro_time(now)
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if holder else 0)
        new_spec.update({"holderIdentity": self.identity, "leaseDurationSeconds": s.lease_duration,
                         "renewTime": micro_time(now)})
        self.api.update(new)  # carries the resourceVersion read above: Conflict if anyone wrote since
        self._last_renew = now
        return True

    def expired(self, spec: dict, now: float) -> bool:
        """Whether a Lease spec's holder let it lapse (no renewTime counts as lapsed)."""
        renewed = parse_seconds(spec.get("renewTime")) or parse_seconds(spec.get("acquireTime"))
        if renewed is None:
            return True
        return renewed + float(spec.get("leaseDurationSeconds") or self.settings.lease_duration) < now

    def release(self) -> bool:
        """Give the Lease up if this process holds it (empty holder: free for the next at once)."""
        try:
            lease = self.get_lease()
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return False
            new = copy.deepcopy(lease)
            new["spec"].update({"holderIdentity": "", "leaseDurationSeconds": 1,
                                "renewTime": micro_time(self.clock())})
            self.api.update(new)
            log.info("%s: released lease %s/%s", self.identity, self.settings.namespace, self.settings.lease_name)
            return True
        except Exception as exc:
            log.warning("%s: cannot release lease: %s", self.identity, exc)
            return False

    def _ensure_namespace(self) -> None:
        rt = self.api.resource("namespaces")
        try:
            self.api.get(rt, self.settings.namespace)
        except NotFound:
            try:
                self.api.create({"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": self.settings.namespace}})
            except AlreadyExists:
                pass


__all__ = ["IDENTITY_SLOTS", "IdentityLock", "LEASE_NAMESPACE", "LeaderElectionSettings", "LeaderElector",
           "default_identity"]
