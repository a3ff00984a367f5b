"""client-go's ControllerExpectations: the creations and deletions a controller awaits.

A controller that has just asked the API to create 3 pods must not count them missing
and create 3 more before its informer has seen them. Before writing it records what it
expects (`expect_creations`, `expect_deletions`); its informer handlers mark each
observation (`creation_observed`, `deletion_observed`); reconcile acts again only when
`satisfied(key)`. Expectations expire (5 minutes, as client-go's ExpectationsTimeout) so a
lost event can never wedge a controller. Used by the ReplicaSet, DaemonSet and Job
controllers (kctl/controllers/); thread-safe.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

#: client-go's ExpectationsTimeout: older expectations count as satisfied
EXPECTATIONS_TTL_SECONDS = 5 * 60.0


@dataclass
class _Expectation:
    """What one controller key still waits for, and when that was last set."""

    adds: int = 0
    deletes: set[str] = field(default_factory=set)
    stamp: float = 0.0

    @property
    def fulfilled(self) -> bool:
        return self.adds <= 0 and not self.deletes


class Expectations:
    """Per-key counts of pending creations and the uids of pending deletions."""

    def __init__(self, *, ttl: float = EXPECTATIONS_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._items: dict[str, _Expectation] = {}

    def expect_creations(self, key: str, n: int) -> None:
        """`key` is about to create `n` objects (replaces any earlier creation count)."""
        with self._lock:
            exp = self._items.setdefault(key, _Expectation())
            exp.adds = max(0, int(n))
            exp.stamp = self._clock()

    def expect_deletions(self, key: str, uids: Iterable[str]) -> None:
        """`key` is about to delete the objects with these uids (replaces earlier ones)."""
        with self._lock:
            exp = self._items.setdefault(key, _Expectation())
            exp.deletes = {u for u in uids if u}
            exp.stamp = self._clock()

    def creation_observed(self, key: str) -> None:
        """One awaited creation was seen (or will never happen: the create failed)."""
        with self._lock:
            exp = self._items.get(key)
            if exp is not None and exp.adds > 0:
                exp.adds -= 1

    def deletion_observed(self, key: str, uid: str) -> None:
        """The object `uid` was seen deleted (or its delete failed / it was already gone)."""
        with self._lock:
            exp = self._items.get(key)
            if exp is not None:
                exp.deletes.discard(uid)

    def satisfied(self, key: str) -> bool:
        """True when nothing is awaited for `key`, nothing was ever recorded, or it expired."""
        with self._lock:
            exp = self._items.get(key)
            if exp is None or exp.fulfilled:
                return True
            return self._clock() - exp.stamp > self.ttl

    def pending(self, key: str) -> tuple[int, frozenset[str]]:
        """(creations awaited, uids of deletions awaited) for `key`; for messages and tests."""
        with self._lock:
            exp = self._items.get(key)
            if exp is None:
                return 0, frozenset()
            return max(0, exp.adds), frozenset(exp.deletes)

    def delete(self, key: str) -> None:
        """Forget `key` (its object was deleted)."""
        with self._lock:
            self._items.pop(key, None)


#: the name client-go gives it
ControllerExpectations = Expectations

__all__ = ["EXPECTATIONS_TTL_SECONDS", "ControllerExpectations", "Expectations"]
