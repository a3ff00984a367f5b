"""DefaultBinder: write the binding through the API (APIServer.bind / bind_all).

bind_all binds a whole batch in one SQLite transaction (the scheduler's bind worker
drains what is ready and calls it once); each binding still fails alone (Conflict when
the pod was bound or deleted meanwhile, NotFound when it is gone). Built by
plugins.registry; needs the handle's API.
"""

from __future__ import annotations

from kctl.apiserver.contract import Binding
from kctl.scheduler.framework import Code, CycleState, Handle, Status, error
from kctl.scheduler.nodeinfo import PodInfo


class DefaultBinder:
    """Bind: pods/binding through the API server."""

    NAME = "DefaultBinder"

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        self.handle = handle

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return self.bind_all([(state, pod, node_name)])[0]

    def bind_all(self, items: list[tuple[CycleState, PodInfo, str]]) -> list[Status | None]:
        api = self.handle.api if self.handle is not None else None
        if api is None:
            return [error("DefaultBinder: no API server")] * len(items)
        bindings = [Binding(pod.namespace, pod.name, node, uid=pod.uid or None) for _, pod, node in items]
        try:
            results = api.bind_all(bindings)
        except Exception as exc:  # the whole transaction failed (store locked, disk full ...)
            return [error(f"binding: {exc}")] * len(items)
        return [None if r.error is None else Status(Code.ERROR, (str(r.error),)) for r in results]
