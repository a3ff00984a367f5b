"""client-go's work queue: de-duplicated, serialised per key, with delays and back-off.

The controller manager (kctl.controllers.manager) keeps one per controller: informer
handlers add object keys, worker threads take them and reconcile. The node agent
(kctl.agent.agent) uses it the same way for pod keys. The rules are those of
`k8s.io/client-go/util/workqueue`:

- a key waiting in the queue is held once, however often it is added;
- a key being processed (between `get` and `done`) is never handed to a second worker;
  added again meanwhile, it runs once more after `done`;
- `add_after` holds a key back until its time (one timer thread, a heap; a key already
  waiting keeps the earlier of its two times);
- `add_rate_limited` re-queues after an exponential per-key back-off that `forget`
  resets (call it when the key succeeded).

Nothing polls: getters and the timer sleep on condition variables, and an `add` wakes a
waiting getter at once. For latency metrics (client-go's queue_duration), `observe(fn)`
calls `fn(QueueWait)` each time `get` hands a key out: when the key was first added since
it was last handed out, from which thread (an informer's, for an event), and when it was
taken; benchmarks/deployment.py joins it with the informer's deliveries
(kctl.client.informer.Informer.observe) to measure event -> reconcile latency.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class QueueWait:
    """One key's wait in the queue, given to `WorkQueue.observe` observers (times from the queue's clock)."""

    key: Hashable
    #: when the key was first added since it was last handed out
    added: float
    #: threading.get_ident() of the thread that made that add (an informer's thread for an event)
    thread: int
    #: when `get` handed it to a worker (the reconcile starts now)
    taken: float


@dataclass(frozen=True)
class ExponentialBackoff:
    """Per-key delay `base * 2**failures`, at most `cap` seconds (client-go's item limiter)."""

    base: float = 0.05
    cap: float = 60.0

    def delay(self, failures: int) -> float:
        if failures >= 64:
            return self.cap
        return min(self.cap, self.base * (2 ** failures))


class WorkQueue(Generic[K]):
    """A thread-safe queue of keys with client-go's de-duplication and serialisation."""

    def __init__(self, *, name: str = "queue", backoff: ExponentialBackoff | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.backoff = backoff or ExponentialBackoff()
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._shutting_down = False
        # delayed keys: heap of (ready_at, seq, key); _waiting holds each key's live time
        self._heap: list[tuple[float, int, K]] = []
        self._waiting: dict[K, float] = {}
        self._seq = itertools.count()
        self._timer_cond = threading.Condition()
        self._timer: threading.Thread | None = None
        self._failures: dict[K, int] = {}
        self._observers: list[Callable[[QueueWait], None]] = []
        self._added: dict[K, tuple[float, int]] = {}  # first add (time, thread) per key, while observed

    # -- adding --------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue `key` unless it is already waiting; a key in process runs again after `done`."""
        with self._cond:
            if self._shutting_down or key in self._dirty:
                return
            self._dirty.add(key)
            if self._observers:
                self._added.setdefault(key, (self._clock(), threading.get_ident()))
            if key in self._processing:
                return
            self._queue.append(key)
            self._cond.notify()

    def add_after(self, key: K, delay: float) -> None:
        """Queue `key` once `delay` seconds have passed (at once when delay <= 0)."""
        if delay <= 0:
            self.add(key)
            return
        with self._timer_cond:
            if self._shutting_down:
                return
            ready_at = self._clock() + delay
            current = self._waiting.get(key)
            if current is not None and current <= ready_at:
                return
            self._waiting[key] = ready_at
            heapq.heappush(self._heap, (ready_at, next(self._seq), key))
            self._ensure_timer()
            self._timer_cond.notify()

    def add_rate_limited(self, key: K) -> None:
        """Queue `key` after its back-off, which doubles with each call until `forget`."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        self.add_after(key, self.backoff.delay(failures))

    def forget(self, key: K) -> None:
        """The key succeeded: its next `add_rate_limited` starts from the base delay again."""
        with self._cond:
            self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        """How often `key` was rate-limited since it was last forgotten."""
        with self._cond:
            return self._failures.get(key, 0)

    # -- taking --------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> K | None:
        """The next key to process (now owned by the caller until `done`), or None.

        None means the timeout passed or the queue was shut down; after `shutdown` keys
        still queued are not handed out, so workers stop promptly.
        """
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while not self._queue and not self._shutting_down:
                remaining = None if deadline is None else deadline - self._clock()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)
            if self._shutting_down:
                return None
            key = self._queue.popleft()
            self._processing.add(key)
            self._dirty.discard(key)
            first = self._added.pop(key, None)
            observers = list(self._observers) if first is not None else ()
        for fn in observers:
            fn(QueueWait(key, first[0], first[1], self._clock()))
        return key

    def observe(self, fn: Callable[[QueueWait], None]) -> None:
        """Call `fn(QueueWait)` (on the getting thread, before `get` returns) for each key handed out.

        Keys added before the first observer came are not reported. `fn` must be quick
        and must not raise.
        """
        with self._cond:
            self._observers.append(fn)

    def done(self, key: K) -> None:
        """Processing of `key` ended; if it was added meanwhile it is queued again now."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty and not self._shutting_down:
                self._queue.append(key)
                self._cond.notify()

    # -- state and shutdown ----------------------------------------------------------------

    def __len__(self) -> int:
        """Keys ready to be handed out (not the delayed ones, not those in process)."""
        with self._cond:
            return len(self._queue)

    def delayed(self) -> int:
        """Keys waiting for their `add_after` time."""
        with self._timer_cond:
            return len(self._waiting)

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down

    def shutdown(self, *, timeout: float = 5.0) -> None:
        """Refuse new keys, wake every getter (they get None) and stop the timer thread."""
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()
        with self._timer_cond:
            self._heap.clear()
            self._waiting.clear()
            self._timer_cond.notify_all()
            timer = self._timer
        if timer is not None and timer is not threading.current_thread():
            timer.join(timeout)

    # -- the timer thread ----------------------------------------------------------------

    def _ensure_timer(self) -> None:
        """Start the timer thread on first use (called holding _timer_cond)."""
        if self._timer is None:
            self._timer = threading.Thread(target=self._run_timer, name=f"{self.name}-timer", daemon=True)
            self._timer.start()

    def _run_timer(self) -> None:
        while True:
            with self._timer_cond:
                ready = self._pop_ready()
                if ready is None:
                    return
                if not ready:
                    wait = self._heap[0][0] - self._clock() if self._heap else None
                    self._timer_cond.wait(wait)
                    continue
            for key in ready:
                self.add(key)

    def _pop_ready(self) -> list[K] | None:
        """Keys whose time has come ([] when none yet); None when shut down."""
        if self._shutting_down:
            return None
        now = self._clock()
        ready: list[K] = []
        while self._heap and self._heap[0][0] <= now:
            ready_at, _, key = heapq.heappop(self._heap)
            if self._waiting.get(key) == ready_at:
                del self._waiting[key]
                ready.append(key)
        return ready


__all__ = ["ExponentialBackoff", "QueueWait", "WorkQueue"]
