"""Benchmarks of kctl on several hosts (issue 5) on the test bed, with their baseline in the same run.

Run as root: `.venv/bin/python benchmarks/multihost.py [--runs 3] [--replicas 30]`.
It brings up a test bed of 3 hosts (kctl/testing/testbed.py: network namespaces, each
with sshd and a Podman service), adds them to a store of its own with `kctl node add` +
`kctl node trust --yes`, starts `kctl daemon --heartbeat 1 --node-monitor-grace-period 10
--default-toleration-seconds 5`, and measures, as medians of --runs:

- a Deployment of 30 replicas from `kctl apply` to 30 pods Ready, with 1, 2 and 3 hosts
  schedulable (the others cordoned); the daemon and the nodes are up before the clock starts;
- the baseline: the same 30 containers (same image and command) started with
  `podman --url ssh://root@HOST:22/.../podman.sock --identity KEY run -d` one after
  another, round-robin over the 3 hosts (host keys checked: HOME holds a known_hosts
  with the bed's keys), then removed (not timed);
- failover: 30 replicas on 3 hosts, one host cut off (its link down) until 30 pods are
  Ready again, none on it (target: grace + toleration + 5 s = 20 s); then healed.

Prints a Markdown table; docs/benchmarks.md ("Several hosts") records a run. The bed,
the daemon and the store are removed at the end, whatever happened.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kctl.apiserver.server import APIServer  # noqa: E402
from kctl.store.sqlite import Store  # noqa: E402
from kctl.runtime.interface import LABEL_MANAGED  # noqa: E402
from kctl.runtime.podman import PodmanRuntime  # noqa: E402
from kctl.testing.testbed import DEMO_IMAGE, SSH_PORT, TestBed  # noqa: E402

KCTL = [sys.executable, "-m", "kctl"]
NAMESPACE = "bench"
HOSTS = ("h1", "h2", "h3")
GRACE, TOLERATION = 10, 5
SCRIPT = "trap 'exit 0' TERM; sleep 3600 & wait"  # stops at once on SIGTERM, for both tools
TIMEOUT = 300.0


def deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": DEMO_IMAGE, "imagePullPolicy": "IfNotPresent",
                                         "command": ["sh", "-c", SCRIPT]}]}}}}


def ready(pod: dict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class Bench:
    """The bed, the store, the daemon; what each measurement needs."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.bed = TestBed(os.path.join(folder, "bed"))
        self.env = {**os.environ, "KCTL_STORE": os.path.join(folder, "kctl.db")}
        self.store: Store | None = None
        self.daemon: subprocess.Popen | None = None

    def start(self) -> None:
        self.bed.up(len(HOSTS))
        for name in HOSTS:
            self.kctl("node", "add", name, *self.bed.node_add_args(name))
            self.kctl("node", "trust", name, "--yes")
        self.store = Store(self.env["KCTL_STORE"])
        self.api = APIServer(self.store, user="bench")
        self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        self.daemon = subprocess.Popen(
            [*KCTL, "daemon", "--heartbeat", "1", "--node-monitor-grace-period", str(GRACE),
             "--default-toleration-seconds", str(TOLERATION), "--log-level", "warning"],
            env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.folder, "daemon.log"), "wb"))
        self.wait(lambda: all(self.node_ready(name) for name in HOSTS), "the nodes Ready")

    def kctl(self, *args: str, input: bytes | None = None) -> None:
        result = subprocess.run([*KCTL, *args], input=input, env=self.env, capture_output=True, timeout=TIMEOUT)
        if result.returncode != 0:
            raise SystemExit(f"kctl {' '.join(args[:3])}... failed: {result.stderr.decode().strip()}")

    def wait(self, check, what: str, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if self.daemon is not None and self.daemon.poll() is not None:
                raise SystemExit(f"kctl daemon exited; see {self.folder}/daemon.log")
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}; see {self.folder}/daemon.log")
            time.sleep(0.02)

    def node_ready(self, name: str) -> bool:
        node = self.api.get(self.api.resource("nodes"), name)
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (node.get("status") or {}).get("conditions") or [])

    def pods(self) -> list[dict]:
        return self.api.list(self.api.resource("pods"), namespace=NAMESPACE)[0]

    def containers(self) -> int:
        """kctl's containers on every host (infra included)."""
        total = 0
        for host in self.bed.hosts:
            with contextlib.closing(PodmanRuntime(host.url)) as runtime:
                total += len(runtime.list_containers({LABEL_MANAGED: "true"}))
        return total

    # -- measurements --------------------------------------------------------------------------

    def kctl_up(self, replicas: int, hosts: int) -> float:
        """apply -> all Ready with `hosts` hosts schedulable; then deleted and waited for (not timed)."""
        for i, name in enumerate(HOSTS):
            self.kctl("uncordon" if i < hosts else "cordon", name)
        start = time.perf_counter()
        self.kctl("apply", "-f", "-", input=json.dumps(deployment(replicas)).encode())
        self.wait(lambda: sum(map(ready, self.pods())) == replicas, f"{replicas} pods Ready")
        elapsed = time.perf_counter() - start
        used = {p["spec"]["nodeName"] for p in self.pods()}
        assert used <= set(HOSTS[:hosts]), f"pods on cordoned hosts: {used}"
        self.clean()
        return elapsed

    def clean(self) -> None:
        self.kctl("delete", "deployment", "web", "-n", NAMESPACE, "--ignore-not-found", "--wait")
        self.wait(lambda: not self.pods(), "the pods deleted")
        self.wait(lambda: self.containers() == 0, "the containers removed")

    def podman_up(self, replicas: int) -> float:
        """`podman --url ssh://... run -d` one after another, round-robin over the hosts; then removed."""
        home = Path(self.folder, "home")
        (home / ".ssh").mkdir(parents=True, exist_ok=True, mode=0o700)
        (home / ".ssh" / "known_hosts").write_text(Path(self.bed.known_hosts).read_text())
        env = {**os.environ, "HOME": str(home)}
        hosts = self.bed.hosts[:len(HOSTS)]
        urls = [f"ssh://root@{h.address}:{SSH_PORT}{h.socket}" for h in hosts]
        names: dict[str, list[str]] = {url: [] for url in urls}
        start = time.perf_counter()
        for i in range(replicas):
            url = urls[i % len(urls)]
            name = f"baseline-{i:03d}"
            subprocess.run(["podman", "--url", url, "--identity", self.bed.identity, "run", "-d", "--name", name,
                            DEMO_IMAGE, "sh", "-c", SCRIPT], env=env, check=True, capture_output=True)
            names[url].append(name)
        elapsed = time.perf_counter() - start
        for url, started in names.items():
            subprocess.run(["podman", "--url", url, "--identity", self.bed.identity, "rm", "-f", "-t", "0", *started],
                           env=env, check=True, capture_output=True)
        return elapsed

    def failover(self, replicas: int) -> tuple[float, float]:
        """(cut -> node Unknown, cut -> all replicas Ready away from the cut host); healed and cleaned after."""
        for name in HOSTS:
            self.kctl("uncordon", name)
        self.kctl("apply", "-f", "-", input=json.dumps(deployment(replicas)).encode())
        self.wait(lambda: sum(map(ready, self.pods())) == replicas, f"{replicas} pods Ready")
        on = {name: sum(p["spec"]["nodeName"] == name for p in self.pods()) for name in HOSTS}
        victim = max(on, key=on.get)
        start = time.perf_counter()
        self.bed.cut(victim)
        try:
            def unknown() -> bool:
                node = self.api.get(self.api.resource("nodes"), victim)
                return any(c.get("type") == "Ready" and c.get("status") == "Unknown"
                           for c in (node.get("status") or {}).get("conditions") or [])

            self.wait(unknown, f"{victim} Unknown")
            detected = time.perf_counter() - start
            self.wait(lambda: sum(ready(p) and p["spec"]["nodeName"] != victim for p in self.pods()) == replicas,
                      f"{replicas} pods Ready away from {victim}")
            replaced = time.perf_counter() - start
        finally:
            self.bed.heal(victim)
        self.wait(lambda: self.node_ready(victim), f"{victim} Ready again")
        self.clean()
        return detected, replaced

    def close(self) -> None:
        try:
            if self.daemon is not None:
                self.daemon.terminate()
                try:
                    self.daemon.wait(30)
                except subprocess.TimeoutExpired:
                    self.daemon.kill()
                    self.daemon.wait()
            if self.store is not None:
                self.store.close()
        finally:
            self.bed.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=30)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="kctl-bench-multihost-")
    bench = Bench(folder)
    try:
        bench.start()
        up = {hosts: [bench.kctl_up(args.replicas, hosts) for _ in range(args.runs)] for hosts in (1, 2, 3)}
        baseline = [bench.podman_up(args.replicas) for _ in range(args.runs)]
        failovers = [bench.failover(args.replicas) for _ in range(args.runs)]
    finally:
        bench.close()
        shutil.rmtree(folder, ignore_errors=True)
    base = statistics.median(baseline)
    print(f"nproc {os.cpu_count()}, {args.runs} runs, {args.replicas} replicas, medians (all runs in brackets)\n")
    print("| measurement | median | runs | vs. baseline |")
    print("|---|---|---|---|")
    for hosts, times in up.items():
        median = statistics.median(times)
        print(f"| kctl: apply -> {args.replicas} Ready, {hosts} host{'s' if hosts > 1 else ''} | {median:.2f} s | "
              f"{', '.join(f'{t:.2f}' for t in times)} | {median / base:.2f}x |")
    print(f"| podman --url ssh:// run -d x{args.replicas}, one after another, round-robin on 3 hosts | "
          f"{base:.2f} s | {', '.join(f'{t:.2f}' for t in baseline)} | 1.00x |")
    detected = [d for d, _ in failovers]
    replaced = [r for _, r in failovers]
    print(f"| failover: cut -> node Unknown (grace {GRACE} s) | {statistics.median(detected):.2f} s | "
          f"{', '.join(f'{t:.2f}' for t in detected)} | |")
    print(f"| failover: cut -> {args.replicas} Ready elsewhere (target <= {GRACE + TOLERATION + 5} s) | "
          f"{statistics.median(replaced):.2f} s | {', '.join(f'{t:.2f}' for t in replaced)} | |")


if __name__ == "__main__":
    main()
