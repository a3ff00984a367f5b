"""Benchmark (issue 15): a StatefulSet of 10 with claims, apply -> all Ready, against `podman kube play`.

Run as root with `.venv/bin/python benchmarks/statefulset.py [--runs N] [--replicas 10]`.
It starts a private `podman system service` (kctl's containers.conf, its own storage in a
temporary folder), builds the demo image there, runs `kctl daemon` (node agent,
controllers, scheduler, PV controller and the `local` provisioner; cluster DNS on a free
port) on a store of its own, and times:

- `kctl apply -f` of a StatefulSet of 10 with a volumeClaimTemplate (class `local`: one
  Podman named volume per pod, made on the node) until every pod is Ready, with
  `podManagementPolicy: OrderedReady` (one pod after another, each Ready first) and
  `Parallel`;
- `podman kube play` of the same 10 pods, each with a `persistentVolumeClaim` volume
  (kube play makes a named volume per claim name), until it returns (containers running).

Between runs everything is removed (the set, its claims, volumes; `kube down` and
`podman volume rm`), untimed. Prints a Markdown table of medians and the ratios (targets:
<= 1.5x OrderedReady, <= 0.8x Parallel); docs/benchmarks.md records a run.
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
from kctl.runtime.service import CONTAINERS_CONF_FILE, LocalPodmanService  # noqa: E402
from kctl.store.sqlite import Store  # noqa: E402

KCTL = [sys.executable, "-m", "kctl"]
IMAGE = "localhost/busybox:demo"
NODE = "bench-node"
NAMESPACE = "bench"
SCRIPT = "trap 'exit 0' TERM; hostname > /data/owner; sleep 3600 & wait"


def container() -> dict:
    return {"name": "app", "image": IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", SCRIPT],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}


def statefulset(replicas: int, policy: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "serviceName": "web", "podManagementPolicy": policy,
                     "selector": {"matchLabels": {"app": "web"}},
                     "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"terminationGracePeriodSeconds": 5, "containers": [container()]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "16Mi"}}}}]}}


def play_manifest(replicas: int) -> str:
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{i}", "labels": {"app": "web"}},
             "spec": {"hostname": f"web-{i}", "terminationGracePeriodSeconds": 5, "containers": [container()],
                      "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-web-{i}"}}]}}
            for i in range(replicas)]
    return "---\n".join(json.dumps(p) + "\n" for p in pods)


def run(cmd: list[str], *, env: dict) -> None:
    result = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed: {result.stderr.decode().strip()}")


class Bench:
    """A private Podman service and a `kctl daemon` on a store of its own."""

    def __init__(self, folder: str, *, workers: int) -> None:
        self.folder = folder
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env["CONTAINERS_CONF"] = str(CONTAINERS_CONF_FILE)
        self.store_path = os.path.join(folder, "kctl.db")
        self.env["KCTL_STORE"] = self.store_path
        self.service = LocalPodmanService.ensure(os.path.join(folder, "podman.sock"), conf=str(CONTAINERS_CONF_FILE),
                                                 root=os.path.join(folder, "storage"),
                                                 runroot=os.path.join(folder, "run"))
        subprocess.run([str(ROOT / "tools" / "build-demo-image.sh"), "--url", self.service.url], check=True,
                       env=self.env)
        self.store = Store(self.store_path)
        self.api = APIServer(self.store, user="bench")
        self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        self.daemon = subprocess.Popen([*KCTL, "daemon", "--node", NODE, "--podman-url", self.service.url,
                                        "--log-level", "warning", "--workers", str(workers),
                                        "--cluster-dns-port", "0"],
                                       env=self.env, stdin=subprocess.DEVNULL,
                                       stderr=open(os.path.join(folder, "daemon.log"), "wb"))
        self.wait(self._node_ready, 60)

    def _node_ready(self) -> bool:
        items, _ = self.api.list(self.api.resource("nodes"))
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for n in items for c in (n.get("status") or {}).get("conditions") or [])

    def wait(self, check, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise SystemExit("timed out; see the daemon log in " + self.folder)
            time.sleep(0.005)

    def ready_count(self) -> int:
        pods, _ = self.api.list(self.api.resource("pods"), namespace=NAMESPACE)
        return sum(1 for p in pods if not p["metadata"].get("deletionTimestamp")
                   and any(c.get("type") == "Ready" and c.get("status") == "True"
                           for c in (p.get("status") or {}).get("conditions") or []))

    def kctl_up(self, replicas: int, policy: str) -> float:
        path = os.path.join(self.folder, f"sts-{policy}.yaml")
        Path(path).write_text(json.dumps(statefulset(replicas, policy)))
        start = time.perf_counter()
        run([*KCTL, "apply", "-f", path], env=self.env)
        self.wait(lambda: self.ready_count() == replicas, 300)
        return time.perf_counter() - start

    def kctl_clean(self) -> None:
        """Delete the set (its claims go with it: whenDeleted Delete) and wait for every volume to go."""
        run([*KCTL, "delete", "sts", "web", "-n", NAMESPACE, "--wait=false"], env=self.env)

        def gone() -> bool:
            pods, _ = self.api.list(self.api.resource("pods"), namespace=NAMESPACE)
            claims, _ = self.api.list(self.api.resource("pvc"), namespace=NAMESPACE)
            volumes, _ = self.api.list(self.api.resource("pv"))
            return not pods and not claims and not volumes
        self.wait(gone, 300)

    def play_up(self, replicas: int) -> float:
        path = os.path.join(self.folder, "play.yaml")
        Path(path).write_text(play_manifest(replicas))
        start = time.perf_counter()
        run(["podman", "--url", self.service.url, "kube", "play", path], env=self.env)
        return time.perf_counter() - start

    def play_clean(self, replicas: int) -> None:
        run(["podman", "--url", self.service.url, "kube", "down", os.path.join(self.folder, "play.yaml")],
            env=self.env)
        for i in range(replicas):
            subprocess.run(["podman", "--url", self.service.url, "volume", "rm", "-f", f"data-web-{i}"],
                           env=self.env, capture_output=True)

    def close(self) -> None:
        self.daemon.terminate()
        self.daemon.wait(30)
        # the service's storage is this run's own: emptying it touches nothing else
        subprocess.run(["podman", "--url", self.service.url, "pod", "rm", "-af", "-t", "0"], env=self.env,
                       capture_output=True)
        subprocess.run(["podman", "--url", self.service.url, "volume", "prune", "-f"], env=self.env,
                       capture_output=True)
        self.store.close()
        self.service.stop()
        from kctl.testing.testbed import kill_processes_naming, unmount_under

        kill_processes_naming(self.folder)
        unmount_under(self.folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=10)
    parser.add_argument("--workers", type=int, default=4, help="kctl daemon --workers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kctl-bench-sts-", ignore_cleanup_errors=True) as folder:
        bench = Bench(folder, workers=args.workers)
        try:
            play, ours = [], {"OrderedReady": [], "Parallel": []}
            for _ in range(args.runs):
                play.append(bench.play_up(args.replicas))
                bench.play_clean(args.replicas)
                for policy in ours:
                    ours[policy].append(bench.kctl_up(args.replicas, policy))
                    bench.kctl_clean()
            base = statistics.median(play)
            print(f"| case ({args.replicas} pods with a volume each) | kctl median (s) | podman kube play median (s)"
                  f" | ratio | target |  ({args.runs} runs each)")
            print("|---|---|---|---|---|")
            for policy, target in (("OrderedReady", 1.5), ("Parallel", 0.8)):
                ours_median = statistics.median(ours[policy])
                ratio = ours_median / base
                verdict = "met" if ratio <= target else "**not met**"
                print(f"| StatefulSet {policy}: apply until all Ready | {ours_median:.3f} | {base:.3f} | "
                      f"{ratio:.2f}x | <= {target}x: {verdict} |")
        finally:
            bench.close()


if __name__ == "__main__":
    main()
