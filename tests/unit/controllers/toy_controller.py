"""A toy controller for the manager and leader election tests: ConfigMaps -> a status-like annotation.

Its reconcile copies the ConfigMap's data["want"] into the annotation "toy/seen" (set by
whichever manager ran it), fails the first `failures` times for a ConfigMap named
"flaky", and records every call.
"""

from __future__ import annotations

import copy
import threading

from kctl.machinery.errors import Conflict, NotFound
from kctl.controllers.base import key_of, split_key


class ToyController:
    name = "toy"

    def __init__(self, *, tag: str = "", failures: int = 0) -> None:
        self.tag = tag
        self.failures_left = failures
        self.calls: list[str] = []
        self.registered = 0
        self._lock = threading.Lock()

    def register(self, ctx, queue) -> None:
        self.ctx, self.api, self.queue = ctx, ctx.api, queue
        self.registered += 1
        self.configmaps = ctx.informers.informer("configmaps")
        self.configmaps.add_handler(lambda o: queue.add(key_of(o)), lambda old, new: queue.add(key_of(new)),
                                    lambda o: queue.add(key_of(o)))

    def reconcile(self, key: str) -> float | None:
        with self._lock:
            self.calls.append(key)
            if key.endswith("/flaky") and self.failures_left > 0:
                self.failures_left -= 1
                raise RuntimeError("flaky failure")
        namespace, name = split_key(key)
        cm = self.configmaps.get(namespace, name)
        if cm is None:
            return None
        want = f"{self.tag}:{(cm.get('data') or {}).get('want', '')}"
        if (cm["metadata"].get("annotations") or {}).get("toy/seen") == want:
            return None
        cm = copy.deepcopy(cm)
        cm["metadata"].setdefault("annotations", {})["toy/seen"] = want
        try:
            self.api.update(cm)
        except (Conflict, NotFound):
            pass  # a newer version is on its way to the informer
        return None


def configmap(name: str, want: str = "1") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"want": want}}


def seen(api, name: str) -> str | None:
    try:
        cm = api.get(api.resource("configmaps"), name, namespace="default")
    except NotFound:
        return None
    return (cm["metadata"].get("annotations") or {}).get("toy/seen")
