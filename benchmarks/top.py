"""Benchmarks of resource metrics (issue 15): `kctl top pod -A` at scale, and the scraper's CPU cost on Podman.

Run as root with `.venv/bin/python benchmarks/top.py [--runs N] [--pods N] [--rounds N]`:

- `kctl top pod -A` on a store holding 100 PodMetrics (and their Pods) over 3 Nodes, as the
  node agents' scrapers would have written them (fakes are fine for a scale benchmark): the
  median wall time of N runs of the real command (a fresh process each time), beside
  `kctl get pods -A` on the same store; the target is < 500 ms;
- the scraper's cost per host per minute on a real Podman: a private `podman system service`
  (own storage, kctl's containers.conf) runs 10 kctl-labelled pods (`sleep`); a
  MetricsScraper (kctl.agent.metrics) samples them for `--rounds` rounds back to back and
  writes to a store of its own; measured are the CPU seconds this process spent (the
  scraper: stats call, /proc read, one write_all per round), the CPU seconds the Podman
  service spent answering (its utime+stime from /proc), and the wall time per round; the
  per-minute cost is per-round cost x 4 (the default --metric-resolution of 15 s).

Prints a Markdown table; docs/benchmarks.md ("Metrics") records a run.
"""

from __future__ import annotations

import argparse
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

from kctl.apiserver.server import APIServer  # noqa: E402
from kctl.store.sqlite import Store  # noqa: E402

KCTL = [sys.executable, "-m", "kctl"]
IMAGE = "localhost/busybox:demo"
NODES = ("h1", "h2", "h3")
NAMESPACES = ("default", "shop", "tools")
TARGET_MS = 500


def _median_ms(argv: list[str], *, env: dict, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append((time.perf_counter() - started) * 1000)
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(argv[2:])} failed: {result.stderr.decode().strip()}")
    return statistics.median(times)


def top_at_scale(*, pods: int, runs: int) -> list[tuple[str, str]]:
    """`kctl top pod -A` and `kctl get pods -A` over `pods` stored PodMetrics on 3 Nodes: median ms each."""
    folder = tempfile.mkdtemp(prefix="kctl-bench-top-")
    try:
        path = Path(folder) / "kctl.db"
        store = Store(path)
        api = APIServer(store, user="bench", audit_log=None)
        ops: list[tuple[str, dict]] = [("create", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})
                                       for n in NAMESPACES if n != "default"]
        ops += [("create", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
                            "status": {"allocatable": {"cpu": "2", "memory": "8Gi"}}}) for n in NODES]
        for i in range(pods):
            name, ns, node = f"web-{i:03d}", NAMESPACES[i % len(NAMESPACES)], NODES[i % len(NODES)]
            ops.append(("create", {"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
                                   "spec": {"nodeName": node, "containers": [{"name": "app", "image": IMAGE},
                                                                             {"name": "side", "image": IMAGE}]}}))
            ops.append(("create", {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                                   "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
                                   "timestamp": "2026-12-04T22:00:00Z", "window": "15s",
                                   "containers": [{"name": "app", "usage": {"cpu": f"{1234567 * (i + 1)}n",
                                                                            "memory": f"{(i + 1) * 1024}Ki"}},
                                                  {"name": "side", "usage": {"cpu": "1m", "memory": "460Ki"}}]}))
        errors = [r.error for r in api.write_all(ops) if r.error is not None]
        if errors:
            raise SystemExit(f"seeding the store failed: {errors[0]}")
        store.close()
        env = {**os.environ, "KCTL_STORE": str(path)}
        _median_ms([*KCTL, "top", "pod", "-A"], env=env, runs=1)  # warm the page cache and bytecode
        top = _median_ms([*KCTL, "top", "pod", "-A"], env=env, runs=runs)
        get = _median_ms([*KCTL, "get", "pods", "-A"], env=env, runs=runs)
        return [(f"`kctl top pod -A`, {pods} PodMetrics on 3 nodes (median of {runs})",
                 f"{top:.0f} ms (target < {TARGET_MS} ms: {'met' if top < TARGET_MS else 'NOT met'})"),
                (f"`kctl get pods -A`, the same {pods} Pods (median of {runs}), for reference", f"{get:.0f} ms")]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scraper_cost(*, pods: int, rounds: int) -> list[tuple[str, str]]:
    """The MetricsScraper's CPU per round on a private Podman running `pods` pods, and per minute at 15 s."""
    from kctl.agent.metrics import MetricsScraper
    from kctl.runtime.interface import LABEL_CONTAINER, LABEL_MANAGED, LABEL_POD_UID, ContainerSpec, PodSandboxSpec
    from kctl.runtime.podman import PodmanRuntime
    from kctl.runtime.service import LocalPodmanService, containers_conf_text
    from kctl.testing.testbed import unmount_under

    folder = tempfile.mkdtemp(prefix="kctl-bench-metrics-")
    service = runtime = store = None
    try:
        conf = Path(folder) / "containers.conf"
        os.makedirs(Path(folder) / "networks")
        conf.write_text(containers_conf_text() + f'\n[network]\nnetwork_config_dir = "{folder}/networks"\n')
        service = LocalPodmanService.ensure(os.path.join(folder, "podman.sock"), conf=str(conf),
                                            root=os.path.join(folder, "storage"), runroot=os.path.join(folder, "run"))
        subprocess.run([str(ROOT / "tools" / "build-demo-image.sh"), "--url", service.url], check=True,
                       capture_output=True, env={**os.environ, "CONTAINERS_CONF": str(conf)})
        runtime = PodmanRuntime(service.url)
        store = Store(Path(folder) / "kctl.db")
        api = APIServer(store, user="bench", audit_log=None)
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bench-node"}})
        bound: dict[str, dict] = {}
        for i in range(pods):
            pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i:02d}",
                                                                             "labels": {"app": "bench"}},
                              "spec": {"nodeName": "bench-node", "containers": [{"name": "app", "image": IMAGE}]}})
            uid = pod["metadata"]["uid"]
            bound[uid] = pod
            labels = {LABEL_MANAGED: "true", LABEL_POD_UID: uid}
            sandbox = runtime.create_pod(PodSandboxSpec(name=f"bench-p{i:02d}", labels=labels))
            cid = runtime.create_container(sandbox.id, ContainerSpec(
                name=f"bench-p{i:02d}-app", image=IMAGE, entrypoint=["sleep", "3600"],
                labels={**labels, LABEL_CONTAINER: "app"}))
            runtime.start_container(cid)
        scraper = MetricsScraper(api, "bench-node", runtime, pod=bound.get, bound_uids=lambda: list(bound))
        scraper.scrape()  # the first round: samples only
        time.sleep(1)
        assert service.process is not None
        podman_before, ours_before = _cpu_seconds(service.process.pid), time.process_time()
        children_before = os.times().children_user + os.times().children_system
        started = time.perf_counter()
        written = 0
        for _ in range(rounds):
            time.sleep(0.2)  # a newer sample each round
            written += len(scraper.scrape().written)
        wall = (time.perf_counter() - started - 0.2 * rounds) / rounds
        ours = (time.process_time() - ours_before) / rounds
        children = (os.times().children_user + os.times().children_system - children_before) / rounds
        podman = (_cpu_seconds(service.process.pid) - podman_before) / rounds
        if written != rounds * (pods + 1):
            raise SystemExit(f"expected {pods + 1} objects per round, wrote {written / rounds:.1f}")
        per_minute = 60 / 15
        return [
            (f"scraper round, {pods} pods + the node (median wall, {rounds} rounds)", f"{wall * 1000:.0f} ms"),
            ("scraper CPU per round (this process: stats, /proc read, one write_all)",
             f"{ours * 1000:.0f} ms (+ {children * 1000:.0f} ms in `cat`)"),
            ("Podman service CPU per round (answering the list and stats calls)", f"{podman * 1000:.0f} ms"),
            ("**per host per minute at --metric-resolution 15s** (scraper + Podman)",
             f"**{(ours + children + podman) * per_minute:.2f} CPU-seconds** "
             f"({(ours + children + podman) * per_minute / 60 * 100:.2f}% of one core)"),
        ]
    finally:
        if runtime is not None:
            for sandbox in runtime.list_pods({"io.kctl.managed": "true"}):
                runtime.remove_pod(sandbox.id)
            runtime.close()
        if store is not None:
            store.close()
        if service is not None:
            service.stop()
        unmount_under(folder)
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each command (median)")
    parser.add_argument("--pods", type=int, default=100, help="PodMetrics stored for `kctl top pod -A`")
    parser.add_argument("--podman-pods", type=int, default=10, help="pods on the real Podman for the scraper")
    parser.add_argument("--rounds", type=int, default=20, help="scraper rounds measured")
    parser.add_argument("--skip-podman", action="store_true", help="only the `kctl top` scale benchmark")
    args = parser.parse_args()
    rows = top_at_scale(pods=args.pods, runs=args.runs)
    if not args.skip_podman:
        rows += scraper_cost(pods=args.podman_pods, rounds=args.rounds)
    print("| measure | result |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
