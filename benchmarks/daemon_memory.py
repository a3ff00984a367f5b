"""Control-plane memory (issue 4): RSS of the controllers and scheduler over 5,000 Nodes and 10,000 Pods.

Run with `.venv/bin/python benchmarks/daemon_memory.py [--runs 3] [--nodes 5000] [--pods 10000]`
(`--trace` adds a tracemalloc breakdown from one more run). It writes a real SQLite store
once, shaped as a running cluster: Nodes with capacity, addresses and a fresh Ready
condition as the node agent posts them, their Leases in kube-node-lease, and 100-pod
ReplicaSets whose Pods are bound and Running with the status an agent writes (no Podman,
no agents run). Each run copies the store and starts a fresh process that builds
`ControlPlane(api)` (kctl/daemon/controlplane.py: every controller, their shared
informers, and the scheduler with its own list + watch and cache) and starts it as
`kctl daemon` does; once the controller manager is running (its informers synced) and
the scheduler has logged that it started (its cache filled), it waits a few seconds for
the first reconciles and reads VmRSS (and VmHWM, the peak). The baseline, in the same
run, is a fresh process that imports the same modules and opens the same store.

Prints a Markdown table; docs/benchmarks.md records a run and this command.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PODS_PER_REPLICASET = 100
SETTLE_SECONDS = 5.0
TARGET_MB = 400


def stamp(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def node(i: int, now: str) -> dict:
    name = f"node-{i:05d}"
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64"}},
            "status": {"capacity": resources, "allocatable": dict(resources),
                       "addresses": [{"type": "InternalIP", "address": f"10.{i // 250}.{i % 250}.1"},
                                     {"type": "Hostname", "address": name}],
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kctl agent is posting ready status",
                                       "lastHeartbeatTime": now, "lastTransitionTime": now}],
                       "nodeInfo": {"operatingSystem": "linux", "osImage": "Debian GNU/Linux 12 (bookworm)",
                                    "kernelVersion": "6.1.0-27-amd64", "architecture": "amd64",
                                    "containerRuntimeVersion": "podman://4.3.1", "kubeletVersion": "v1.29.0-kctl",
                                    "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
                       "images": [{"names": ["localhost/busybox:demo"], "sizeBytes": 4_500_000},
                                  {"names": ["k8s.gcr.io/pause:3.9"], "sizeBytes": 750_000}]}}


def lease(i: int, now: str) -> dict:
    name = f"node-{i:05d}"
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now.replace("Z", ".000000Z")}}


def template(app: str) -> dict:
    return {"metadata": {"labels": {"app": app, "pod-template-hash": "5d8f7c9b4"}},
            "spec": {"containers": [{"name": "web", "image": "localhost/busybox:demo",
                                     "command": ["httpd", "-f", "-p", "8080"],
                                     "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                                     "env": [{"name": "MODE", "value": "prod"}],
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}


def replicaset(r: int) -> dict:
    app = f"app-{r:03d}"
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{app}-5d8f7c9b4", "namespace": "default", "labels": {"app": app}},
            "spec": {"replicas": PODS_PER_REPLICASET, "selector": {"matchLabels": {"app": app}},
                     "template": template(app)}}


def pod(i: int, owner: dict, nodes: int, now: str) -> dict:
    """A Running pod of `owner`, bound round-robin, with the status a node agent writes."""
    tmpl = owner["spec"]["template"]
    name = f"{owner['metadata']['name']}-{i:05d}"
    ip = f"10.{128 + i // 62500}.{i // 250 % 250}.{i % 250 + 2}"
    ready = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
             for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": dict(tmpl["metadata"]["labels"]),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {**json.loads(json.dumps(tmpl["spec"])), "nodeName": f"node-{i % nodes:05d}"},
            "status": {"phase": "Running", "conditions": ready, "hostIP": f"10.{i % nodes // 250}.{i % nodes % 250}.1",
                       "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now, "qosClass": "Burstable",
                       "containerStatuses": [{"name": "web", "ready": True, "started": True, "restartCount": 0,
                                              "image": "localhost/busybox:demo",
                                              "imageID": "sha256:" + "ab" * 32,
                                              "containerID": f"podman://{i:064x}",
                                              "state": {"running": {"startedAt": now}},
                                              "lastState": {}}]}}


def build_store(path: str, nodes: int, pods: int) -> None:
    """The cluster, written with write_all batches of 1,000."""
    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store

    now = stamp(time.time())
    api = APIServer(Store(path), user="bench")
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-node-lease"}})
    for make in (node, lease):
        for start in range(0, nodes, 1000):
            _write(api, [make(i, now) for i in range(start, min(nodes, start + 1000))])
    owners = [r.obj for r in _write(api, [replicaset(r) for r in range(-(-pods // PODS_PER_REPLICASET))])]
    for start in range(0, pods, 1000):
        _write(api, [pod(i, owners[i // PODS_PER_REPLICASET], nodes, now)
                     for i in range(start, min(pods, start + 1000))])
    api.store.close()


def _write(api, objs: list[dict]) -> list:
    results = api.write_all([("create", o) for o in objs])
    failed = [r.error for r in results if r.error is not None]
    if failed:
        raise SystemExit(f"writing the store failed: {failed[0]}")
    return results


def status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _imports() -> None:
    """What the control plane's process imports, so the baseline differs only by the data."""
    import kctl.daemon.controlplane  # noqa: F401
    import kctl.scheduler.scheduler  # noqa: F401
    from kctl.daemon.controllers import new_controllers
    from kctl.daemon.settings import DaemonSettings

    new_controllers(DaemonSettings())  # the table imports each controller's module when it makes one


class _Started(logging.Handler):
    """Sets an event when the scheduler logs that it started (its informers/feed synced)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("scheduler started"):
            self.event.set()


def child(path: str, baseline: bool, trace: int) -> None:
    """One run in a fresh process: print JSON with the RSS once everything is cached."""
    if trace:
        import tracemalloc

        tracemalloc.start(trace)
    _imports()
    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store

    api = APIServer(Store(path), user="bench")
    api.list(api.resource("namespaces"))
    if baseline:
        print(json.dumps({"rss": status_mb("VmRSS"), "peak": status_mb("VmHWM")}))
        return
    from kctl.daemon.controlplane import ControlPlane

    started = _Started()
    sched_log = logging.getLogger("kctl.scheduler")
    sched_log.addHandler(started)
    sched_log.setLevel(logging.INFO)
    sched_log.propagate = False
    plane = ControlPlane(api)
    t0 = time.perf_counter()
    plane.start()
    if not plane.manager.wait_until_running(timeout=600):
        raise SystemExit("the controller manager did not start")
    manager_synced = time.perf_counter() - t0
    if not started.event.wait(600):
        raise SystemExit("the scheduler did not start")
    synced = time.perf_counter() - t0
    time.sleep(SETTLE_SECONDS)
    result = {"rss": status_mb("VmRSS"), "peak": status_mb("VmHWM"), "manager_synced": manager_synced,
              "synced": synced}
    if trace:
        result["top"] = _top(trace)
    # the cluster was left as it was (no pod replaced, none unbound): what was measured is a steady state
    pods = api.list(api.resource("pods"))[0]
    result["running"] = sum(1 for p in pods if p["spec"].get("nodeName") and p["status"].get("phase") == "Running")
    plane.stop()
    print(json.dumps(result))


def _top(depth: int) -> list[str]:
    """The biggest allocation sites still alive, grouped by their innermost kctl frame."""
    import tracemalloc

    snapshot = tracemalloc.take_snapshot()
    sites: dict[str, int] = {}
    for stat in snapshot.statistics("traceback"):
        frame = next((f for f in stat.traceback if "/kctl/" in f.filename), stat.traceback[0])
        where = f"{frame.filename.split('/kctl/')[-1]}:{frame.lineno}"
        sites[where] = sites.get(where, 0) + stat.size
    total = sum(sites.values())
    lines = [f"traced total {total / 2**20:.0f} MB"]
    for where, size in sorted(sites.items(), key=lambda kv: -kv[1])[:15]:
        lines.append(f"{size / 2**20:7.1f} MB  {where}")
    return lines


def run_once(template_db: str, tmp: str, *, baseline: bool = False, trace: int = 0) -> dict:
    path = os.path.join(tmp, "run.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    shutil.copyfile(template_db, path)
    argv = [sys.executable, __file__, "--child", path] + (["--baseline"] if baseline else []) \
        + (["--trace-depth", str(trace)] if trace else [])
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--trace", action="store_true", help="one more run under tracemalloc: where memory goes")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--trace-depth", dest="trace_depth", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.baseline, args.trace_depth)
        return
    with tempfile.TemporaryDirectory(prefix="kctl-bench-mem-") as tmp:
        template_db = os.path.join(tmp, "template.db")
        t = time.perf_counter()
        build_store(template_db, args.nodes, args.pods)
        print(f"store written in {time.perf_counter() - t:.1f} s "
              f"({os.path.getsize(template_db) / 2**20:.0f} MB)", file=sys.stderr)
        runs, bases = [], []
        for _ in range(args.runs):
            runs.append(run_once(template_db, tmp))
            if runs[-1]["running"] != args.pods:
                raise SystemExit(f"the control plane changed the cluster: {runs[-1]['running']} pods Running")
            bases.append(run_once(template_db, tmp, baseline=True))
        print(f"runs: {[round(r['rss']) for r in runs]} MB RSS, peaks {[round(r['peak']) for r in runs]} MB, "
              f"synced after {[round(r['synced'], 1) for r in runs]} s; baselines "
              f"{[round(b['rss']) for b in bases]} MB", file=sys.stderr)
        traced = run_once(template_db, tmp, trace=12) if args.trace else None
    rss = statistics.median(r["rss"] for r in runs)
    peak = statistics.median(r["peak"] for r in runs)
    base = statistics.median(b["rss"] for b in bases)
    synced = statistics.median(r["synced"] for r in runs)
    verdict = "met" if rss < TARGET_MB else "**not met**"
    print(f"| case | control plane RSS (median of {args.runs}) | peak RSS (VmHWM) | baseline: kctl imported, "
          "store open | control plane minus baseline | caches synced after | target |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.nodes:,} Nodes (+ Leases), {args.pods:,} bound Running Pods | {rss:,.0f} MB | {peak:,.0f} MB "
          f"| {base:,.0f} MB | {rss - base:,.0f} MB | {synced:.1f} s | < {TARGET_MB} MB: {verdict} |")
    if traced is not None:
        print("\ntracemalloc (one run, live allocations by innermost kctl frame):")
        for line in traced["top"]:
            print("    " + line)


if __name__ == "__main__":
    main()
