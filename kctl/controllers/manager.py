"""The controller manager: runs controllers' workers while this process holds the lease.

`kctl daemon` builds one `ControllerManager` with its controllers (kctl/controllers/*).
While it leads (kctl/client/leader.py) it runs a *term*: a fresh InformerFactory,
one WorkQueue per controller, `controller.register(ctx, queue)`, informers started and
synced, then `workers` threads per controller that loop get -> reconcile -> done:

- success forgets the key's back-off, and a returned number re-queues it after that
  many seconds;
- an exception is logged (one line, with the key) and the key re-queued: rate-limited
  when the error is temporary, after a long wait with a Warning Event when it is
  permanent (kctl.controllers.base.handle_reconcile_error).

Losing the lease ends the term (queues shut down, informers stopped); winning it again
starts a new one, so a controller's `register` may be called more than once. Ending a
term waits up to `join_seconds` for the workers' passes to finish, then records the
Events that passes still running had deferred (DeferredEvents.flush_all), so a stop
(SIGTERM) loses no Event about a write already made; `stop()` then releases the Lease.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Sequence

from kctl.client.informer import InformerFactory
from kctl.client.leader import LeaderElectionSettings, LeaderElector, default_identity
from kctl.client.workqueue import ExponentialBackoff, WorkQueue
from kctl.controllers.base import (Controller, ControllerContext, ControllerSettings, DeferredEvents, Recorder,
                                   handle_reconcile_error)

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.controllers.manager")

#: a failed key's re-queue delay: 5 ms doubling, as client-go's DefaultControllerRateLimiter (kctl caps it
#: at 60 s, not 1,000 s); a Conflict between two controllers' writes costs milliseconds, not 50 ms
CONTROLLER_BACKOFF = ExponentialBackoff(base=0.005, cap=60.0)
#: how long ending a term waits for the workers' passes
JOIN_SECONDS = 10.0
#: how much longer stop() waits for the elector (which ends the term, then releases the Lease)
STOP_MARGIN_SECONDS = 5.0


class _Term:
    """One period of leadership: its informers, queues and worker threads."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.informers: InformerFactory | None = None
        self.queues: dict[str, WorkQueue[str]] = {}
        self.threads: list[threading.Thread] = []
        self.ready = threading.Event()


class ControllerManager:
    """Runs the given controllers while this process is the leader (see module doc)."""

    def __init__(self, api: API, controllers: Sequence[Controller], *, workers: int = 2,
                 lease_name: str = "kctl-controller-manager", identity: str | None = None,
                 election: LeaderElectionSettings | None = None, leader_election: bool = True,
                 settings: ControllerSettings = ControllerSettings(),
                 clock: Callable[[], float] = time.time, join_seconds: float = JOIN_SECONDS) -> None:
        names = [c.name for c in controllers]
        if len(set(names)) != len(names):
            raise ValueError(f"controller names must be unique: {names}")
        self.api = api
        self.controllers = list(controllers)
        self.workers = max(1, workers)
        self.identity = identity or default_identity()
        self.settings = settings
        self.clock = clock
        self.join_seconds = join_seconds
        self.leader_election = leader_election
        election = election or LeaderElectionSettings(lease_name=lease_name)
        self.elector = LeaderElector(api, identity=self.identity, settings=election,
                                     on_started_leading=self._start_term, on_stopped_leading=self._end_term,
                                     clock=clock)
        self._halt = threading.Event()
        self._release = True
        self._lock = threading.Lock()
        self._term: _Term | None = None
        self._threads: list[threading.Thread] = []
        self._started = False
        #: terms started so far (1 per acquired leadership); for tests
        self.terms = 0

    # -- public ------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        with self._lock:
            return self._term is not None

    @property
    def leadership(self) -> LeaderElector | None:
        """The elector whose terms this manager follows (its `term`, `add_listener`); None without election."""
        return self.elector if self.leader_election else None

    @property
    def informers(self) -> InformerFactory | None:
        """The current term's informers (None while not leading)."""
        with self._lock:
            return self._term.informers if self._term is not None else None

    def queue(self, name: str) -> WorkQueue[str] | None:
        """The current term's queue of controller `name` (None while not leading)."""
        with self._lock:
            return self._term.queues.get(name) if self._term is not None else None

    def wait_until_running(self, timeout: float | None = None) -> bool:
        """True once this manager leads and its workers run (synced informers)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                term = self._term
            if term is not None and term.ready.wait(0.05):
                return True
            if term is None:
                self._halt.wait(0.05)
            if self._halt.is_set() or (deadline is not None and time.monotonic() > deadline):
                return False

    def start(self, stop: threading.Event) -> None:
        """Start leader election (and, once leading, the controllers); return at once."""
        if self._started:
            raise RuntimeError("ControllerManager already started")
        self._started = True
        linker = threading.Thread(target=self._link, args=(stop,), name="controller-manager-stop", daemon=True)
        linker.start()
        if self.leader_election:
            elector = threading.Thread(target=self.elector.run, args=(self._halt,),
                                       kwargs={"release": lambda: self._release},
                                       name="controller-manager-elector", daemon=True)
            elector.start()
            self._threads.append(elector)
        else:
            self._start_term()
            self._threads.append(threading.Thread(target=self._wait_then_end, daemon=True,
                                                  name="controller-manager-term"))
            self._threads[-1].start()

    def run(self, stop: threading.Event) -> None:
        """start(), then block until `stop` is set; stop cleanly (releasing the lease)."""
        self.start(stop)
        stop.wait()
        self.stop()

    def stop(self, *, release: bool = True) -> None:
        """Stop workers, informers and election; release the lease unless release=False."""
        self._release = release
        self._halt.set()
        # the elector's thread ends the term (up to join_seconds), then releases the Lease
        deadline = time.monotonic() + self.join_seconds + STOP_MARGIN_SECONDS
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    log.warning("controller manager: %s still busy after stop", thread.name)
        self._end_term()
        DeferredEvents.flush_all()

    # -- terms ---------------------------------------------------------------------------

    def _link(self, stop: threading.Event) -> None:
        while not self._halt.is_set():
            if stop.wait(0.5):
                self._halt.set()
                return

    def _wait_then_end(self) -> None:
        self._halt.wait()
        self._end_term()

    def _start_term(self) -> None:
        term = _Term()
        with self._lock:
            if self._term is not None or self._halt.is_set():
                return
            self._term = term
            self.terms += 1
        thread = threading.Thread(target=self._run_term, args=(term,), name="controller-manager-term", daemon=True)
        term.threads.append(thread)
        thread.start()

    def _end_term(self) -> None:
        with self._lock:
            term, self._term = self._term, None
        if term is None:
            return
        term.stop.set()
        for queue in list(term.queues.values()):
            queue.shutdown()
        deadline = time.monotonic() + self.join_seconds
        for thread in list(term.threads):
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    log.warning("controller manager: %s still busy after stop", thread.name)
        flushed = DeferredEvents.flush_all()
        if flushed:
            log.info("controller manager: recorded %d Events of passes still running", flushed)

    def _run_term(self, term: _Term) -> None:
        informers = InformerFactory(self.api, resync=self.settings.resync_seconds)
        term.informers = informers
        for controller in self.controllers:
            queue: WorkQueue[str] = WorkQueue(name=f"{controller.name}-queue", backoff=CONTROLLER_BACKOFF)
            term.queues[controller.name] = queue
            ctx = ControllerContext(api=self.api, informers=informers,
                                    recorder=Recorder(self.api, component=f"{controller.name}-controller"),
                                    clock=self.clock, settings=self.settings)
            try:
                controller.register(ctx, queue)
            except Exception:
                log.exception("controller %s: register failed; it will not run", controller.name)
                queue.shutdown()
        if term.stop.is_set():
            return
        informers.start(term.stop)
        while not informers.wait_for_sync(0.1):
            if term.stop.is_set():
                return
        if term.stop.is_set():
            return
        for controller in self.controllers:
            queue = term.queues[controller.name]
            if queue.shutting_down:
                continue
            for i in range(self.workers):
                worker = threading.Thread(target=self._work, args=(controller, queue), daemon=True,
                                          name=f"{controller.name}-worker-{i}")
                term.threads.append(worker)
                worker.start()
        term.ready.set()
        log.info("controller manager %s: running %s", self.identity, ", ".join(c.name for c in self.controllers))

    def _work(self, controller: Controller, queue: WorkQueue[str]) -> None:
        while True:
            key = queue.get()
            if key is None:
                return
            try:
                after = controller.reconcile(key)
            except Exception as exc:  # temporary: rate-limited; permanent: Warning Event, long wait
                handle_reconcile_error(controller, queue, key, exc, api=self.api, settings=self.settings)
            else:
                queue.forget(key)
                if after is not None:
                    queue.add_after(key, after)
            finally:
                queue.done(key)


__all__ = ["ControllerManager"]
