"""A small pool of daemon threads that run calls and hand back Futures: `DaemonWorkers`.

Called by kctl.store.etcd.client, which sends each etcd write from a worker while the caller
waits and, when the member hangs, may stop waiting. concurrent.futures.ThreadPoolExecutor does
not fit: the interpreter joins its threads at exit, so a `kctl` command whose write hung on a cut
host would print its error at once but then not exit until that write's timeout. These threads
are daemons (an abandoned call dies with the process); threads start on demand up to `limit`
and then stay for the next call.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable


class DaemonWorkers:
    """Up to `limit` daemon threads running submitted calls (see the module docstring)."""

    def __init__(self, limit: int, *, name: str) -> None:
        self.limit = limit
        self.name = name
        self._queue: queue.SimpleQueue[tuple[Future, Callable[..., Any], tuple] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0     # threads waiting for a call nobody has claimed
        self._backlog = 0  # calls queued while every thread was busy and no new one could start
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run fn(*args) on a worker; its Future (cancel() succeeds while it waits for a free worker)."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name}: closed")
            if self._idle > 0:
                self._idle -= 1
            elif self._threads < self.limit:
                self._threads += 1
                threading.Thread(target=self._run, name=f"{self.name}-{self._threads}", daemon=True).start()
            else:
                self._backlog += 1
        self._queue.put((future, fn, args))
        return future

    def shutdown(self) -> None:
        """Cancel the calls not started and end the idle threads (busy ones end after their call)."""
        with self._lock:
            self._closed = True
            threads = self._threads
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in range(threads):
            self._queue.put(None)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as error:  # noqa: BLE001 (handed to the waiting caller)
                    future.set_exception(error)
            with self._lock:
                if self._backlog > 0:
                    self._backlog -= 1  # this thread takes a queued call next
                else:
                    self._idle += 1
