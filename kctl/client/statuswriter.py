"""The status writer: a reconciler's one way to write `status`, only when it changed.

A reconcile ends by recomputing an object's status from what it observed and writing it
through the status subresource (client-go's `UpdateStatus`). Done by hand that is the
same dozen lines each time: compare with what the object has, skip the write when
nothing changed, copy the object, write, and on a Conflict (the cache was behind, or
someone else wrote) read the object again, check it is still the same object (uid) and
write once more. `StatusWriter` does it once:

- `write(obj, status)` writes `status` onto `obj` when it differs from `obj["status"]`,
  ignoring volatile fields (`ignore`: dotted paths into status, `[]` for every item of a
  list: `"conditions[].lastHeartbeatTime"`); on Conflict it re-reads the object and tries
  again (kctl.client.retry.retry_on_conflict: a few attempts, then the Conflict is raised,
  a temporary error the work queue retries). `status` is either the new status or a
  function of the object (cached first, then re-read) that returns it, for a status that
  merges computed fields into what the object already has.
- It returns the object as stored afterwards (the written one; the object itself when
  nothing had to be written); None when the object is gone, or was deleted and created
  anew under the same name (another uid): not found is success, as in every reconcile.
- `write_all(pairs)` writes several objects' statuses in one `update_status_all` (one
  transaction); the ones that conflicted go through `write`'s re-read path.

Used by the controllers (DaemonSet, Job, CronJob; kctl/controllers/) and git sync
(kctl/sync/reconcile.py); the node agent may use it for pod status. Never mutates the
objects it is given.
"""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Callable, Iterable, Sequence, Union

from kctl.client.retry import DEFAULT_ATTEMPTS, DEFAULT_BACKOFF_SECONDS, retry_on_conflict
from kctl.machinery.errors import Conflict, NotFound

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

#: the new status, or a function of the object (as cached, then as re-read) that returns it
Status = Union[dict, Callable[[dict], dict]]


class _Replaced(Exception):
    """The name now holds another object (another uid): the status was for the one that went."""


def _parse_path(path: str) -> tuple[tuple[str, bool], ...]:
    """"conditions[].lastHeartbeatTime" -> (("conditions", True), ("lastHeartbeatTime", False))."""
    parts = []
    for part in path.split("."):
        each = part.endswith("[]")
        name = part[:-2] if each else part
        if not name:
            raise ValueError(f"status path {path!r}: empty field name")
        parts.append((name, each))
    return tuple(parts)


def _without(value: object, path: tuple[tuple[str, bool], ...]) -> object:
    """A copy of `value` without the field at `path` (shared where nothing is removed)."""
    if not path or not isinstance(value, dict):
        return value
    (name, each), rest = path[0], path[1:]
    if name not in value:
        return value
    out = dict(value)
    if not rest:
        del out[name]
    elif each:
        if isinstance(out[name], list):
            out[name] = [_without(item, rest) for item in out[name]]
    else:
        out[name] = _without(out[name], rest)
    return out


def strip_volatile(status: dict | None, ignore: Iterable[str]) -> dict:
    """`status` without the fields named by `ignore` (dotted paths, `[]` for every list item)."""
    out: object = status or {}
    for path in ignore:
        out = _without(out, _parse_path(path))
    return out  # type: ignore[return-value]


def status_differs(current: dict | None, desired: dict | None, *, ignore: Iterable[str] = ()) -> bool:
    """Whether writing `desired` over `current` changes anything but the ignored fields."""
    ignore = tuple(ignore)
    return strip_volatile(current, ignore) != strip_volatile(desired, ignore)


class StatusWriter:
    """Writes objects' status only when it changed, re-reading on Conflict (see the module docstring)."""

    def __init__(self, api: API, *, ignore: Iterable[str] = (), attempts: int = DEFAULT_ATTEMPTS,
                 backoff: float = DEFAULT_BACKOFF_SECONDS, sleep: Callable[[float], None] = time.sleep) -> None:
        self.api = api
        self.ignore = tuple(ignore)
        for path in self.ignore:
            _parse_path(path)  # a bad path is said at once, not at the first write
        self.attempts = attempts
        self.backoff = backoff
        self._sleep = sleep

    def differs(self, obj: dict, status: dict) -> bool:
        """Whether `status` differs from obj's, ignoring the volatile fields."""
        return status_differs(obj.get("status"), status, ignore=self.ignore)

    def write(self, obj: dict, status: Status) -> dict | None:
        """Write `status` onto obj if it changed; the stored object, or None when it is gone or replaced."""
        return self._write(obj, status, reread_first=False)

    def write_all(self, pairs: Sequence[tuple[dict, Status]]) -> list[dict | None]:
        """Write several statuses in one update_status_all; per pair what `write` returns.

        A pair whose write conflicted is written again through `write`'s re-read path. An
        error other than NotFound or Conflict is raised once every pair has been tried
        (the first such error).
        """
        results: list[dict | None] = [None] * len(pairs)
        batch: list[tuple[int, dict]] = []
        for i, (obj, status) in enumerate(pairs):
            desired = status(obj) if callable(status) else status
            if self.differs(obj, desired):
                batch.append((i, _with_status(obj, desired)))
            else:
                results[i] = obj
        if not batch:
            return results
        first_error: Exception | None = None
        written = self.api.update_status_all([new for _, new in batch])
        for (i, _), result in zip(batch, written):
            if result.error is None:
                results[i] = result.obj
            elif isinstance(result.error, NotFound):
                results[i] = None
            else:
                try:
                    if not isinstance(result.error, Conflict):
                        raise result.error
                    results[i] = self._write(pairs[i][0], pairs[i][1], reread_first=True)
                except Exception as exc:  # noqa: BLE001 - each pair fails alone; the first error is raised
                    first_error = first_error or exc
        if first_error is not None:
            raise first_error
        return results

    def _write(self, obj: dict, status: Status, *, reread_first: bool) -> dict | None:
        meta = obj.get("metadata") or {}
        rt = self.api.resource_for(obj)
        reread = reread_first

        def attempt() -> dict:
            nonlocal reread
            current = obj
            if reread:
                current = self.api.get(rt, meta["name"], namespace=meta.get("namespace"))
                if meta.get("uid") and current["metadata"].get("uid") != meta["uid"]:
                    raise _Replaced()
            reread = True
            desired = status(current) if callable(status) else status
            if not self.differs(current, desired):
                return current
            return self.api.update_status(_with_status(current, desired))

        try:
            return retry_on_conflict(attempt, attempts=self.attempts, backoff=self.backoff, sleep=self._sleep)
        except (NotFound, _Replaced):
            return None


def _with_status(obj: dict, status: dict) -> dict:
    """A deep copy of obj carrying `status` (the argument objects are never mutated)."""
    new = {key: copy.deepcopy(value) for key, value in obj.items() if key != "status"}
    new["status"] = copy.deepcopy(status)
    return new


__all__ = ["Status", "StatusWriter", "status_differs", "strip_volatile"]
