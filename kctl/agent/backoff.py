"""Restart and image-pull back-off of the node agent, as the kubelet's (flowcontrol.Backoff).

The pod logic (kctl.agent.containersync, imagepull, sandbox) asks `ready(key, now)` before
restarting a container that exited (or pulling an image that failed, or making a Podman
pod that failed), and calls `record(key, now)` when it does; while a key is not ready
the container shows CrashLoopBackOff (or ImagePullBackOff). Keys are (pod uid, name):
the container's name, "image:<container>" for pulls, "sandbox:" for the Podman pod.

The delay starts at `initial` (10 s), doubles on each record up to `maximum` (300 s),
and starts over once `reset_after` (600 s) went by without a record: a container that
ran ten minutes is treated as healthy again, as the kubelet does. One Backoff serves all
the pods of a node agent; it is thread-safe.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

BackoffKey = tuple[str, str]  # (pod uid, container name)


@dataclass
class _Entry:
    delay: float
    last: float


class Backoff:
    """Per-key exponential back-off; times are the caller's clock (seconds)."""

    def __init__(self, *, initial: float = 10.0, maximum: float = 300.0, reset_after: float = 600.0) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError("back-off needs 0 < initial <= maximum")
        self.initial = initial
        self.maximum = maximum
        self.reset_after = reset_after
        self._entries: dict[BackoffKey, _Entry] = {}
        self._lock = threading.Lock()

    def _live(self, key: BackoffKey, now: float) -> _Entry | None:
        """The key's entry, unless there is none or it expired (then it is dropped)."""
        entry = self._entries.get(key)
        if entry is not None and now - entry.last > self.reset_after:
            del self._entries[key]
            return None
        return entry

    def next_delay(self, key: BackoffKey, now: float) -> float:
        """The delay the next `record` will impose (initial for a fresh or expired key)."""
        with self._lock:
            entry = self._live(key, now)
            return self.initial if entry is None else min(entry.delay * 2, self.maximum)

    def delay(self, key: BackoffKey, now: float) -> float:
        """The delay now in force for key (0 when none)."""
        with self._lock:
            entry = self._live(key, now)
            return 0.0 if entry is None else entry.delay

    def remaining(self, key: BackoffKey, now: float) -> float:
        """Seconds until key is ready (0 when it is)."""
        with self._lock:
            entry = self._live(key, now)
            return 0.0 if entry is None else max(0.0, entry.last + entry.delay - now)

    def ready(self, key: BackoffKey, now: float) -> bool:
        """Whether the action under key may happen now."""
        return self.remaining(key, now) <= 0.0

    def record(self, key: BackoffKey, now: float) -> float:
        """The action happened at `now`: the next one waits longer. Returns the new delay."""
        with self._lock:
            entry = self._live(key, now)
            delay = self.initial if entry is None else min(entry.delay * 2, self.maximum)
            self._entries[key] = _Entry(delay=delay, last=now)
            return delay

    def clear(self, key: BackoffKey) -> None:
        """Forget one key (a container whose image changed starts afresh)."""
        with self._lock:
            self._entries.pop(key, None)

    def forget(self, pod_uid: str) -> None:
        """Forget every key of a pod (it was deleted)."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == pod_uid]:
                del self._entries[key]


__all__ = ["Backoff", "BackoffKey"]
