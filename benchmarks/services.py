"""Benchmarks of Services (issue 14): programming latency, throughput through a ClusterIP, one rule sync.

Run as root: `.venv/bin/python benchmarks/services.py [--runs 20] [--only latency,throughput,nft]`.
Called by `benchmarks/run.py --services` and by hand; docs/benchmarks.md ("Services")
records a run. Three measurements, each beside its baseline:

- **latency** (on the 3-host test bed of benchmarks/multihost.py's `Bench`): a Service in
  front of a Deployment scaled 0 -> 1, --runs times. The clock starts when the store shows
  the new pod Ready (polled every 10 ms); a prober in each host's network namespace
  (h1-h3, `nsenter --net`; each given a default route via the bed's bridge, as a real
  host has) connects to the ClusterIP every 5 ms (a Service without endpoints rejects at
  once) and stops at its first HTTP reply. Latency = the last host's
  first reply - Ready. p50 and p99 (target: p50 < 1 s, p99 < 2 s).
- **throughput**: one client pod on h1, one busybox httpd pod on h2 whose CGI streams
  --megabytes of zeros; `wget -O /dev/null` of it, timed inside the client pod
  (/proc/uptime), through the Service's ClusterIP and straight to the pod IP, alternately,
  --runs // 4 (at least 3) times each; the ratio of the medians (target >= 0.9x).
- **nft**: `kctl.agent.proxy.nftables.render` of 1,000 Services x 10 ready endpoints
  (timed, with its Python allocation peak), and `nft -f` of that script in a private
  network namespace (`unshare -n`): the first load (no table yet) and a reload over it
  (the steady state: the table replaced in one transaction). Target: one `nft -f` < 1 s.

Prints Markdown tables. The bed, the daemon and the store are removed at the end,
whatever happened (the nft measurement needs neither).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from multihost import NAMESPACE, Bench, ready  # noqa: E402

from kctl.testing.testbed import DEMO_IMAGE  # noqa: E402

HOSTS = ("h1", "h2", "h3")
WHO = '#!/bin/sh\necho "Content-Type: text/plain"\necho\necho "$(hostname) $REMOTE_ADDR"\n'
ZERO = ('#!/bin/sh\necho "Content-Type: application/octet-stream"\necho\n'
        'dd if=/dev/zero bs=65536 count=$((${QUERY_STRING:-100} * 16)) 2>/dev/null\n')
PROBE = r"""
import socket, sys, time
ip, deadline = sys.argv[1], time.time() + float(sys.argv[2])
while time.time() < deadline:
    try:
        with socket.create_connection((ip, 80), timeout=0.5) as s:
            s.sendall(b"GET /cgi-bin/who HTTP/1.0\r\n\r\n")
            if s.recv(64).split(b" ", 2)[1:2] == [b"200"]:  # busybox httpd answers HTTP/1.1
                print(time.time()); sys.exit(0)
    except OSError:
        pass
    time.sleep(0.005)
sys.exit(1)
"""
NFT_LOAD = r"""
import subprocess, sys, time
times = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    subprocess.run(["nft", "-f", sys.argv[1]], check=True)
    times.append(time.perf_counter() - t)
print(" ".join(map(str, times)))
"""


def server_script(*scripts: tuple[str, str]) -> str:
    """sh: write the CGI scripts, then busybox httpd as PID 1 on port 8080."""
    parts = ["mkdir -p /www/cgi-bin"]
    for name, text in scripts:
        parts.append(f"printf '%s' {shlex.quote(text)} > /www/cgi-bin/{name} && chmod +x /www/cgi-bin/{name}")
    return " && ".join([*parts, "exec httpd -f -p 0.0.0.0:8080 -h /www"])


def deployment(name: str, replicas: int, *, node: str | None = None) -> dict:
    spec: dict = {"terminationGracePeriodSeconds": 1, "containers": [
        {"name": "httpd", "image": DEMO_IMAGE, "imagePullPolicy": "IfNotPresent",
         "command": ["sh", "-c", server_script(("who", WHO), ("zero", ZERO))],
         "ports": [{"containerPort": 8080}]}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def service(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}}


def client_pod(node: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "namespace": NAMESPACE},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [
                {"name": "client", "image": DEMO_IMAGE, "imagePullPolicy": "IfNotPresent",
                 "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}]}}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


# -- latency and throughput, on the test bed --------------------------------------------------------------

class ServiceBench(Bench):
    """multihost.Bench (bed, store, daemon) with the Service measurements."""

    def __init__(self, folder: str) -> None:
        super().__init__(folder)
        self.slice_lag: list[float] = []  # pod Ready -> its EndpointSlice shows it ready, per scale-up

    def apply(self, *objects: dict) -> None:
        self.kctl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects).encode())

    def cluster_ip(self, name: str) -> str:
        return self.api.get(self.api.resource("services"), name, namespace=NAMESPACE)["spec"]["clusterIP"]

    def app_pods(self, app: str) -> list[dict]:
        return [p for p in self.pods() if (p["metadata"].get("labels") or {}).get("app") == app]

    def probe(self, host: str, ip: str, seconds: float) -> subprocess.Popen:
        """A prober in the host's network namespace: prints the time of its first reply from ip:80."""
        return subprocess.Popen([*self.bed.host(host).nsenter(), sys.executable, "-c", PROBE, ip, str(seconds)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def default_routes(self) -> None:
        """A default route via the bridge in each bed host, as a real host has: without a route covering the
        Service CIDR, a host's own connection to a ClusterIP fails (ENETUNREACH) before netfilter sees it."""
        for host in HOSTS:
            subprocess.run([*self.bed.host(host).nsenter(), "ip", "route", "replace", "default", "via",
                            self.bed.state.gateway], check=True, capture_output=True)

    def latency(self, runs: int) -> list[float]:
        """Ready -> reachable through the ClusterIP from every host, per scale-up 0 -> 1."""
        self.default_routes()
        self.apply(deployment("lat", 0), service("lat"))
        ip = self.cluster_ip("lat")
        found = []
        for _ in range(runs):
            probers = {h: self.probe(h, ip, 120) for h in HOSTS}
            time.sleep(0.5)  # the probers' Python start-up
            self.api.patch(self.api.resource("deployments"), "lat", {"spec": {"replicas": 1}},
                           namespace=NAMESPACE, patch_type="merge")
            deadline = time.monotonic() + 120
            while not any(ready(p) for p in self.app_pods("lat")):
                if time.monotonic() > deadline:
                    raise SystemExit(f"the lat pod did not get Ready; see {self.folder}/daemon.log")
                time.sleep(0.01)
            ready_at = time.time()
            while not self.slice_ready("lat"):
                if time.monotonic() > deadline:
                    raise SystemExit(f"no ready endpoint in lat's EndpointSlice; see {self.folder}/daemon.log")
                time.sleep(0.01)
            self.slice_lag.append(time.time() - ready_at)
            reached = []
            for host, prober in probers.items():
                out, _ = prober.communicate(timeout=150)
                if prober.returncode != 0:
                    raise SystemExit(f"{host} never reached the ClusterIP {ip}; see {self.folder}/daemon.log")
                reached.append(float(out))
            found.append(max(reached) - ready_at)
            print(f"scale-up {len(found)}: {ms(found[-1])} (slice after {ms(self.slice_lag[-1])})", file=sys.stderr,
                  flush=True)
            self.api.patch(self.api.resource("deployments"), "lat", {"spec": {"replicas": 0}},
                           namespace=NAMESPACE, patch_type="merge")
            self.wait(lambda: not self.app_pods("lat"), "the lat pod gone")
            self.wait(lambda: all(self.refused(h, ip) for h in HOSTS), "the ClusterIP without endpoints again")
        self.kctl("delete", "deployment/lat", "service/lat", "-n", NAMESPACE, "--wait")
        return found

    def slice_ready(self, service_name: str) -> bool:
        """Whether an EndpointSlice of the Service lists a ready endpoint."""
        return any((e.get("conditions") or {}).get("ready")
                   for s in self.api.list(self.api.resource("endpointslices"), namespace=NAMESPACE)[0]
                   if (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == service_name
                   for e in s.get("endpoints") or ())

    def refused(self, host: str, ip: str) -> bool:
        one = subprocess.run([*self.bed.host(host).nsenter(), sys.executable, "-c", PROBE, ip, "0.3"],
                             capture_output=True, timeout=60)
        return one.returncode != 0

    def throughput(self, runs: int, megabytes: int) -> dict[str, list[float]]:
        """MB/s of wget from the client pod (h1) to the bulk pod (h2): through the ClusterIP and to the pod IP."""
        self.apply(deployment("bulk", 1, node="h2"), service("bulk"), client_pod("h1"))
        self.wait(lambda: any(ready(p) for p in self.app_pods("bulk")), "the bulk pod Ready")
        self.wait(lambda: any(p["metadata"]["name"] == "client" and ready(p) for p in self.pods()),
                  "the client pod Ready")
        pod_ip = next(p for p in self.app_pods("bulk") if ready(p))["status"]["podIP"]
        targets = {"ClusterIP": f"{self.cluster_ip('bulk')}:80", "pod IP": f"{pod_ip}:8080"}
        warm = f"until wget -q -O /dev/null http://{targets['ClusterIP']}/cgi-bin/who; do sleep 0.2; done"
        subprocess.run([sys.executable, "-m", "kctl", "exec", "client", "-n", NAMESPACE, "--", "timeout", "60",
                        "sh", "-c", warm], env=self.env, capture_output=True, timeout=120, check=True)
        found: dict[str, list[float]] = {what: [] for what in targets}
        for _ in range(runs):
            for what, target in targets.items():
                script = ("a=$(cut -d' ' -f1 /proc/uptime); "
                          f"wget -q -O /dev/null 'http://{target}/cgi-bin/zero?{megabytes}' || exit 1; "
                          "b=$(cut -d' ' -f1 /proc/uptime); echo $a $b")
                done = subprocess.run([sys.executable, "-m", "kctl", "exec", "client", "-n", NAMESPACE, "--",
                                       "sh", "-c", script], env=self.env, capture_output=True, timeout=300)
                if done.returncode != 0:
                    raise SystemExit(f"wget through {what} failed: {done.stderr.decode().strip()}")
                start, end = map(float, done.stdout.split())
                found[what].append(megabytes / max(end - start, 0.01))
                print(f"{what}: {found[what][-1]:.0f} MB/s", file=sys.stderr, flush=True)
        self.kctl("delete", "deployment/bulk", "service/bulk", "-n", NAMESPACE, "--wait")
        self.kctl("delete", "pod", "client", "-n", NAMESPACE, "--wait")
        return found


# -- one rule sync ---------------------------------------------------------------------------------------

def rule_objects(services: int, endpoints: int) -> tuple[list[dict], list[dict]]:
    """services ClusterIP Services (10.96.x.y) with `endpoints` ready endpoints each, over 3 nodes."""
    svcs, slices = [], []
    for i in range(services):
        name = f"svc-{i:04d}"
        ip = f"10.96.{10 + i // 250}.{1 + i % 250}"
        svcs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "bench"},
                     "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip], "ports": [
                         {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}})
        eps = [{"addresses": [f"10.244.{(i * endpoints + j) // 250 % 250}.{2 + (i * endpoints + j) % 250}"],
                "nodeName": HOSTS[j % 3], "conditions": {"ready": True, "serving": True, "terminating": False}}
               for j in range(endpoints)]
        slices.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
                       "metadata": {"name": f"{name}-abcde", "namespace": "bench",
                                    "labels": {"kubernetes.io/service-name": name}},
                       "endpoints": eps, "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
    return svcs, slices


def nft_sync(runs: int, services: int = 1000, endpoints: int = 10) -> dict:
    """render() time and allocation peak, the script's size, and `nft -f` first load / reload in a private netns."""
    from kctl.agent.proxy.nftables import render

    svcs, slices = rule_objects(services, endpoints)
    kwargs = {"node": "h1", "node_addresses": ["10.77.0.11"], "cluster_cidr": "10.244.0.0/16"}
    renders = []
    for _ in range(runs):
        t = time.perf_counter()
        script = render(svcs, slices, **kwargs)
        renders.append(time.perf_counter() - t)
    tracemalloc.start()
    render(svcs, slices, **kwargs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    with tempfile.NamedTemporaryFile("w", suffix=".nft", delete=False) as out:
        out.write(script)
    try:
        first, reload = [], []
        for _ in range(runs):  # a fresh namespace each run: the first load, then reloads over it
            done = subprocess.run(["unshare", "-n", sys.executable, "-c", NFT_LOAD, out.name, "3"],
                                  capture_output=True, timeout=300, check=True)
            times = [float(t) for t in done.stdout.split()]
            first.append(times[0])
            reload.extend(times[1:])
    finally:
        os.unlink(out.name)
    return {"render": renders, "peak": peak, "lines": script.count("\n"), "bytes": len(script),
            "first": first, "reload": reload}


# -- the report --------------------------------------------------------------------------------------------

def print_nft(r: dict, services: int, endpoints: int) -> None:
    print(f"Rule sync, {services} Services x {endpoints} endpoints: a {r['lines']:,}-line script "
          f"({r['bytes'] / 1e6:.1f} MB); medians of {len(r['render'])} (all runs in brackets)\n")
    print("| step | median | runs | target |")
    print("|---|---|---|---|")
    print(f"| render (kctl, Python; allocation peak {r['peak'] / 1e6:.0f} MB) | {ms(statistics.median(r['render']))} | "
          f"{', '.join(ms(t) for t in r['render'])} | |")
    print(f"| `nft -f`, first load (private netns) | {ms(statistics.median(r['first']))} | "
          f"{', '.join(ms(t) for t in r['first'])} | < 1 s |")
    print(f"| `nft -f`, reload over it (the steady state) | {ms(statistics.median(r['reload']))} | "
          f"{', '.join(ms(t) for t in r['reload'])} | < 1 s |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="scale-ups for the latency (default 20)")
    parser.add_argument("--megabytes", type=int, default=300, help="size of one throughput download (MB)")
    parser.add_argument("--only", default="latency,throughput,nft", help="which measurements (comma-separated)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    print(f"nproc {os.cpu_count()}\n")
    if "nft" in only:
        print_nft(nft_sync(5), 1000, 10)
    if not only & {"latency", "throughput"}:
        return
    folder = tempfile.mkdtemp(prefix="kctl-bench-services-")
    bench = ServiceBench(folder)
    latency: list[float] = []
    rates: dict[str, list[float]] = {}
    try:
        bench.start()
        if "latency" in only:
            latency = bench.latency(args.runs)
        if "throughput" in only:
            rates = bench.throughput(max(3, args.runs // 4), args.megabytes)
    except BaseException:
        log = Path(folder, "daemon.log")
        if log.exists():
            print("the daemon's log, last lines:\n" + "\n".join(log.read_text().splitlines()[-40:]), file=sys.stderr)
        raise
    finally:
        bench.close()
        shutil.rmtree(folder, ignore_errors=True)
    print("| measurement | result | runs | target |")
    print("|---|---|---|---|")
    if latency:
        print(f"| pod Ready -> reachable through the ClusterIP from h1, h2 and h3, p50 (p99) of {len(latency)} | "
              f"{ms(pct(latency, .5))} ({ms(pct(latency, .99))}) | {', '.join(ms(t) for t in latency)} | "
              "p50 < 1 s, p99 < 2 s |")
        lag = bench.slice_lag
        rest = [t - s for t, s in zip(latency, lag)]
        print(f"| of which: Ready -> EndpointSlice ready (controller), p50 (p99) | {ms(pct(lag, .5))} "
              f"({ms(pct(lag, .99))}) | {', '.join(ms(t) for t in lag)} | |")
        print(f"| of which: EndpointSlice -> last host answering (proxy sync over SSH), p50 (p99) | "
              f"{ms(pct(rest, .5))} ({ms(pct(rest, .99))}) | {', '.join(ms(t) for t in rest)} | |")
    if rates:
        via, direct = statistics.median(rates["ClusterIP"]), statistics.median(rates["pod IP"])
        print(f"| wget {args.megabytes} MB, pod on h1 -> pod on h2, through the ClusterIP | {via:.0f} MB/s | "
              f"{', '.join(f'{r:.0f}' for r in rates['ClusterIP'])} | |")
        print(f"| the same, straight to the pod IP (baseline) | {direct:.0f} MB/s | "
              f"{', '.join(f'{r:.0f}' for r in rates['pod IP'])} | |")
        print(f"| ratio ClusterIP / pod IP | {via / direct:.2f}x | | >= 0.9x |")


if __name__ == "__main__":
    main()
