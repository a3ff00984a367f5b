"""apply -> serving: one Pod with a hostPort, from `kctl apply` until its port answers, against `podman kube play`.

Run as root: `.venv/bin/python benchmarks/apply_serving.py [--runs N]` (docs/benchmarks.md
records a run). It starts a private `podman system service` (kctl's containers.conf, storage
of its own, so nothing else on the machine is touched), builds the demo image into it, and
starts `kctl daemon` once on a store of its own (the scheduler binds the Pod: it names no
node). Then, interleaved, N times each:

- kctl: `kctl apply -f pod.yaml` as a new process (start-up included), then the clock runs
  until an HTTP answer comes from 127.0.0.1:PORT (busybox httpd in the Pod); then the Pod
  is deleted through the API and the run waits until the port is closed and the Podman pod
  is gone;
- podman: `podman --url URL kube play pod.yaml` of the same manifest, the clock running until
  the port answers the same way; then `podman kube down` and the same wait.

Besides the medians it prints where kctl's time goes, per run as seen by the polling loop
(every 2 ms): the Pod in the store (apply's write committed), the apply process's exit, the
Pod bound (spec.nodeName), the port answering, and the agent's status write of a running
container (from the binding until the port answers only the port is polled, as for kube
play); and the CPU seconds of each run: the client process (`kctl apply` or `podman kube
play`), the `kctl daemon`, and the Podman service with the children it reaped (runc,
netavark; conmon detaches and is not counted).

`--compare DIR` also runs the kctl of another tree (DIR holds its `kctl` package, e.g.
`git archive HEAD | tar -x -C DIR`), with a daemon, store and Podman service of its own,
in the same rounds: OLD and NEW interleaved on the same machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kctl.apiserver.server import APIServer  # noqa: E402
from kctl.machinery.errors import NotFound  # noqa: E402
from kctl.runtime.service import CONTAINERS_CONF_FILE, LocalPodmanService  # noqa: E402
from kctl.store.sqlite import Store  # noqa: E402
from kctl.testing.testbed import unmount_under  # noqa: E402

KCTL = [sys.executable, "-m", "kctl"]
IMAGE = "localhost/busybox:demo"
NODE = "bench-node"
NAMESPACE = "bench"
NAME = "web"
POLL = 0.002  # seconds between two looks of the polling loop


def pod(port: int) -> dict:
    """The Pod both tools run: busybox httpd on containerPort 8080, published on hostPort `port`."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                "name": "httpd", "image": IMAGE, "imagePullPolicy": "Never",
                "command": ["httpd", "-f", "-p", "8080", "-h", "/etc"],
                "ports": [{"containerPort": 8080, "hostPort": port}]}]}}


def answers(port: int) -> bool:
    """Whether an HTTP server answers on 127.0.0.1:port (any status line)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return sock.recv(16).startswith(b"HTTP/")
    except OSError:
        return False


def _reaped(process: subprocess.Popen, seen: dict[str, float], *, block: bool = False) -> bool:
    """Whether the process ended (reaped here, its CPU seconds put in seen["cpu_cli"])."""
    pid, status, usage = os.wait4(process.pid, 0 if block else os.WNOHANG)
    if pid == 0:
        return False
    process.returncode = os.waitstatus_to_exitcode(status)
    seen["cpu_cli"] = usage.ru_utime + usage.ru_stime
    return True


def run(cmd: list[str], *, env: dict) -> None:
    result = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:5])}... failed: {result.stderr.decode().strip()}")


class Bench:
    """The service, the daemon and the store of one benchmark run (closed by close())."""

    def __init__(self, folder: str, *, port: int, tree: Path = ROOT) -> None:
        self.folder, self.port, self.tree = folder, port, tree
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env["PYTHONPATH"] = str(tree)  # `python -m kctl` in cwd=tree: that tree's kctl
        self.env["CONTAINERS_CONF"] = str(CONTAINERS_CONF_FILE)
        self.store_path = os.path.join(folder, "kctl.db")
        self.env["KCTL_STORE"] = self.store_path
        self.daemon: subprocess.Popen[bytes] | None = None
        self.service = LocalPodmanService.ensure(os.path.join(folder, "podman.sock"), conf=str(CONTAINERS_CONF_FILE),
                                                 root=os.path.join(folder, "storage"),
                                                 runroot=os.path.join(folder, "run"))
        if not self.service.owned:
            raise SystemExit(f"a Podman service already answers in {folder}")
        self.store = Store(self.store_path)
        try:
            subprocess.run([str(ROOT / "tools" / "build-demo-image.sh"), "--url", self.service.url], check=True,
                           env=self.env)
            self.api = APIServer(self.store, user="bench")
            self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            self.manifest = os.path.join(folder, "pod.yaml")
            Path(self.manifest).write_text(json.dumps(pod(port)) + "\n")
            self.daemon = subprocess.Popen([*KCTL, "daemon", "--node", NODE, "--podman-url", self.service.url,
                                            "--log-level", "warning"],
                                           env=self.env, cwd=tree, stdin=subprocess.DEVNULL,
                                           stderr=open(os.path.join(folder, "daemon.log"), "wb"))
            self.wait(self._node_ready, 60, "the node to be Ready")
        except BaseException:
            self.close()
            raise

    def _node_ready(self) -> bool:
        items, _ = self.api.list(self.api.resource("nodes"))
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for n in items for c in (n.get("status") or {}).get("conditions") or [])

    def wait(self, check, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}; see the daemon log in {self.folder}")
            time.sleep(POLL)

    def _pod(self) -> dict | None:
        try:
            return self.api.get(self.api.resource("pods"), NAME, namespace=NAMESPACE)
        except NotFound:
            return None

    def cpu(self, pid: int | None, *, children: bool = False) -> float:
        """CPU seconds (user + system) of a process so far; with children, those of the children it reaped."""
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = sum(int(fields[i]) for i in ((11, 12, 13, 14) if children else (11, 12)))
        return ticks / os.sysconf("SC_CLK_TCK")

    def kctl_up(self) -> dict[str, float]:
        """One kctl run: the times (s from the start) at which each step was first seen; CPU seconds."""
        seen: dict[str, float] = {}
        assert self.daemon is not None
        daemon_cpu, service_cpu = self.cpu(self.daemon.pid), self.cpu(self.service.pid, children=True)
        start = time.perf_counter()
        apply = subprocess.Popen([*KCTL, "apply", "-f", self.manifest], env=self.env, cwd=self.tree,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while "serving" not in seen or "status" not in seen:
            now = time.perf_counter() - start
            if "cli" not in seen and _reaped(apply, seen):
                if apply.returncode:
                    raise SystemExit(f"kctl apply failed: {apply.stderr.read().decode() if apply.stderr else ''}")
                seen["cli"] = now
            # while Podman works (bound, not yet serving) only the port is polled, as for kube play: reading the
            # store every 2 ms costs CPU the machine's 2 cores would otherwise give Podman
            obj = self._pod() if "bound" not in seen or "serving" in seen else None
            if obj is not None:
                seen.setdefault("stored", now)
                if "bound" not in seen and (obj.get("spec") or {}).get("nodeName"):
                    seen["bound"] = now
                if "status" not in seen and any("running" in (c.get("state") or {})
                                                for c in (obj.get("status") or {}).get("containerStatuses") or []):
                    seen["status"] = now
            if "serving" not in seen and answers(self.port):
                seen["serving"] = now
            if time.monotonic() > deadline:
                raise SystemExit(f"kctl: timed out (seen {seen}); see the daemon log in {self.folder}")
            time.sleep(POLL)
        if "cpu_cli" not in seen:
            _reaped(apply, seen, block=True)
        if apply.stderr is not None:
            apply.stderr.close()
        seen["cpu_daemon"] = self.cpu(self.daemon.pid) - daemon_cpu
        seen["cpu_service"] = self.cpu(self.service.pid, children=True) - service_cpu
        return seen

    def kctl_down(self) -> None:
        self.api.delete(self.api.resource("pods"), NAME, namespace=NAMESPACE)
        self.wait(lambda: self._pod() is None and not answers(self.port) and not self._podman_pods(), 120,
                  "the kctl Pod to be removed")

    def play_up(self) -> dict[str, float]:
        service_cpu = self.cpu(self.service.pid, children=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        run(["podman", "--url", self.service.url, "kube", "play", self.manifest], env=self.env)
        self.wait(lambda: answers(self.port), 60, "kube play's pod to answer")
        serving = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {"serving": serving, "cpu_cli": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
                "cpu_service": self.cpu(self.service.pid, children=True) - service_cpu}

    def play_down(self) -> None:
        run(["podman", "--url", self.service.url, "kube", "down", self.manifest], env=self.env)
        self.wait(lambda: not answers(self.port) and not self._podman_pods(), 120, "kube down")

    def _podman_pods(self) -> list[str]:
        out = subprocess.run(["podman", "--url", self.service.url, "pod", "ps", "-q"], env=self.env,
                             capture_output=True, text=True)
        return out.stdout.split()

    def close(self) -> None:
        if self.daemon is not None:
            self.daemon.terminate()
            try:
                self.daemon.wait(30)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        for pod_id in self._podman_pods():  # the service's storage is this run's own
            subprocess.run(["podman", "--url", self.service.url, "pod", "rm", "-f", pod_id], env=self.env,
                           capture_output=True)
        self.store.close()
        self.service.stop()
        unmount_under(self.folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--port", type=int, default=18480, help="the hostPort (free on this machine)")
    parser.add_argument("--compare", type=Path, help="also run the kctl of this tree (OLD), interleaved")
    args = parser.parse_args()
    trees = {"kctl": ROOT, **({"kctl OLD": args.compare.resolve()} if args.compare else {})}
    ports = {name: args.port + i for i, name in enumerate(trees)}
    for port in ports.values():
        if answers(port):
            raise SystemExit(f"port {port} already answers: choose another with --port")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in (*trees, "podman")}
    with tempfile.TemporaryDirectory(prefix="kctl-bench-serving-") as folder:
        benches: dict[str, Bench] = {}
        try:
            for name, tree in trees.items():
                os.mkdir(path := os.path.join(folder, str(len(benches))))
                benches[name] = Bench(path, port=ports[name], tree=tree)
            sides = [*trees, "podman"]
            for name in sides:  # warm: bytecode, page cache, the image's layers
                _round(benches, name)
            for r in range(args.runs):
                for name in sides[r % len(sides):] + sides[:r % len(sides)]:  # each side first in turn
                    results[name].append(_round(benches, name))
        finally:
            for bench in benches.values():
                bench.close()
    _report(results, args.runs)


def _round(benches: dict[str, "Bench"], side: str) -> dict[str, float]:
    """One run of one side, and its clean-up (kube play runs on the first bench's service)."""
    if side == "podman":
        bench = next(iter(benches.values()))
        seen = bench.play_up()
        bench.play_down()
        return seen
    seen = benches[side].kctl_up()
    benches[side].kctl_down()
    return seen


def _report(results: dict[str, list[dict[str, float]]], runs: int) -> None:
    def med(side: str, key: str) -> float:
        return statistics.median(run[key] for run in results[side]) * 1000

    play = med("podman", "serving")
    print(f"| what (median of {runs}) | wall | ratio to `podman kube play` "
          "| CPU ms: client / daemon / Podman service |")
    print("|---|---|---|---|")
    for side in results:
        daemon = f"{med(side, 'cpu_daemon'):.0f}" if side != "podman" else "-"
        print(f"| {side} | {med(side, 'serving'):.0f} ms | {med(side, 'serving') / play:.2f}x "
              f"| {med(side, 'cpu_cli'):.0f} / {daemon} / {med(side, 'cpu_service'):.0f} |")
    print()
    for side in results:
        if side != "podman":
            print(f"{side}'s steps, median ms from the start: "
                  + ", ".join(f"{key} {med(side, key):.0f}" for key in ("stored", "cli", "bound", "serving", "status")))
    print("all runs, ms: " + "; ".join(f"{side} " + json.dumps([round(r["serving"] * 1000) for r in results[side]])
                                      for side in results))


if __name__ == "__main__":
    main()
