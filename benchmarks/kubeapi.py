"""The Kubernetes REST API over HTTPS (issue 16): kubectl against kctl's own CLI, the official Python client's
sustained GETs and creates, a watch's fan-out to 100 watchers, and the daemon's memory with 100 watches open.

Run with `.venv/bin/python benchmarks/kubeapi.py [--runs 9] [--seconds 5] [--threads 4] [--watchers 100]`.
It writes a store of 1,000 Pods, starts `kctl daemon --store S --no-agents --no-controllers --listen
127.0.0.1:PORT` (the HTTPS API alone: no Podman, nothing else writing) and a kubeconfig from
`kctl config kubeconfig`, then measures, side by side in the same run:

1. `kubectl get pods` (1,000 pods, through the HTTPS API; kubectl's discovery cache warm, as a user's)
   against `kctl --store S get pods` on the same store, and `kctl --kubeconfig K get pods` (kctl's own
   HTTPS client); wall time of the whole command, medians of --runs, interleaved;
2. sustained GETs/s and creates/s from the official `kubernetes` client with keep-alive, --threads
   threads sharing one ApiClient (urllib3's pool), for --seconds each: typed (the client builds its
   models) and raw (`_preload_content=False`, the client's HTTP path only); baseline: the same calls on
   the in-process APIServer (no HTTP, no TLS) in one thread;
3. watch fan-out: --watchers watches of one namespace's ConfigMaps, spread over 4 processes (25 threads
   each, one TLS connection per watch, so the watchers' own GIL does not time the server), then 20
   changes one by one; per change the latency from the write's start to each watcher reading the event
   (wall clock, one host); the median over changes of the p50 and p99; baseline: one watcher;
4. the daemon's RSS (VmRSS) before the watches and with them open.

Prints a Markdown table; docs/benchmarks.md records a run and this command. `--profile` adds a cProfile of
the daemon-side cost of the sustained GETs (the top functions), for when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
KCTL = [sys.executable, "-m", "kctl"]
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
PODS = 1000
FAN_NAMESPACE = "fan"
CHANGES = 20
WATCH_PROCESSES = 4


def pod(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i:04d}", "labels": {"app": "bench"}},
            "spec": {"containers": [{"name": "c", "image": "localhost/busybox:1"}]}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Daemon:
    """`kctl daemon --listen` over a store, the HTTPS API alone."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.store = folder / "kctl.db"
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = folder / "kubeconfig"
        self.process: subprocess.Popen | None = None
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONDONTWRITEBYTECODE", "KUBECONFIG", "KCTL_STORE", "KCTL_SERVER",
                                 "KCTL_KUBECONFIG")}
        self.env["HOME"] = str(folder / "home")
        (folder / "home").mkdir(exist_ok=True)

    def start(self) -> None:
        log = open(self.folder / "daemon.log", "ab")
        self.process = subprocess.Popen([*KCTL, "daemon", "--store", str(self.store), "--no-agents", "--no-controllers",
                                         "--cluster-dns-port", "0", "--listen", f"127.0.0.1:{self.port}",
                                         "--log-level", "warning"], stdout=log, stderr=log, env=self.env,
                                        stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + 60
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        import urllib.error
        import urllib.request

        while True:
            try:  # any HTTP answer means it serves (anonymous /healthz may be 403 without the RBAC bootstrap)
                with urllib.request.urlopen(f"{self.url}/healthz", context=context, timeout=5):
                    break
            except urllib.error.HTTPError:
                break
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the daemon did not serve: " + (self.folder / "daemon.log").read_text()[-2000:])
            time.sleep(0.2)
        config = subprocess.run([*KCTL, "--store", str(self.store), "config", "kubeconfig", "--server", self.url],
                                capture_output=True, text=True, env=self.env, check=True)
        self.kubeconfig.write_text(config.stdout)
        self.kubeconfig.chmod(0o600)

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None


def timed(argv: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
    return time.perf_counter() - started


def bench_get(daemon: Daemon, runs: int) -> dict:
    """kubectl get pods over HTTPS vs kctl get pods on the store vs kctl over HTTPS (interleaved)."""
    kubectl = [KUBECTL, "--kubeconfig", str(daemon.kubeconfig), "get", "pods"]
    local = [*KCTL, "--store", str(daemon.store), "get", "pods"]
    over = [*KCTL, "--kubeconfig", str(daemon.kubeconfig), "get", "pods"]
    for argv in (kubectl, local, over):  # warm kubectl's discovery cache, the page cache and bytecode
        timed(argv, daemon.env)
    out: dict[str, list[float]] = {"kubectl": [], "local": [], "over": []}
    for _ in range(runs):
        out["kubectl"].append(timed(kubectl, daemon.env))
        out["local"].append(timed(local, daemon.env))
        out["over"].append(timed(over, daemon.env))
    return out


def _client(kubeconfig: Path, threads: int):
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = max(threads, 4)
    return client.CoreV1Api(client.ApiClient(configuration))


def _sustained(threads: int, seconds: float, call) -> float:
    """Calls per second of `call(thread_index, n)` run by `threads` threads for `seconds`."""
    counts = [0] * threads
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(index: int) -> None:
        n = 0
        try:
            while not stop.is_set():
                call(index, n)
                n += 1
        except BaseException as exc:  # noqa: BLE001 - reported after the run
            errors.append(exc)
        counts[index] = n

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise SystemExit(f"a benchmark call failed: {errors[0]!r}")
    return sum(counts) / elapsed


def bench_sustained(daemon: Daemon, seconds: float, threads: int) -> dict:
    """GETs/s and creates/s from the official client (typed and raw), and the in-process APIServer's."""
    from kubernetes import client

    api = _client(daemon.kubeconfig, threads)
    api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="bench")))
    api.create_namespaced_config_map("bench", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="target"),
                                                                 data={"k": "v"}))
    out: dict[str, float] = {}
    out["get_typed"] = _sustained(threads, seconds, lambda i, n: api.read_namespaced_config_map("target", "bench"))
    out["get_raw"] = _sustained(threads, seconds, lambda i, n: api.read_namespaced_config_map(
        "target", "bench", _preload_content=False).data)
    out["create_typed"] = _sustained(threads, seconds, lambda i, n: api.create_namespaced_config_map(
        "bench", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"t{i}-{n}"), data={"k": "v"})))
    out["create_raw"] = _sustained(threads, seconds, lambda i, n: api.create_namespaced_config_map(
        "bench", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"r{i}-{n}"}, "data": {"k": "v"}},
        _preload_content=False).data)
    api.api_client.close()
    return out


def bench_in_process(folder: Path, seconds: float) -> dict:
    """The baseline: the same GET and create on an APIServer in this process (no HTTP, no TLS), one thread."""
    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store

    api = APIServer(Store(folder / "inproc" / "kctl.db"), audit_log=None)
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "target", "namespace": "default"},
                "data": {"k": "v"}})
    cms = api.resource("configmaps")
    out = {"get": _sustained(1, seconds, lambda i, n: api.get(cms, "target")),
           "create": _sustained(1, seconds, lambda i, n: api.create(
               {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{n}", "namespace": "default"},
                "data": {"k": "v"}}))}
    api.close()
    return out


def _watch_process(url: str, ca: str, cert: str, key: str, namespace: str, since: str, count: int, ready, finished,
                   results) -> None:
    """`count` watcher threads, each on its own TLS connection; puts (name, time.time()) per event read."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    context = ssl.create_default_context(cafile=ca)
    context.load_cert_chain(cert, key)
    seen: list[tuple[str, float]] = []
    lock = threading.Lock()
    opened = threading.Barrier(count + 1)
    stop = threading.Event()

    def watch() -> None:
        conn = http.client.HTTPSConnection(parts.hostname, parts.port, context=context, timeout=600)
        conn.request("GET", f"/api/v1/namespaces/{namespace}/configmaps?watch=1&resourceVersion={since}",
                     headers={"Accept": "application/json"})
        answer = conn.getresponse()
        opened.wait()
        try:
            while not stop.is_set():
                line = answer.readline()
                if not line:
                    break
                at = time.time()
                event = json.loads(line)
                if event.get("type") == "ADDED":
                    with lock:
                        seen.append((event["object"]["metadata"]["name"], at))
        except (OSError, ValueError):
            pass
        finally:
            conn.close()

    threads = [threading.Thread(target=watch, daemon=True) for _ in range(count)]
    for t in threads:
        t.start()
    opened.wait()
    ready.set()
    finished.wait()
    stop.set()
    with lock:
        results.put(list(seen))


def bench_fanout(daemon: Daemon, watchers: int, *, pid: int, namespace: str = FAN_NAMESPACE) -> dict:
    """One change at a time to `watchers` watches; latencies; the daemon's RSS before and with the watches."""
    from kubernetes import client

    from kctl.kubeapi.pki import PKI

    pki = PKI.for_store(daemon.store)
    api = _client(daemon.kubeconfig, 1)
    api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    time.sleep(2.0)
    rss_before = rss_mb(pid)
    since = api.list_namespaced_config_map(namespace).metadata.resource_version
    per = [watchers // WATCH_PROCESSES + (1 if i < watchers % WATCH_PROCESSES else 0) for i in range(WATCH_PROCESSES)]
    per = [n for n in per if n]
    ctx = multiprocessing.get_context("spawn")
    procs = []
    finished = ctx.Event()
    for n in per:
        ready, results = ctx.Event(), ctx.Queue()
        proc = ctx.Process(target=_watch_process, args=(daemon.url, str(pki.ca.crt), str(pki.admin.crt),
                                                         str(pki.admin.key), namespace, since, n, ready, finished,
                                                         results))
        proc.start()
        procs.append((proc, ready, results))
    for _, ready, _ in procs:
        if not ready.wait(120):
            raise SystemExit("the watchers did not open their watches")
    time.sleep(2.0)
    rss_with = rss_mb(pid)
    starts: dict[str, float] = {}
    for k in range(CHANGES):
        name = f"tick-{k}"
        starts[name] = time.time()
        api.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name)),
                                         _preload_content=False).data
        time.sleep(0.3)  # every watcher has it long before (p99 well under this): the changes do not overlap
    time.sleep(1.0)
    received: list[tuple[str, float]] = []
    finished.set()
    for proc, _, results in procs:
        received.extend(results.get(timeout=60))
        proc.join(30)
    api.api_client.close()
    p50s, p99s, complete = [], [], 0
    for name, start in starts.items():
        lat = [(at - start) * 1000 for n, at in received if n == name]
        if len(lat) == watchers:
            complete += 1
        if lat:
            p50s.append(percentile(lat, 0.5))
            p99s.append(percentile(lat, 0.99))
    return {"p50": median(p50s), "p99": median(p99s), "complete": complete, "rss_before": rss_before,
            "rss_with": rss_with}


def profile_gets(daemon: Daemon, seconds: float, threads: int) -> str:
    """A cProfile of an in-process HTTPS API serving the same GETs (the top functions by cumulative time)."""
    import cProfile
    import io
    import pstats

    from kubernetes import client

    sys.path.insert(0, str(ROOT / "tests" / "unit" / "kubeapi"))
    from conftest import start_kubeapi  # the tests' in-process server: the same app, in this process

    from kctl.kubeapi.pki import PKI

    folder = Path(tempfile.mkdtemp(prefix="kctl-bench-prof-"))
    try:
        template = PKI.for_store(folder / "tmpl" / "kctl.db")
        template.ensure(sans=["127.0.0.1"])
        server = start_kubeapi(folder, template.folder)
        api = _client(server.kubeconfig, threads)
        api.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="t")))
        profiler = cProfile.Profile()
        profiler.enable()
        _sustained(threads, seconds, lambda i, n: api.read_namespaced_config_map("t", "default",
                                                                                  _preload_content=False).data)
        profiler.disable()
        api.api_client.close()
        server.stop()
        server.api.close()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
        return text.getvalue()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if not Path(KUBECTL).exists():
        raise SystemExit("kubectl is not installed")
    folder = Path(tempfile.mkdtemp(prefix="kctl-bench-kubeapi-"))
    daemon = Daemon(folder)
    load = os.getloadavg()[0]
    try:
        from kctl.apiserver.server import APIServer
        from kctl.store.sqlite import Store

        api = APIServer(Store(daemon.store), audit_log=None)
        api.write_all([("create", pod(i)) for i in range(PODS)])
        api.close()
        daemon.start()
        pid = daemon.process.pid
        get = bench_get(daemon, args.runs)
        sustained = bench_sustained(daemon, args.seconds, args.threads)
        inproc = bench_in_process(folder, args.seconds)
        fan = bench_fanout(daemon, args.watchers, pid=pid)
        one = bench_fanout_one(daemon, pid=pid)
    finally:
        daemon.stop()
        if os.environ.get("KCTL_BENCH_KEEP"):
            print(f"kept {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    load_after = os.getloadavg()[0]
    k, loc, over = median(get["kubectl"]) * 1000, median(get["local"]) * 1000, median(get["over"]) * 1000
    print(f"load average (1 min) before/after: {load:.2f} / {load_after:.2f}\n")
    print("| what | kctl | baseline | ratio | target |")
    print("|---|---|---|---|---|")
    print(f"| `kubectl get pods`, {PODS} pods, through kctl's HTTPS API (median of {args.runs}) | {k:.0f} ms | "
          f"`kctl get pods` on the same store: {loc:.0f} ms | {k / loc:.2f}x | <= 1.5x: "
          f"{'met' if k / loc <= 1.5 else 'not met'} |")
    print(f"| `kctl --kubeconfig K get pods` (kctl's own HTTPS client), same | {over:.0f} ms | "
          f"`kctl get pods` on the store: {loc:.0f} ms | {over / loc:.2f}x | |")
    print(f"| GETs/s, official Python client, keep-alive, {args.threads} threads, raw | "
          f"{sustained['get_raw']:,.0f} /s | in-process APIServer.get, 1 thread: {inproc['get']:,.0f} /s | "
          f"{sustained['get_raw'] / inproc['get']:.2f}x | >= 1,000 /s: "
          f"{'met' if sustained['get_raw'] >= 1000 else 'not met'} |")
    print(f"| GETs/s, same, typed (the client builds V1ConfigMap models) | {sustained['get_typed']:,.0f} /s | | | |")
    print(f"| creates/s, official Python client, keep-alive, {args.threads} threads, raw | "
          f"{sustained['create_raw']:,.0f} /s | in-process APIServer.create, 1 thread: {inproc['create']:,.0f} /s | "
          f"{sustained['create_raw'] / inproc['create']:.2f}x | >= 300 /s: "
          f"{'met' if sustained['create_raw'] >= 300 else 'not met'} |")
    print(f"| creates/s, same, typed | {sustained['create_typed']:,.0f} /s | | | |")
    print(f"| watch fan-out: one change to {args.watchers} watchers, p50 (p99), median of {CHANGES} changes "
          f"({fan['complete']}/{CHANGES} reached all) | {fan['p50']:.1f} ms ({fan['p99']:.1f}) | one watcher: "
          f"{one['p50']:.1f} ms | | p50 < 50 ms: {'met' if fan['p50'] < 50 else 'not met'} |")
    print(f"| daemon RSS with {args.watchers} watches open | {fan['rss_with']:.1f} MB | without: "
          f"{fan['rss_before']:.1f} MB | +{fan['rss_with'] - fan['rss_before']:.1f} MB | within +50 MB: "
          f"{'met' if fan['rss_with'] - fan['rss_before'] <= 50 else 'not met'} |")
    if args.profile:
        print("\n```\n" + profile_gets(daemon, args.seconds, args.threads) + "```")


def bench_fanout_one(daemon: Daemon, *, pid: int) -> dict:
    """The baseline of the fan-out: the same changes to one watcher (its own namespace)."""
    return bench_fanout(daemon, 1, pid=pid, namespace="fan-one")


if __name__ == "__main__":
    main()
