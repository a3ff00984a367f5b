"""Benchmarks of the node agent (issue 3) against `podman kube play` / `kube down`, same run.

Run as root with `make bench-agent` (or `.venv/bin/python benchmarks/agent.py [--runs N]`).
It starts a private `podman system service` (kctl's containers.conf, the host's storage),
builds the demo image if missing, runs `kctl daemon` on a store of its own, and measures:

- one Pod from `kctl apply -f` to Ready, against `podman kube play` of the same manifest
  (which returns when its containers run);
- 20 Pods the same way (kube play makes them one after another);
- deleting those 20 (`kctl delete pods --all --wait`) against `podman kube down`;
- the daemon's RSS with 100 Pods running.

Prints a Markdown table of medians and the ratios; docs/benchmarks.md records a run.
"""

from __future__ import annotations

import argparse
import json
import os
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
from kctl.runtime.service import CONTAINERS_CONF_FILE, LocalPodmanService  # noqa: E402

KCTL = [sys.executable, "-m", "kctl"]
IMAGE = "localhost/busybox:demo"
NODE = "bench-node"
NAMESPACE = "bench"
SCRIPT = "trap 'exit 0' TERM; sleep 3600 & wait"  # stops at once on SIGTERM, for both tools


def pod(i: int, *, node: str | None) -> dict:
    spec = {"terminationGracePeriodSeconds": 5, "containers": [
        {"name": "app", "image": IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", SCRIPT]}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i:03d}", "namespace": NAMESPACE},
            "spec": spec}


def manifest(count: int, *, node: str | None) -> str:
    return "---\n".join(json.dumps(pod(i, node=node)) + "\n" for i in range(count))


def run(cmd: list[str], *, env: dict) -> None:
    result = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed: {result.stderr.decode().strip()}")


class Bench:
    def __init__(self, folder: str, *, workers: int) -> None:
        self.folder = folder
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env["CONTAINERS_CONF"] = str(CONTAINERS_CONF_FILE)
        self.store_path = os.path.join(folder, "kctl.db")
        self.env["KCTL_STORE"] = self.store_path
        self.service = LocalPodmanService.ensure(os.path.join(folder, "podman.sock"), conf=str(CONTAINERS_CONF_FILE))
        subprocess.run([str(ROOT / "tools" / "build-demo-image.sh"), "--url", self.service.url], check=True,
                       env=self.env)
        self.store = Store(self.store_path)
        self.api = APIServer(self.store, user="bench")
        self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        self.daemon = subprocess.Popen([*KCTL, "daemon", "--node", NODE, "--podman-url", self.service.url,
                                        "--log-level", "warning", "--workers", str(workers)],
                                       env=self.env, stdin=subprocess.DEVNULL,
                                       stderr=open(os.path.join(folder, "daemon.log"), "wb"))
        self.wait(lambda: self._node_ready(), 60)

    def _node_ready(self) -> bool:
        items, _ = self.api.list(self.api.resource("nodes"))
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for n in items for c in (n.get("status") or {}).get("conditions") or [])

    def wait(self, check, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise SystemExit("timed out; see the daemon log in " + self.folder)
            time.sleep(0.002)

    def ready_count(self) -> int:
        pods, _ = self.api.list(self.api.resource("pods"), namespace=NAMESPACE)
        return sum(1 for p in pods if any(c.get("type") == "Ready" and c.get("status") == "True"
                                          for c in (p.get("status") or {}).get("conditions") or []))

    def pod_count(self) -> int:
        return len(self.api.list(self.api.resource("pods"), namespace=NAMESPACE)[0])

    def kctl_up(self, count: int) -> float:
        path = os.path.join(self.folder, f"kctl-{count}.yaml")
        Path(path).write_text(manifest(count, node=NODE))
        start = time.perf_counter()
        run([*KCTL, "apply", "-f", path], env=self.env)
        self.wait(lambda: self.ready_count() == count, 120)
        return time.perf_counter() - start

    def kctl_down(self) -> float:
        start = time.perf_counter()
        run([*KCTL, "delete", "pods", "--all", "-n", NAMESPACE, "--wait", "--timeout", "120"], env=self.env)
        elapsed = time.perf_counter() - start
        self.wait(lambda: self.pod_count() == 0, 60)
        return elapsed

    def play_up(self, count: int) -> float:
        path = os.path.join(self.folder, f"play-{count}.yaml")
        Path(path).write_text(manifest(count, node=None))
        start = time.perf_counter()
        run(["podman", "--url", self.service.url, "kube", "play", path], env=self.env)
        return time.perf_counter() - start

    def play_down(self, count: int) -> float:
        start = time.perf_counter()
        run(["podman", "--url", self.service.url, "kube", "down", os.path.join(self.folder, f"play-{count}.yaml")],
            env=self.env)
        return time.perf_counter() - start

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.daemon.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def close(self) -> None:
        self.daemon.terminate()
        self.daemon.wait(30)
        subprocess.run(["podman", "--url", self.service.url, "pod", "rm", "-af", "-t", "0"], env=self.env,
                       capture_output=True)
        self.store.close()
        self.service.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rss-pods", type=int, default=100)
    parser.add_argument("--workers", type=int, default=4, help="kctl daemon --workers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kctl-bench-agent-") as folder:
        bench = Bench(folder, workers=args.workers)
        try:
            rows = []
            for count in (1, 20):
                kctl_up, play_up, kctl_down, play_down = [], [], [], []
                for _ in range(args.runs):
                    play_up.append(bench.play_up(count))
                    play_down.append(bench.play_down(count))
                    kctl_up.append(bench.kctl_up(count))
                    kctl_down.append(bench.kctl_down())
                rows.append((f"{count} Pod(s) to Ready / running", kctl_up, play_up))
                rows.append((f"delete {count} Pod(s)", kctl_down, play_down))
            print(f"| case | kctl median (s) | podman kube median (s) | ratio |  ({args.runs} runs each)")
            print("|---|---|---|---|")
            for name, ours, theirs in rows:
                a, b = statistics.median(ours), statistics.median(theirs)
                print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.2f}x |")
            bench.kctl_up(args.rss_pods)
            time.sleep(15)  # a few resyncs and heartbeats with every pod running
            print(f"\ndaemon RSS with {args.rss_pods} Pods running: {bench.rss_mb():.1f} MB")
            bench.kctl_down()
        finally:
            bench.close()


if __name__ == "__main__":
    main()
