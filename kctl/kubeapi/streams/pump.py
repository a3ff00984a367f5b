"""Blocking iterators (a runtime's log, an exec session's output) read on a thread of their own, awaited.

kctl.kubeapi.streams.logs and .exec stream what the runtime yields for as long as a client
listens, minutes or hours: that must not hold one of the API's worker threads (ServerContext.run),
so each stream reads on a dedicated daemon thread and hands the pieces to the event loop
through a small queue (the thread waits while the client is slow: backpressure). When the
consumer stops (the client went away), the thread stops at its next piece, or at once when what
it reads has a close() that works from any thread (a runtime's log stream); an exec session is
closed by its caller.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from dataclasses import dataclass
from typing import Callable, Generic, Iterable, TypeVar

T = TypeVar("T")
#: pieces read ahead of the client
BUFFER = 16
#: how often (seconds) a thread waiting to hand over a piece checks whether the consumer left
POLL = 0.5


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_END = object()


class ThreadReader(Generic[T]):
    """What `produce()` yields, produced on a new daemon thread, awaited piece by piece with `get`."""

    def __init__(self, produce: Callable[[], Iterable[T]], *, name: str) -> None:
        """Start the thread (inside the running event loop)."""
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[object] = asyncio.Queue(maxsize=BUFFER)
        self._left = threading.Event()
        self._ended = False
        self._produce = produce
        self._items: Iterable[T] | None = None
        threading.Thread(target=self._work, name=name, daemon=True).start()

    async def get(self, *, timeout: float | None = None) -> T | None:
        """The next piece; None at the end; TimeoutError after `timeout` s without one; the producer's error."""
        if self._ended:
            return None
        item = await asyncio.wait_for(self._queue.get(), timeout) if timeout is not None else await self._queue.get()
        if item is _END:
            self._ended = True
            return None
        if isinstance(item, _Failed):
            self._ended = True
            raise item.error
        return item  # type: ignore[return-value]

    def stop(self) -> None:
        """The consumer is done: the thread stops at its next piece, at once when what it reads has a close()
        that works from another thread (a runtime's log stream; not a generator)."""
        self._left.set()
        items = self._items
        close = getattr(items, "close", None)
        if callable(close) and not inspect.isgenerator(items):
            try:
                close()
            except Exception:  # noqa: BLE001 - the reader ends anyway at its next piece
                pass

    def _hand_over(self, item: object) -> bool:
        try:
            future = asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop)
        except RuntimeError:  # the loop is closed
            return False
        while True:
            try:
                future.result(timeout=POLL)
                return True
            except concurrent.futures.TimeoutError:
                if self._left.is_set():
                    future.cancel()
                    return False
            except (concurrent.futures.CancelledError, RuntimeError):
                return False

    def _work(self) -> None:
        items = None
        try:
            items = self._items = self._produce()
            if self._left.is_set():  # stopped while it was being made
                return
            for item in items:
                if self._left.is_set() or not self._hand_over(item):
                    return
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, which raises it
            self._hand_over(_Failed(error))
            return
        finally:
            close = getattr(items, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:  # noqa: BLE001 - closing a finished stream must not fail the reader
                    pass
        self._hand_over(_END)


__all__ = ["ThreadReader"]
