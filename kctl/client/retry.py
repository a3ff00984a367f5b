"""`retry_on_conflict`: client-go's RetryOnConflict for read-modify-write loops.

A writer that read an object, changed it and wrote it back gets Conflict when someone
else wrote it in between (the resourceVersion it carried is stale). The fix is always the
same: read again, change again, write again, a bounded number of times. Callers pass a
function that does one whole read-modify-write; `retry_on_conflict` calls it again on
Conflict (after `backoff` seconds), returns what it returned, and re-raises the last
Conflict when every attempt conflicted. Any other exception passes through at once.

Used by the controllers (garbage collector, ReplicaSet, node lifecycle, namespace), the
status writer (kctl/client/statuswriter.py), event recording (kctl/client/events.py), the
node agent's heartbeat (kctl/agent/node.py), the scheduler's failure writer
(kctl/scheduler/binder.py), `rollout undo` (kctl/ops/rollback.py) and `set image`.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from kctl.machinery.errors import Conflict

T = TypeVar("T")

#: client-go's DefaultRetry: 5 attempts, 10 ms apart
DEFAULT_ATTEMPTS = 5
DEFAULT_BACKOFF_SECONDS = 0.01


def retry_on_conflict(fn: Callable[[], T], *, attempts: int = DEFAULT_ATTEMPTS,
                      backoff: float = DEFAULT_BACKOFF_SECONDS,
                      sleep: Callable[[float], None] = time.sleep) -> T:
    """fn(), called again on Conflict up to `attempts` times in all, `backoff` seconds apart."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    for attempt in range(attempts):
        try:
            return fn()
        except Conflict:
            if attempt == attempts - 1:
                raise
        if backoff > 0:
            sleep(backoff)
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["DEFAULT_ATTEMPTS", "DEFAULT_BACKOFF_SECONDS", "retry_on_conflict"]
