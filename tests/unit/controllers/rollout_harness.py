"""A small cluster for the ReplicaSet and Deployment simulations: store, manager, fake nodes.

`Cluster` runs the real ControllerManager with the given controllers, kctl's FakeKubelet
(pods on its nodes become Running + Ready) and a tiny binder that puts every unbound
pod on a node (the controllers never depend on the scheduler). `PodWatch` follows every
pod change in the store's order (the change log has no gaps), so an invariant it checks
holds at every committed state, not only at the moments a test looks. Waits have a time
limit only to turn a hang into a failure; no test asserts a duration.
"""

from __future__ import annotations

import itertools
import threading
from typing import Callable, TypeVar

from kctl.machinery.errors import APIError, Gone
from kctl.testing import waiting

T = TypeVar("T")

#: how long a wait may take before the test fails as hung
WAIT_SECONDS = 40.0


def wait_for(predicate: Callable[[], T], *, what: str, timeout: float = WAIT_SECONDS) -> T:
    """kctl.testing.waiting.wait_for with this harness's longer deadline."""
    return waiting.wait_for(predicate, what=what, timeout=timeout)


def pod_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


class Binder:
    """Binds each new unbound pod to the next node, round robin, through pods/binding."""

    def __init__(self, api, nodes: list[str]) -> None:
        self.api = api
        self._nodes = itertools.cycle(nodes)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self._run, args=(stop,), name="test-binder", daemon=True)
        thread.start()
        return thread

    def _bind(self, pod: dict) -> None:
        meta = pod["metadata"]
        if (pod.get("spec") or {}).get("nodeName") or meta.get("deletionTimestamp"):
            return
        try:
            self.api.bind(meta["namespace"], meta["name"], next(self._nodes), uid=meta["uid"])
        except APIError:
            pass  # gone or bound meanwhile

    def _run(self, stop: threading.Event) -> None:
        rt = self.api.resource("pods")
        while not stop.is_set():
            items, rev = self.api.list(rt)
            for pod in items:
                self._bind(pod)
            try:
                for change in self.api.store.watch(rev, stop=stop):
                    if change.kind == "Pod" and change.type == "ADDED":
                        self._bind(change.obj)
            except Gone:
                continue


class PodWatch:
    """The pods and ReplicaSets of one app as every committed change leaves them, with running extremes.

    Once `arm()`ed it records the most non-terminating pods, the fewest available
    (Ready, not terminating) pods and the largest sum of the ReplicaSets' spec.replicas
    (what Kubernetes bounds by replicas + maxSurge) seen after any single change, and
    calls each check function with the pods after every pod change.
    """

    def __init__(self, api, *, app: str) -> None:
        self.api = api
        self.app = app
        self.pods: dict[tuple[str, str], dict] = {}
        self.replicasets: dict[tuple[str, str], int] = {}  # (namespace, name) -> spec.replicas
        self.revision = 0
        self.armed = False
        self.max_live = 0
        self.min_available: int | None = None
        self.max_spec_total = 0
        self.changes = 0
        self.checks: list[Callable[[dict, dict], None]] = []
        self.failures: list[str] = []
        self._lock = threading.Lock()

    def start(self, stop: threading.Event) -> None:
        items, rev = self.api.list(self.api.resource("pods"))
        for pod in items:
            self._apply("ADDED", pod)
        rss, rs_rev = self.api.list(self.api.resource("replicasets"))
        for rs in rss:
            self._apply_rs("ADDED", rs)
        rev = min(rev, rs_rev)
        self.revision = rev
        threading.Thread(target=self._run, args=(stop, rev), name="test-podwatch", daemon=True).start()

    def _mine(self, pod: dict) -> bool:
        return ((pod.get("metadata") or {}).get("labels") or {}).get("app") == self.app

    def _apply(self, type_: str, pod: dict) -> None:
        key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
        if type_ == "DELETED" or not self._mine(pod):
            self.pods.pop(key, None)
        else:
            self.pods[key] = pod

    def _apply_rs(self, type_: str, rs: dict) -> None:
        key = (rs["metadata"].get("namespace", ""), rs["metadata"]["name"])
        if type_ == "DELETED" or not self._mine(rs):
            self.replicasets.pop(key, None)
        else:
            self.replicasets[key] = int((rs.get("spec") or {}).get("replicas", 1))

    def spec_total(self) -> int:
        """The sum of spec.replicas over the app's ReplicaSets."""
        return sum(self.replicasets.values())

    def live(self) -> list[dict]:
        return [p for p in self.pods.values() if not p["metadata"].get("deletionTimestamp")]

    def available(self) -> list[dict]:
        return [p for p in self.live() if pod_ready(p)]

    def _run(self, stop: threading.Event, rev: int) -> None:
        for change in self.api.store.watch(rev, stop=stop):
            with self._lock:
                self.revision = change.revision
                if change.kind == "ReplicaSet.apps":
                    self._apply_rs(change.type, change.obj)
                    if self.armed and self._mine(change.obj):
                        self.max_spec_total = max(self.max_spec_total, self.spec_total())
                    continue
                if change.kind != "Pod":
                    continue
                self._apply(change.type, change.obj)
                if self.armed and self._mine(change.obj):
                    self._observe(change)

    def _observe(self, change) -> None:
        self.changes += 1
        live, available = len(self.live()), len(self.available())
        self.max_live = max(self.max_live, live)
        self.min_available = available if self.min_available is None else min(self.min_available, available)
        for check in self.checks:
            try:
                check(self.pods, change.obj)
            except AssertionError as exc:
                self.failures.append(str(exc))

    def arm(self) -> None:
        """Start recording extremes from the current state on."""
        with self._lock:
            self.armed = True
            self.changes = 0
            self.max_live = len(self.live())
            self.min_available = len(self.available())
            self.max_spec_total = self.spec_total()

    def caught_up(self) -> None:
        """Wait until every change committed so far has been seen."""
        _, rev = self.api.list(self.api.resource("pods"))
        wait_for(lambda: self.revision >= rev, what="the pod watch catches up")


class Cluster:
    """Store + controller manager + fake kubelet + binder, stopped by close()."""

    def __init__(self, api, controllers: list, *, nodes: int = 3, ready_delay: float = 0.0,
                 bind: bool = True, watch_app: str | None = None, manager_api=None) -> None:
        from kctl.controllers.manager import ControllerManager
        from kctl.testing.fake_kubelet import FakeKubelet

        self.api = api
        self.stop = threading.Event()
        self.nodes = [f"node-{i}" for i in range(nodes)]
        self.kubelet = FakeKubelet(api, nodes=self.nodes, ready_delay=ready_delay)
        self.kubelet.start(self.stop)
        self.watch = PodWatch(api, app=watch_app) if watch_app else None
        if self.watch is not None:
            self.watch.start(self.stop)
        if bind:
            Binder(api, self.nodes).start(self.stop)
        self.manager = ControllerManager(manager_api or api, controllers)  # manager_api: e.g. a call-counting proxy
        self.manager.start(self.stop)

    def close(self) -> None:
        self.stop.set()
        self.manager.stop()
        stopper = getattr(self.kubelet, "stop", None)
        if callable(stopper):
            stopper()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
