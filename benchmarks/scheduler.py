"""Scheduling throughput (issues 4 and 13): 10,000 pods onto 1,000 and onto 5,000 nodes, real store.

Run with `.venv/bin/python benchmarks/scheduler.py [--runs 3] [--pods 10000] [--nodes 1000,5000]`.
For each node count it writes a store once (Node objects with capacity as the node
agent reports it, no agent; 10,000 pending Pods, each requesting 100m CPU and 500Mi, as
kube-scheduler's scheduler_perf SchedulingBasic does), then, per run, copies it and
starts a fresh process that runs `Scheduler(api).run(stop)` as `kctl daemon` would
(the nodes and pods informers of kctl.client.informer, bind worker, events; garbage
collected with kctl's thresholds, kctl.cli.main.GC_THRESHOLD) and waits
until every pod is bound in the store. Reported: pods bound per second from the
scheduler's start (its initial list included), median of the runs; the CPU seconds the
process used for them (a figure the other load of a shared machine disturbs less than
wall time); the process's RSS with everything cached; and, in the same run, two
baselines that show what the design choices buy: one transaction per binding (no
batching) and percentageOfNodesToScore=100 (no adaptive percentage). The machine's load
average is printed before and after, to stderr.

`--store sqlite,etcd` (issue 17) runs every case on each backend in turn, in the same run:
for etcd it starts a TLS cluster of `--etcd-members` members on 127.0.0.1
(kctl.testing.etcdcluster.EtcdCluster) and, per run, restores the same template (a SQLite
store file, kctl's one backup format) into a fresh key prefix, so both backends schedule
the same objects. `--trace-store` adds, per backend, where the scheduler process's time
went: the etcd gateway requests it made (count and seconds by API path) and a profile of
every thread (cProfile, the top functions by cumulative time), printed to stderr, from one
more run that is not counted (the profiler slows it).

Prints a Markdown table; docs/benchmarks.md records a run and this command.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def node(i: int) -> dict:
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"node-{i:05d}", "labels": {"kubernetes.io/hostname": f"node-{i:05d}"}},
            "status": {"capacity": resources, "allocatable": dict(resources),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i:05d}", "labels": {"app": "bench"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}


def build_store(path: str, nodes: int, pods: int) -> None:
    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store

    api = APIServer(Store(path), user="bench", audit_log=False)
    for start in range(0, nodes, 1000):
        api.write_all([("create", node(i)) for i in range(start, min(nodes, start + 1000))])
    for start in range(0, pods, 1000):
        api.write_all([("create", pod(i)) for i in range(start, min(pods, start + 1000))])
    api.store.close()


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def open_spec(spec: dict) -> Any:
    """The store a run's spec names: a SQLite file, or a prefix on the benchmark's etcd cluster."""
    from kctl.store.open import open_store

    if spec["backend"] == "sqlite":
        return open_store(spec["path"])
    from kctl.store.etcd.address import EtcdTLS

    return open_store(spec["address"], tls=EtcdTLS(*spec["tls"]), state_dir=spec["state"])


class StoreTrace:
    """Counts this process's HTTP requests (the etcd gateway's, by API path) and store calls (by caller), with
    their seconds."""

    def __init__(self) -> None:
        import requests

        self.calls: dict[str, list[float]] = {}
        self.lock = threading.Lock()
        original = requests.Session.request

        def request(session: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(session, method, url, *args, **kwargs)
            finally:
                path = "/" + url.split("/", 3)[-1] if "://" in url else url
                with self.lock:
                    self.calls.setdefault(path, []).append(time.perf_counter() - start)

        requests.Session.request = request

    def count_store_calls(self, store: Any) -> None:
        """Also count the store's own methods (each one or more gateway requests on etcd) as
        `store.<method> <- <caller> <- <its caller>`."""
        cls = type(store)
        for name in ("get", "get_by_uid", "list", "list_pages", "fingerprint", "count", "revision", "compacted",
                     "changes", "transaction", "transact"):
            original = getattr(cls, name, None)
            if original is None:
                continue

            def wrapped(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    with self.lock:
                        self.calls.setdefault(f"store.{_name} <- {_caller()}", []).append(
                            time.perf_counter() - start)

            setattr(cls, name, wrapped)

    def summary(self) -> dict:
        """{what: {count, seconds (summed), median_ms}}."""
        return {path: {"count": len(v), "seconds": round(sum(v), 3),
                       "median_ms": round(statistics.median(v) * 1000, 2)} for path, v in self.calls.items()}


def _caller() -> str:
    """The first two kctl frames outside kctl/store above the store call (who asked for it)."""
    frame, seen = sys._getframe(2), []
    while frame is not None and len(seen) < 2:
        where = frame.f_code.co_filename
        if "/kctl/" in where and "/kctl/store/" not in where:
            seen.append(f"{where.split('/kctl/', 1)[1]}:{frame.f_code.co_name}")
        frame = frame.f_back
    return " <- ".join(seen) or "?"


class ThreadProfiles:
    """cProfile of every thread started after it is made (cProfile alone sees only one thread)."""

    def __init__(self) -> None:
        import cProfile

        self.profiles: list[Any] = []
        original = threading.Thread.run
        profiles = self.profiles

        def run(thread: threading.Thread) -> None:
            profile = cProfile.Profile()
            profiles.append(profile)
            profile.enable()
            try:
                original(thread)
            finally:
                profile.disable()

        threading.Thread.run = run

    def top(self, n: int = 40) -> str:
        """The merged profiles: top n by cumulative and by own time, and who calls the store and the gateway."""
        import io
        import pstats

        out = io.StringIO()
        stats = None
        for p in self.profiles:
            try:
                if stats is None:
                    stats = pstats.Stats(p, stream=out)
                else:
                    stats.add(p)
            except TypeError:  # a thread still running: its profile has no stats yet
                continue
        if stats is not None:
            stats.sort_stats("cumulative").print_stats(n)
            stats.sort_stats("tottime").print_stats(n)
            # who makes the store's round trips (the etcd client's one request method)
            stats.print_callers(r"etcd/client.py:\d+\(call\)")
            stats.print_callers(r"etcd/store.py:\d+\((get|list|fingerprint|count|revision)\)")
        return out.getvalue()


def child(spec: dict, pods: int, bind_batch: int, percentage: int | None, shared_informers: bool, *,
          trace: bool = False) -> None:
    """One run, in its own process: schedule until every pod is bound; print JSON."""
    import gc
    import resource

    from kctl.cli.main import GC_THRESHOLD

    gc.set_threshold(GC_THRESHOLD, 10, 10)  # as in every kctl process, `kctl daemon` included (kctl.cli.main)
    from kctl.apiserver.server import APIServer
    from kctl.scheduler.config import SchedulerConfig
    from kctl.scheduler.scheduler import Scheduler, SchedulerSettings

    tracer = StoreTrace() if trace else None
    profiles = ThreadProfiles() if trace else None
    store = open_spec(spec)
    if tracer is not None:
        tracer.count_store_calls(store)
    api = APIServer(store, user="bench")
    base_rss = rss_mb()
    informers = None
    if shared_informers:
        from kctl.client.informer import InformerFactory

        informers = InformerFactory(api)
    sched = Scheduler(api, config=SchedulerConfig(percentage_of_nodes_to_score=percentage),
                      settings=SchedulerSettings(bind_batch=bind_batch), informers=informers)
    stop = threading.Event()
    runner = threading.Thread(target=sched.run, args=(stop,))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_start = usage.ru_utime + usage.ru_stime
    start = time.perf_counter()
    if informers is not None:
        informers.start(stop)
    runner.start()
    while sched.scheduled < pods and time.perf_counter() - start < 600:
        time.sleep(0.005)
    elapsed = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu_start
    sched.binder.wait_idle(60)  # the last batch's Scheduled events
    rss = rss_mb()
    stop.set()
    runner.join(60)
    rt = api.resource("pods")
    bound = sum(1 for p in api.list(rt)[0] if p["spec"].get("nodeName"))
    result = {"elapsed": elapsed, "cpu": cpu, "bound": bound, "rss": rss, "base_rss": base_rss,
              "batches": sched.binder.batches, "failed": sched.failed}
    if tracer is not None:
        result["requests"] = tracer.summary()
        print(profiles.top(), file=sys.stderr)
    api.close()
    print(json.dumps(result))


def run_once(template: str, tmp: str, pods: int, *, backend: "Backend", bind_batch: int = 500,
             percentage: int | None = None, informers: bool = False, trace: bool = False) -> dict:
    spec = backend.fresh(template, tmp)
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec), "--pods", str(pods),
                          "--bind-batch", str(bind_batch), "--percentage", str(percentage or 0)]
                         + (["--informers"] if informers else []) + (["--trace-store"] if trace else []),
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the scheduler run on {backend.name} failed (exit {out.returncode}):\n"
                         f"{out.stderr.strip()[-3000:]}")
    if trace:
        print(f"--- {backend.name}: profile of the scheduler process ---\n{out.stderr}", file=sys.stderr)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["bound"] != pods:
        raise SystemExit(f"only {result['bound']} of {pods} pods bound on {backend.name}")
    return result


class Backend:
    """SQLite: each run schedules on a copy of the template file."""

    name = "SQLite"

    def fresh(self, template: str, tmp: str) -> dict:
        path = os.path.join(tmp, "run.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.unlink(path + suffix)
        shutil.copyfile(template, path)
        return {"backend": "sqlite", "path": path}


class EtcdBackend(Backend):
    """etcd: each run schedules on a fresh key prefix of one cluster, the template restored into it."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.name = f"etcd ({len(cluster.members)} member{'s' if len(cluster.members) > 1 else ''}, TLS)"
        self.runs = 0

    def fresh(self, template: str, tmp: str) -> dict:
        self.runs += 1
        state = os.path.join(tmp, f"etcd-state-{self.runs}")
        os.makedirs(state, mode=0o700, exist_ok=True)
        spec = {"backend": "etcd", "address": f"{self.cluster.address}/kctl-bench-sched-{os.getpid()}-{self.runs}",
                "tls": [str(self.cluster.ca_file), str(self.cluster.client_cert_file),
                        str(self.cluster.client_key_file)], "state": state}
        store = open_spec(spec)
        try:
            start = time.perf_counter()
            store.restore(template)
            print(f"restored the template into {spec['address']} in {time.perf_counter() - start:.1f} s",
                  file=sys.stderr)
        finally:
            store.close()
        return spec


@contextlib.contextmanager
def backends(names: list[str], tmp: str, members: int) -> Iterator[list[Backend]]:
    """The Backend of each name (sqlite | etcd), an etcd cluster running while they are in use."""
    if "etcd" not in names:
        yield [Backend() for _ in names]
        return
    from kctl.testing.etcdcluster import EtcdCluster

    cluster = EtcdCluster(Path(tmp) / "etcd", members=members)
    try:
        cluster.start(timeout=60)
        yield [EtcdBackend(cluster) if name == "etcd" else Backend() for name in names]
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", default="1000,5000", help="comma-separated node counts")
    parser.add_argument("--store", default="sqlite",
                        help="comma-separated backends to run on, in turn: sqlite, etcd (default sqlite)")
    parser.add_argument("--etcd-members", type=int, default=3, help="members of the etcd cluster (default 3)")
    parser.add_argument("--trace-store", action="store_true",
                        help="one more run per backend, not counted, that prints where the time goes "
                             "(store calls by caller, etcd requests, thread profiles)")
    parser.add_argument("--baselines", default="yes", choices=("yes", "no"),
                        help="also run the two baselines (one transaction per binding, score every node)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bind-batch", type=int, default=500, help=argparse.SUPPRESS)
    parser.add_argument("--percentage", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--informers", action="store_true",
                        help="give the scheduler an InformerFactory to share (as kctl daemon does) instead of "
                             "letting it make its own (the same informers either way)")
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child), args.pods, args.bind_batch, args.percentage or None, args.informers,
              trace=args.trace_store)
        return
    names = [n.strip() for n in args.store.split(",") if n.strip()]
    if not names or set(names) - {"sqlite", "etcd"}:
        parser.error(f"--store {args.store}: expected sqlite, etcd or both (comma-separated)")
    rows = []
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="kctl-bench-sched-") as tmp, \
            backends(names, tmp, args.etcd_members) as chosen:
        for nodes in (int(n) for n in args.nodes.split(",")):
            template = os.path.join(tmp, f"template-{nodes}.db")
            build_store(template, nodes, args.pods)
            for backend in chosen:
                runs = [run_once(template, tmp, args.pods, backend=backend, informers=args.informers)
                        for _ in range(args.runs)]
                rate = statistics.median(args.pods / r["elapsed"] for r in runs)
                cpu = statistics.median(r["cpu"] for r in runs)
                rss = statistics.median(r["rss"] for r in runs)
                if args.baselines == "yes":
                    one = run_once(template, tmp, args.pods, backend=backend, bind_batch=1,
                                   informers=args.informers)
                    everything = run_once(template, tmp, args.pods, backend=backend, percentage=100,
                                          informers=args.informers)
                    baselines = [f"{args.pods / one['elapsed']:,.0f} pods/s",
                                 f"{args.pods / everything['elapsed']:,.0f} pods/s"]
                else:
                    baselines = ["not run", "not run"]
                rows.append((f"{args.pods:,} pods onto {nodes:,} nodes", backend.name, f"{rate:,.0f} pods/s",
                             f"{cpu:.1f} s", *baselines, f"{rss:,.0f} MB", f"{runs[0]['base_rss']:,.0f} MB"))
                print(f"{nodes} nodes, {backend.name}: {[round(args.pods / r['elapsed']) for r in runs]} pods/s, "
                      f"CPU {[round(r['cpu'], 1) for r in runs]} s, batches {[r['batches'] for r in runs]}"
                      f" (load {' '.join(f'{x:.2f}' for x in os.getloadavg())})", file=sys.stderr)
                if args.trace_store:  # one more run, not counted (the profiler slows it)
                    traced = run_once(template, tmp, args.pods, backend=backend, informers=args.informers,
                                      trace=True)
                    print(f"{backend.name}, traced run (not counted): {args.pods / traced['elapsed']:,.0f} pods/s; "
                          f"store calls and gateway requests: {json.dumps(traced['requests'], indent=1)}",
                          file=sys.stderr)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
    print("| case | store | kctl (median of %d) | CPU seconds (median) | baseline: one transaction per binding | "
          "baseline: score every node (percentageOfNodesToScore=100) | scheduler process RSS, all cached | "
          "RSS before the first list |" % args.runs)
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
