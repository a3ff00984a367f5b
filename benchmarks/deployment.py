"""Benchmark: a 100-replica Deployment rolled to a new image, against the ideal rollout time.

Run with `.venv/bin/python benchmarks/deployment.py [--runs N] [--ready-delay S]`.
In one process: a real store in a temporary folder, the controller manager running the
ReplicaSet and Deployment controllers, kctl.testing's FakeKubelet (pods Ready
`ready_delay` seconds after they start) and a small batching binder standing in for the
scheduler; garbage collected with kctl's thresholds, kctl.cli.main.GC_THRESHOLD, as in `kctl
daemon`. Each run changes the image (maxSurge=25%, maxUnavailable=25%) and times until
the Deployment is complete (every replica updated and available, old ReplicaSets empty).

The ideal is the number of readiness waves the rollout needs when every controller step
takes no time (simulated with the controller's own arithmetic, kctl.controllers.rollout)
times the per-wave readiness time. Results go to docs/benchmarks.md with this command.

It also measures, during the timed rollouts, the event -> reconcile latency of the shared
informers: for every reconcile an informer event caused, from the store commit of that
change (this script times each commit) through the informer (Informer.observe: when the
watch handed it over, when its handlers ran), the handler's add to the work queue and
the wait there (WorkQueue.observe) to the worker taking the key, i.e. the reconcile's
start. Printed as p50/p99 per segment after the table (`--latency`, on by default).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def ideal_waves(replicas: int, surge: str, unavailable: str) -> int:
    """Readiness waves of a RollingUpdate when controller steps are instant and pods ready together."""
    from kctl.controllers import rollout as ro

    d = {"metadata": {"generation": 1}, "spec": {"replicas": replicas, "strategy": {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}}}
    old = {"metadata": {"name": "old", "creationTimestamp": "1"}, "spec": {"replicas": replicas},
           "status": {"replicas": replicas, "availableReplicas": replicas}}
    new = {"metadata": {"name": "new", "creationTimestamp": "2"}, "spec": {"replicas": 0},
           "status": {"replicas": 0, "availableReplicas": 0}}
    waves = 0
    while True:
        while True:  # controller steps until nothing changes
            before = (old["spec"]["replicas"], new["spec"]["replicas"])
            new["spec"]["replicas"] = ro.new_rs_new_replicas(d, [old, new], new)
            new["status"]["replicas"] = new["spec"]["replicas"]
            for rs, size in ro.plan_old_scale_down(d, [old], new):
                rs["spec"]["replicas"] = size
                rs["status"] = {"replicas": size, "availableReplicas": min(size, rs["status"]["availableReplicas"])}
            if (old["spec"]["replicas"], new["spec"]["replicas"]) == before:
                break
        if old["spec"]["replicas"] == 0 and new["status"]["availableReplicas"] == replicas:
            return waves
        waves += 1
        new["status"]["availableReplicas"] = new["spec"]["replicas"]


class BatchBinder:
    """Binds unbound pods round robin, many per transaction (as the scheduler's bind batches)."""

    def __init__(self, api, nodes: list[str]) -> None:
        self.api, self.nodes, self.next = api, nodes, 0
        self.pending: queue.Queue = queue.Queue()

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        threads = [threading.Thread(target=self._watch, args=(stop,), daemon=True),
                   threading.Thread(target=self._bind, args=(stop,), daemon=True)]
        for thread in threads:
            thread.start()
        return threads

    def _watch(self, stop: threading.Event) -> None:
        rt = self.api.resource("pods")
        _, rev = self.api.list(rt)
        for type_, pod in self.api.watch(rt, since=rev, stop=stop):  # decodes pod changes only
            if type_ == "ADDED" and not pod["spec"].get("nodeName"):
                self.pending.put(pod)

    def _bind(self, stop: threading.Event) -> None:
        from kctl.apiserver.contract import Binding

        while not stop.is_set():
            try:
                batch = [self.pending.get(timeout=0.1)]
            except queue.Empty:
                continue
            while True:
                try:
                    batch.append(self.pending.get_nowait())
                except queue.Empty:
                    break
            bindings = []
            for pod in batch:
                meta = pod["metadata"]
                bindings.append(Binding(meta["namespace"], meta["name"], self.nodes[self.next % len(self.nodes)],
                                        uid=meta["uid"]))
                self.next += 1
            self.api.bind_all(bindings)


def complete(api, generation: int) -> bool:
    from kctl.controllers import rollout as ro

    d = api.get(api.resource("deployments"), "web", namespace="default")
    status = d.get("status") or {}
    return d["metadata"]["generation"] >= generation and ro.deployment_complete(d, status)


def wait_complete(api, generation: int, *, timeout: float = 300.0) -> None:
    """Wait for the Deployment's status to say complete, woken by each store change."""
    stop = threading.Event()
    if complete(api, generation):
        return
    rt = api.resource("deployments")
    _, rev = api.list(rt)
    deadline = time.monotonic() + timeout
    for _type, _obj in api.watch(rt, since=rev, stop=stop, timeout=timeout):  # decodes Deployment changes only
        if complete(api, generation):
            return
        if time.monotonic() > deadline:
            break
    raise RuntimeError("the rollout did not complete")


class LatencyProbe:
    """Event -> reconcile latency: store commit -> informer -> handler -> queue -> worker (see module doc)."""

    def __init__(self) -> None:
        self.active = False
        self.commits: dict[int, float] = {}  # revision -> time.monotonic() after its COMMIT
        #: informer thread -> [(dispatched, done, revision, received)]
        self.deliveries: dict[int, list[tuple[float, float, int, float]]] = {}
        self.waits: list[tuple[str, object]] = []  # (controller, QueueWait)

    def watch_commits(self, store) -> None:
        """Time every committed revision (wraps the store's transaction; benchmark instrumentation only)."""
        original = store.transaction

        @contextlib.contextmanager
        def timed():
            with original() as txn:
                yield txn
            if self.active and txn.changes:
                now = time.monotonic()  # the outermost exit (the COMMIT) comes last and wins
                for change in txn.changes:
                    self.commits[change.revision] = now

        store.transaction = timed

    def attach(self, manager, names: list[str]) -> None:
        """Observe the manager's informers and the named controllers' queues (once it runs)."""
        for informer in manager.informers.informers():
            informer.observe(self._delivered)
        for name in names:
            manager.queue(name).observe(lambda wait, name=name: self._waited(name, wait))

    def _waited(self, name: str, wait) -> None:
        if self.active:
            self.waits.append((name, wait))

    def _delivered(self, d) -> None:
        if self.active:
            self.deliveries.setdefault(threading.get_ident(), []).append((d.dispatched, d.done, d.revision,
                                                                           d.received))

    def samples(self) -> dict[str, list[float]]:
        """Seconds per segment, one sample per reconcile an informer event caused."""
        out: dict[str, list[float]] = {"commit -> reconcile start": [], "commit -> informer": [],
                                       "informer -> queue add": [], "queue add -> reconcile start": []}
        index = {t: sorted(ds) for t, ds in self.deliveries.items()}
        starts = {t: [d[0] for d in ds] for t, ds in index.items()}
        for _, wait in self.waits:
            ds = index.get(wait.thread)
            if not ds:
                continue  # added by a timer or a worker, not by an event handler
            i = bisect.bisect_right(starts[wait.thread], wait.added) - 1
            if i < 0 or not ds[i][0] <= wait.added <= ds[i][1]:
                continue
            _, _, rev, received = ds[i]
            committed = self.commits.get(rev)
            if committed is None:
                continue
            out["commit -> reconcile start"].append(wait.taken - committed)
            out["commit -> informer"].append(received - committed)
            out["informer -> queue add"].append(wait.added - received)
            out["queue add -> reconcile start"].append(wait.taken - wait.added)
        return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


def run(*, replicas: int, runs: int, ready_delay: float, nodes: int) -> dict:
    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store
    from kctl.controllers.deployment import DeploymentController
    from kctl.controllers.manager import ControllerManager
    from kctl.controllers.replicaset import ReplicaSetController
    from kctl.testing.fake_kubelet import FakeKubelet

    probe = LatencyProbe()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        store = Store(Path(tmp) / "kctl.db")
        probe.watch_commits(store)
        api = APIServer(store, user="bench", warn=lambda message: None)
        stop = threading.Event()
        names = [f"node-{i}" for i in range(nodes)]
        kubelet = FakeKubelet(api, nodes=names, ready_delay=ready_delay)
        threads = [kubelet.start(stop), *BatchBinder(api, names).start(stop)]
        manager = ControllerManager(api, [ReplicaSetController(), DeploymentController()])
        manager.start(stop)
        cpu: list[float] = []
        try:
            if not manager.wait_until_running(60):
                raise RuntimeError("the controller manager did not start")
            probe.attach(manager, ["replicaset", "deployment"])
            api.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                                 "strategy": {"type": "RollingUpdate",
                                              "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                                 "template": {"metadata": {"labels": {"app": "web"}},
                                              "spec": {"containers": [{"name": "web", "image": "img:0"}]}}}})
            t = time.perf_counter()
            wait_complete(api, 1)
            first = time.perf_counter() - t
            times = []
            for i in range(1, runs + 1):
                d = api.get(api.resource("deployments"), "web", namespace="default")
                d["spec"]["template"]["spec"]["containers"][0]["image"] = f"img:{i}"
                t, c = time.perf_counter(), time.process_time()
                probe.active = True
                updated = api.update(d)
                wait_complete(api, updated["metadata"]["generation"])
                times.append(time.perf_counter() - t)
                probe.active = False
                cpu.append(time.process_time() - c)
        finally:
            stop.set()
            manager.stop()
            stopper = getattr(kubelet, "stop", None)
            if callable(stopper):
                stopper()
            for thread in threads:  # none may write (and make the audit folder again) once the folder goes
                thread.join(10)
            store.close()
    waves = ideal_waves(replicas, "25%", "25%")
    ideal = waves * ready_delay
    median = statistics.median(times)
    return {"replicas": replicas, "ready_delay": ready_delay, "waves": waves, "ideal": ideal, "first": first,
            "times": times, "median": median, "ratio": median / ideal if ideal else float("nan"),
            "cpu": statistics.median(cpu), "latency": probe.samples()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ready-delay", type=float, action="append",
                        help="seconds from start to Ready (repeatable; default 0.2 and 1.0)")
    parser.add_argument("--nodes", type=int, default=10)
    args = parser.parse_args()
    import gc

    from kctl.cli.main import GC_THRESHOLD

    gc.set_threshold(GC_THRESHOLD, 10, 10)  # as in every kctl process, `kctl daemon` included (kctl.cli.main)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    print("| replicas | ready delay | waves | ideal | median rollout | ratio | runs | process CPU per rollout |")
    print("|---:|---:|---:|---:|---:|---:|---|---:|")
    results = []
    for delay in args.ready_delay or [0.2, 1.0]:
        r = run(replicas=args.replicas, runs=args.runs, ready_delay=delay, nodes=args.nodes)
        results.append(r)
        runs = ", ".join(f"{t:.2f}" for t in r["times"])
        print(f"| {r['replicas']} | {delay:.1f} s | {r['waves']} | {r['ideal']:.2f} s | {r['median']:.2f} s | "
              f"{r['ratio']:.2f}x | {runs} | {r['cpu']:.2f} s |", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print("| ready delay | segment (per reconcile an informer event caused) | samples | p50 | p99 |")
    print("|---:|---|---:|---:|---:|")
    for r in results:
        for segment, values in r["latency"].items():
            print(f"| {r['ready_delay']:.1f} s | {segment} | {len(values)} | {percentile(values, 0.5) * 1000:.1f} ms | "
                  f"{percentile(values, 0.99) * 1000:.1f} ms |")


if __name__ == "__main__":
    main()
