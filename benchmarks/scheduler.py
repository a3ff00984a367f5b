"""Scheduling throughput (issues 4 and 13): 10,000 pods onto 1,000 and onto 5,000 nodes, real store.

Run with `.venv/bin/python benchmarks/scheduler.py [--runs 3] [--pods 10000] [--nodes 1000,5000]`.
For each node count it writes a store once (Node objects with capacity as the node
agent reports it, no agent; 10,000 pending Pods, each requesting 100m CPU and 500Mi, as
kube-scheduler's scheduler_perf SchedulingBasic does), then, per run, copies it and
starts a fresh process that runs `Scheduler(api).run(stop)` as `kctl daemon` would
(the nodes and pods informers of kctl.client.informer, bind worker, events) and waits
until every pod is bound in the store. Reported: pods bound per second from the
scheduler's start (its initial list included), median of the runs; the CPU seconds the
process used for them (a figure the other load of a shared machine disturbs less than
wall time); the process's RSS with everything cached; and, in the same run, two
baselines that show what the design choices buy: one transaction per binding (no
batching) and percentageOfNodesToScore=100 (no adaptive percentage). The machine's load
average is printed before and after, to stderr.

Prints a Markdown table; docs/benchmarks.md records a run and this command.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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

    api = APIServer(Store(path), user="bench")
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


def child(path: str, pods: int, bind_batch: int, percentage: int | None, shared_informers: bool) -> None:
    """One run, in its own process: schedule until every pod is bound; print JSON."""
    import resource
    import threading

    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store
    from kctl.scheduler.config import SchedulerConfig
    from kctl.scheduler.scheduler import Scheduler, SchedulerSettings

    api = APIServer(Store(path), user="bench")
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
    print(json.dumps({"elapsed": elapsed, "cpu": cpu, "bound": bound, "rss": rss, "base_rss": base_rss,
                      "batches": sched.binder.batches, "failed": sched.failed}))


def run_once(template: str, tmp: str, pods: int, *, bind_batch: int = 500, percentage: int | None = None,
             informers: bool = False) -> dict:
    path = os.path.join(tmp, "run.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    shutil.copyfile(template, path)
    out = subprocess.run([sys.executable, __file__, "--child", path, "--pods", str(pods), "--bind-batch",
                          str(bind_batch), "--percentage", str(percentage or 0)]
                         + (["--informers"] if informers else []),
                         check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["bound"] != pods:
        raise SystemExit(f"only {result['bound']} of {pods} pods bound")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", default="1000,5000", help="comma-separated node counts")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bind-batch", type=int, default=500, help=argparse.SUPPRESS)
    parser.add_argument("--percentage", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--informers", action="store_true",
                        help="give the scheduler an InformerFactory to share (as kctl daemon does) instead of "
                             "letting it make its own (the same informers either way)")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.pods, args.bind_batch, args.percentage or None, args.informers)
        return
    rows = []
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="kctl-bench-sched-") as tmp:
        for nodes in (int(n) for n in args.nodes.split(",")):
            template = os.path.join(tmp, f"template-{nodes}.db")
            build_store(template, nodes, args.pods)
            runs = [run_once(template, tmp, args.pods, informers=args.informers) for _ in range(args.runs)]
            rate = statistics.median(args.pods / r["elapsed"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            rss = statistics.median(r["rss"] for r in runs)
            one = run_once(template, tmp, args.pods, bind_batch=1, informers=args.informers)
            everything = run_once(template, tmp, args.pods, percentage=100, informers=args.informers)
            rows.append((f"{args.pods:,} pods onto {nodes:,} nodes", f"{rate:,.0f} pods/s", f"{cpu:.1f} s",
                         f"{args.pods / one['elapsed']:,.0f} pods/s",
                         f"{args.pods / everything['elapsed']:,.0f} pods/s",
                         f"{rss:,.0f} MB", f"{runs[0]['base_rss']:,.0f} MB"))
            print(f"{nodes} nodes: {[round(args.pods / r['elapsed']) for r in runs]} pods/s, "
                  f"CPU {[round(r['cpu'], 1) for r in runs]} s, batches {[r['batches'] for r in runs]}",
                  file=sys.stderr)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
    print("| case | kctl (median of %d) | CPU seconds (median) | baseline: one transaction per binding | "
          "baseline: score every node (percentageOfNodesToScore=100) | scheduler process RSS, all cached | "
          "RSS before the first list |" % args.runs)
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
