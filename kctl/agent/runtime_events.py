"""The node agent's evented PLEG: one thread that follows its runtime's container event stream.

kctl.agent.agent.NodeAgent starts one RuntimeEventWatcher per node when its runtime has
`container_events` (kctl.runtime.interface). The watcher subscribes to the deaths (died,
OOM-killed, exited) of the containers kctl made (LABEL_MANAGED) and hands each event to
`on_death`; the agent then queues the container's pod, so a container killed behind its
back shows in the Pod's status, and is restarted, without waiting for the periodic
resync, as the kubelet's evented PLEG does.

The stream is a hint, never the truth: the periodic resync stays the safety net. When the
stream cannot be opened, ends or breaks, the watcher tries again after a back-off
(`initial_delay` doubling to `max_delay`) and, once subscribed again, calls
`on_reconnect` (the agent re-syncs every pod: deaths in the gap are found by a relist).
The stream has a connection of its own, so it never holds up the heartbeat or the pod
workers; `stop()` closes it, so the thread ends at once. A failure is logged once per
distinct cause (repeats at debug), and only at debug while `quiet()` says the host is
known to be unreachable (the heartbeat says why, once).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from kctl.runtime.interface import DEATH_EVENTS, LABEL_MANAGED, ContainerEvent

log = logging.getLogger("kctl.agent")

#: a stream that stayed up this long (seconds) resets the reconnect back-off
STABLE_AFTER = 10.0
#: one problem is logged above debug at most once per this many seconds
REPEAT_AFTER = 60.0


class RuntimeEventWatcher:
    """Follows `runtime.container_events` for `node_name` in a thread of its own (see the module docstring)."""

    def __init__(self, runtime: Any, *, node_name: str, on_death: Callable[[ContainerEvent], None],
                 on_reconnect: Callable[[], None], quiet: Callable[[], bool] = lambda: False,
                 initial_delay: float = 0.5, max_delay: float = 5.0) -> None:
        self.runtime = runtime
        self.node_name = node_name
        self.on_death = on_death
        self.on_reconnect = on_reconnect
        self.quiet = quiet
        self.initial_delay = initial_delay
        self.max_delay = max(initial_delay, max_delay)
        self.subscriptions = 0  # streams opened so far
        self.subscribed = threading.Event()  # set while a stream is open
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stream: Any = None
        self._thread: threading.Thread | None = None
        self._last_problem = ""
        self._said_problem = False  # whether a problem since the last subscription was logged above debug
        self._warned: dict[str, float] = {}  # problem -> when (monotonic) it was last logged as a warning

    @staticmethod
    def supported(runtime: Any) -> bool:
        """Whether the runtime has an event stream to follow."""
        return callable(getattr(runtime, "container_events", None))

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"agent-{self.node_name}-events", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Close the stream and end the thread (waits up to `timeout` s)."""
        self._stop.set()
        self._close_stream()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("node %s: the container event watcher is still busy after stop", self.node_name)
            self._thread = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        delay = self.initial_delay
        while not self._stop.is_set():
            stream = self._subscribe()
            if stream is None:
                self._stop.wait(delay)
                delay = min(delay * 2, self.max_delay)
                continue
            opened = time.monotonic()
            if self.subscriptions > 1:
                self._call(self.on_reconnect, "re-syncing after the event stream came back")
            problem = self._follow(stream)
            if self._stop.is_set():
                return
            self._problem(problem)
            if time.monotonic() - opened >= STABLE_AFTER:
                delay = self.initial_delay
            self._stop.wait(delay)
            delay = min(delay * 2, self.max_delay)

    def _subscribe(self) -> Any:
        """A new stream, or None (the problem logged)."""
        try:
            stream = self.runtime.container_events({LABEL_MANAGED: "true"}, events=DEATH_EVENTS)
        except Exception as exc:  # RuntimeError_, or a runtime's bug: never kill the thread
            self._problem(f"cannot follow the container event stream: {_one_line(exc)}")
            return None
        with self._lock:
            if self._stop.is_set():
                _close(stream)
                return None
            self._stream = stream
        if self._last_problem:
            log.log(logging.INFO if self._said_problem else logging.DEBUG,
                    "node %s: following the container event stream again", self.node_name)
            self._last_problem, self._said_problem = "", False
        self.subscriptions += 1
        self.subscribed.set()
        return stream

    def _follow(self, stream: Any) -> str:
        """Hand on deaths until the stream ends; what ended it."""
        try:
            for event in stream:
                if self._stop.is_set():
                    break
                if event.is_death:
                    self._call(lambda: self.on_death(event), f"handling a {event.event} event")
        except Exception as exc:
            return f"the container event stream broke: {_one_line(exc)}"
        finally:
            self.subscribed.clear()
            self._close_stream()
        return "the container event stream ended"

    def _close_stream(self) -> None:
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            _close(stream)

    def _problem(self, message: str) -> None:
        """Log a problem once per distinct message (at debug while the host is known unreachable)."""
        quiet = self._call(self.quiet, "") is True
        now = time.monotonic()
        repeated = message == self._last_problem or now - self._warned.get(message, -REPEAT_AFTER) < REPEAT_AFTER
        level = logging.DEBUG if (quiet or repeated) else logging.WARNING
        if level == logging.WARNING:
            self._warned[message] = now
        log.log(level, "node %s: %s; re-syncing its pods when it is back", self.node_name, message)
        self._last_problem = message
        self._said_problem = self._said_problem or level > logging.DEBUG

    def _call(self, action: Callable[[], Any], what: str) -> Any:
        try:
            return action()
        except Exception as exc:
            if what:
                log.error("node %s: %s failed: %s", self.node_name, what, _one_line(exc))
            return None


def _close(stream: Any) -> None:
    close = getattr(stream, "close", None)
    if callable(close):
        try:
            close()
        except Exception as exc:
            log.debug("closing a container event stream: %s", exc)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


__all__ = ["RuntimeEventWatcher"]
