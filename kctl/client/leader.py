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

Terms. As client-go, `spec.leaseTransitions` goes up by one each time the holder changes
(also from a released, empty holder); a holder renewing or taking its own Lease back keeps
it. `LeaderElector.term` is that number for the current leadership (None while not
leading): two leaderships of different holders never share a term, and a later one has the
higher term, so the node agents fence the hosts they drive with it (kctl.runtime.fencing).
`add_listener(fn)` tells of every change: fn(term) right after leadership starts, fn(None)
when it ends, *before* on_stopped_leading (the agents stop before the controllers' slower
term ends). A watchdog ends leadership as soon as renew_deadline has passed since the last
renewal, even while a renewal call hangs on an unanswering store, so the leader stops
acting at least lease_duration - renew_deadline before another candidate may take over.

Raising the term. Terms only go up while the Lease lives: deleting it starts them again at
0, `kctl restore` of an older backup puts an older count back, and a new store's leaders start
low on hosts an earlier store's leaders fenced. The holder of the Lease is the only legitimate
driver, so a host fenced by a higher term N than the holder's was fenced by a leader that no
longer holds this Lease: `raise_term(N)` (called by the node agent supervisor when a host refused
its fence) sets the Lease's leaseTransitions to N + 1 (or more) by a compare-and-swap update of
the Lease it read, only while this process holds it (a Conflict: read again and re-check), then
makes that the term and tells the listeners fn(new term) (leadership goes on: on_started_leading
is not called again). A process that does not hold the Lease raises nothing.

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
        problem = election_timing_problem(self.lease_duration, self.renew_deadline, self.renew_interval,
                                          self.retry_interval)
        if problem:
            raise ValueError(problem)


def election_timing_problem(lease_duration: float, renew_deadline: float, renew_interval: float,
                            retry_interval: float) -> str:
    """What is wrong with leader-election timings, in one line ("" when nothing): kube-controller-manager's
    checks (lease duration > renew deadline > retry period > 0), lease duration in whole seconds."""
    if lease_duration < 1 or lease_duration != int(lease_duration):
        return f"the lease duration must be a whole number of seconds, at least 1 (got {lease_duration:g})"
    if not 0 < renew_deadline < lease_duration:
        return (f"the renew deadline ({renew_deadline:g}s) must be positive and shorter than the lease duration"
                f" ({lease_duration:g}s)")
    if not 0 < retry_interval < renew_deadline:
        return (f"the retry period ({retry_interval:g}s) must be positive and shorter than the renew deadline"
                f" ({renew_deadline:g}s)")
    if not 0 < renew_interval < renew_deadline:
        return (f"the renew interval ({renew_interval:g}s) must be positive and shorter than the renew deadline"
                f" ({renew_deadline:g}s)")
    return ""


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
        self._transitions: int | None = None  # leaseTransitions of the Lease as this process last wrote it
        self._term: int | None = None
        self._state = threading.Condition()  # guards _term and the listeners; notified on every change
        # held through a whole start or end of leadership, callbacks included: the watchdog's step-down and the
        # loop's next acquisition (or its final release) never overlap
        self._transition = threading.Lock()
        self._listeners: list[Callable[[int | None], None]] = []
        # one read-modify-write of the Lease at a time in this process: a renewal never meets a Conflict
        # from this process's own raise_term (which it would take for another holder)
        self._lease_lock = threading.Lock()

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    @property
    def term(self) -> int | None:
        """The Lease's leaseTransitions of the current leadership; None while not leading."""
        with self._state:
            return self._term

    def wait_for_leadership(self, timeout: float | None = None) -> bool:
        return self._leading.wait(timeout)

    def wait_for_term(self, predicate: Callable[[int | None], bool], timeout: float | None = None) -> bool:
        """Wait until predicate(term) holds (e.g. `lambda t: t is not None`); False on timeout."""
        with self._state:
            return self._state.wait_for(lambda: predicate(self._term), timeout)

    def add_listener(self, callback: Callable[[int | None], None]) -> None:
        """Call callback(term) when leadership starts and callback(None) when it ends (module doc);
        a listener added while leading is called at once with the current term."""
        with self._state:
            self._listeners.append(callback)
            term = self._term
        if term is not None:
            self._notify_one(callback, term)

    def remove_listener(self, callback: Callable[[int | None], None]) -> None:
        with self._state:
            if callback in self._listeners:
                self._listeners.remove(callback)

    # -- the loop -------------------------------------------------------------------------

    def run(self, stop: threading.Event, *, release: Callable[[], bool] = lambda: True) -> None:
        """Try to lead until `stop` is set; then stop leading and release if `release()` says so."""
        s = self.settings
        watchdog = threading.Thread(target=self._watch_deadline, args=(stop,), name="leader-deadline", daemon=True)
        watchdog.start()
        try:
            while not stop.is_set():
                if not self.is_leader:
                    if self.try_acquire_or_renew():
                        self._start_leading()
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
            if self._step_down() and release():  # (waits for a step-down under way: agents stop before)
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

    def _start_leading(self) -> None:
        s = self.settings
        with self._transition:
            with self._state:
                self._term = self._transitions if self._transitions is not None else 0
                term = self._term
                self._leading.set()
                self._state.notify_all()
            log.info("%s: became leader (lease %s/%s, term %d)", self.identity, s.namespace, s.lease_name, term)
            self._call(self.on_started_leading)
            self._notify(term)

    def _step_down(self) -> bool:
        """End leadership once (the watchdog and the loop may both try): listeners, then on_stopped_leading.
        True when this call ended it; a call while another ends it waits for that to finish."""
        with self._transition:
            with self._state:
                if not self._leading.is_set():
                    return False
                self._leading.clear()
                self._term = None
                self._state.notify_all()
            self._notify(None)
            self._call(self.on_stopped_leading)
            return True

    def _watch_deadline(self, stop: threading.Event) -> None:
        """Step down once renew_deadline has passed since the last renewal, even while a renewal hangs."""
        s = self.settings
        period = max(0.01, min(0.5, s.renew_interval / 2))
        while not stop.wait(period):
            if self.is_leader and self.clock() - self._last_renew >= s.renew_deadline:
                log.warning("%s: could not renew lease %s/%s within %gs: stepping down", self.identity,
                            s.namespace, s.lease_name, s.renew_deadline)
                self._step_down()

    def _notify(self, term: int | None) -> None:
        with self._state:
            listeners = list(self._listeners)
        for callback in listeners:
            self._notify_one(callback, term)

    def _notify_one(self, callback: Callable[[int | None], None], term: int | None) -> None:
        try:
            callback(term)
        except Exception:
            log.exception("%s: leadership listener failed", self.identity)

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
            with self._lease_lock:
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
            self._last_renew, self._transitions = now, 0
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity and not self.expired(spec, now):
            return False
        new = copy.deepcopy(lease)
        new_spec = new.setdefault("spec", {})
        if holder != self.identity:  # a new holder (also after a release): a new term, as client-go
            new_spec["acquireTime"] = micro_time(now)
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        new_spec.update({"holderIdentity": self.identity, "leaseDurationSeconds": s.lease_duration,
                         "renewTime": micro_time(now)})
        self.api.update(new)  # carries the resourceVersion read above: Conflict if anyone wrote since
        self._last_renew, self._transitions = now, int(new_spec.get("leaseTransitions") or 0)
        return True

    def raise_term(self, past: int, *, current: int | None = None, attempts: int = 5) -> int | None:
        """Raise this leadership's term above `past` (module doc: raising the term); the new term.

        None, with nothing written, when this process is not leading, its term is no longer `current` (when
        given), or the Lease (read again after every Conflict) is not held by it any more. The store's errors,
        and a Conflict `attempts` times in a row, are raised: nothing changed, the caller may try again."""
        s = self.settings
        term = self.term
        if term is None or (current is not None and term != current):
            return None
        for attempt in range(attempts):
            with self._lease_lock:  # the store's calls are made outside _transition: the watchdog never waits
                lease = self.get_lease()
                spec = (lease or {}).get("spec") or {}
                if (lease is None or not self.is_leader or spec.get("holderIdentity") != self.identity
                        or self.expired(spec, self.clock())):
                    return None
                raised = max(int(past), term, int(spec.get("leaseTransitions") or 0)) + 1
                new = copy.deepcopy(lease)
                new.setdefault("spec", {})["leaseTransitions"] = raised
                try:
                    self.api.update(new)  # carries the resourceVersion read above
                except Conflict:
                    if attempt + 1 == attempts:
                        raise
                    continue  # someone wrote it since: read it again (still ours?)
                self._transitions = raised
            break
        with self._transition:  # leadership may have ended meanwhile: then the higher count only waits for the next
            with self._state:
                if self._term != term or not self._leading.is_set():
                    return None
                self._term = raised
                self._state.notify_all()
            log.info("%s: term raised from %d to %d (lease %s/%s)", self.identity, term, raised, s.namespace,
                     s.lease_name)
            self._notify(raised)
        return raised

    def expired(self, spec: dict, now: float) -> bool:
        """Whether a Lease spec's holder let it lapse (no renewTime counts as lapsed)."""
        renewed = parse_seconds(spec.get("renewTime")) or parse_seconds(spec.get("acquireTime"))
        if renewed is None:
            return True
        return renewed + float(spec.get("leaseDurationSeconds") or self.settings.lease_duration) < now

    def release(self) -> bool:
        """Give the Lease up if this process holds it (empty holder: free for the next at once)."""
        try:
            with self._lease_lock:
                return self._release()
        except Exception as exc:
            log.warning("%s: cannot release lease: %s", self.identity, exc)
            return False

    def _release(self) -> bool:
        lease = self.get_lease()
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return False
        new = copy.deepcopy(lease)
        new["spec"].update({"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": micro_time(self.clock())})
        self.api.update(new)
        log.info("%s: released lease %s/%s", self.identity, self.settings.namespace, self.settings.lease_name)
        return True

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
           "default_identity", "election_timing_problem"]
