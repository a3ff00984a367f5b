"""Benchmarks of the store, API layer and CLI, each beside its baseline in the same run.

Run with `make bench` (or `.venv/bin/python benchmarks/run.py [--quick]`). Prints a
Markdown table of medians; docs/benchmarks.md records a run and this command. These
machines are noisy: compare the ratios, not the absolute figures. As root (with nft and
unshare), also one kube-proxy rule sync (benchmarks/services.py's `nft_sync`; that file's
test-bed measurements run by hand). With etcd installed (/usr/bin/etcd, issue 17), also
the store on a 3-member etcd cluster beside SQLite (benchmarks/store_backends.py, one round;
run that file for more rounds), printed as a second table.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
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
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/services.py
KCTL = [sys.executable, "-m", "kctl"]


def deployment(i: int) -> dict:
    name = f"web-{i}"
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                         {"name": "web", "image": "localhost/busybox:1", "command": ["httpd", "-f"],
                          "ports": [{"containerPort": 8080}],
                          "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                          "env": [{"name": "MODE", "value": "prod"}]}]}}}}


def pod(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i:04d}", "labels": {"app": "bench"}},
            "spec": {"containers": [{"name": "c", "image": "localhost/busybox:1"}]}}


def manifest(objs: list[dict]) -> str:
    return "---\n".join(json.dumps(o) + "\n" for o in objs)


def timed(cmd: list[str], *, env: dict, input: bytes | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, input=input, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
    return time.perf_counter() - t


def fresh_env(tmp: str, tag: str) -> dict:
    """A store of its own; bytecode caching on, as on a user's machine."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    os.makedirs(os.path.join(tmp, tag), mode=0o700, exist_ok=True)  # a named store's folder must exist
    return {**env, "KCTL_STORE": os.path.join(tmp, tag, "kctl.db")}


def bench_apply(tmp: str, runs: int) -> dict:
    """`kctl apply -f` of one file of 1,000 Deployments, against one request per object."""
    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store

    objs = [deployment(i) for i in range(1000)]
    path = os.path.join(tmp, "1000.yaml")
    Path(path).write_text(manifest(objs))
    ours = [timed([*KCTL, "apply", "-f", path], env=fresh_env(tmp, f"apply{r}")) for r in range(runs)]
    base = []
    for r in range(runs):
        # the kubectl pattern: one GET + one create per object, each its own request
        # (here its own transaction, in-process: no HTTP, no process start) — a floor.
        api = APIServer(Store(os.path.join(tmp, f"base{r}", "kctl.db")))
        t = time.perf_counter()
        for obj in objs:
            api.apply(obj)
        base.append(time.perf_counter() - t)
    # the shell-script pattern: one `kctl apply -f` per object (40 timed, scaled to 1,000)
    env = fresh_env(tmp, "loop")
    per = []
    for obj in objs[:40]:
        per.append(timed([*KCTL, "apply", "-f", "-"], env=env, input=json.dumps(obj).encode()))
    return {"ours": ours, "base": base, "loop": [statistics.median(per) * len(objs)]}


def bench_get(tmp: str, runs: int) -> dict:
    """`kctl get pods` with 1,000 pods stored, against a bare `python -c pass`."""
    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store

    env = fresh_env(tmp, "get")
    api = APIServer(Store(env["KCTL_STORE"]))
    api.write_all([("create", pod(i)) for i in range(1000)])
    timed([*KCTL, "get", "pods"], env=env)  # warm the page cache and bytecode
    ours, base = [], []
    for _ in range(runs):
        ours.append(timed([*KCTL, "get", "pods"], env=env))
        base.append(timed([sys.executable, "-c", "pass"], env=env))
    return {"ours": ours, "base": base}


def _writer(path: str, n: int, ready, go) -> None:
    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store

    api = APIServer(Store(path))
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tick"}, "data": {}})
    ready.set()
    go.wait()
    rt = api.resource("cm")
    for i in range(n):
        time.sleep(0.01)
        api.patch(rt, "tick", {"data": {"t": repr(time.time())}}, patch_type="merge")


def _watch_latency(tmp: str, n: int, use_watchfiles: bool) -> list[float]:
    from kctl.store.sqlite import Store

    path = os.path.join(tmp, f"watch-{use_watchfiles}", "kctl.db")
    store = Store(path)
    ctx = multiprocessing.get_context("spawn")
    ready, go = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_writer, args=(path, n, ready, go))
    proc.start()
    ready.wait(30)
    since = store.revision()
    lat: list[float] = []
    go.set()
    if use_watchfiles:
        import watchfiles

        for _ in watchfiles.watch(os.path.dirname(path), debounce=0, step=5, rust_timeout=10_000):
            now = time.time()
            for change in store.changes(since):
                since = change.revision
                if change.type == "MODIFIED":
                    lat.append(now - float(change.obj["data"]["t"]))
            if len(lat) >= n:
                break
    else:
        for change in store.watch(since):
            if change.type == "MODIFIED":
                lat.append(time.time() - float(change.obj["data"]["t"]))
            if len(lat) >= n:
                break
    proc.join(30)
    return lat


def bench_watch(tmp: str, n: int) -> dict:
    """Write in one process -> seen by a watcher in another: Store.watch against watchfiles."""
    return {"ours": _watch_latency(tmp, n, False), "base": _watch_latency(tmp, n, True)}


def bench_writes(tmp: str, n: int) -> dict:
    """Sustained single-object updates through the API (no hooks), against raw SQLite commits."""
    import sqlite3

    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store

    api = APIServer(Store(os.path.join(tmp, "writes", "kctl.db")))
    obj = api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}, "data": {"i": "0"}})
    t = time.perf_counter()
    for i in range(n):
        obj["data"]["i"] = str(i)
        obj = api.update(obj)
    ours = n / (time.perf_counter() - t)
    conn = sqlite3.connect(os.path.join(tmp, "writes", "raw.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
    payload = json.dumps(obj)
    t = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT OR REPLACE INTO t VALUES ('w', ?)", (payload,))
        conn.execute("COMMIT")
    base = n / (time.perf_counter() - t)
    return {"ours": [ours], "base": [base]}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke test of the benchmarks)")
    args = parser.parse_args()
    runs = 3 if args.quick else 7
    with tempfile.TemporaryDirectory(prefix="kctl-bench-") as tmp:
        rows = []
        r = bench_apply(tmp, runs)
        m, b = statistics.median(r["ours"]), statistics.median(r["base"])
        loop = r["loop"][0]
        rows.append(("kctl apply -f (1,000 Deployments, one file)", f"{m * 1000:.0f} ms",
                     "per-object apply, one transaction each (in-process)", f"{b * 1000:.0f} ms",
                     f"{b / m:.1f}x faster", "< 1 s"))
        rows.append(("", "", "one `kctl apply` process per object (40 timed, x25)", f"{loop:.0f} s",
                     f"{loop / m:.0f}x faster", "kubectl: ~29 s"))
        r = bench_get(tmp, runs * 3)
        m, b = statistics.median(r["ours"]), statistics.median(r["base"])
        rows.append(("kctl get pods (1,000 stored)", f"{m * 1000:.0f} ms", "python -c pass",
                     f"{b * 1000:.0f} ms", f"{m / b:.1f}x of bare start-up", "< 150 ms"))
        r = bench_watch(tmp, 50 if args.quick else 200)
        m, b = statistics.median(r["ours"]), statistics.median(r["base"])
        rows.append(("watch latency, p50 (p99), other process", f"{m * 1000:.1f} ms ({pct(r['ours'], .99) * 1000:.1f})",
                     "watchfiles on the store folder", f"{b * 1000:.1f} ms ({pct(r['base'], .99) * 1000:.1f})",
                     f"{b / m:.1f}x faster", "p50 < 20 ms"))
        r = bench_writes(tmp, 1000 if args.quick else 3000)
        m, b = r["ours"][0], r["base"][0]
        rows.append(("sustained single-object updates", f"{m:.0f} /s", "raw SQLite commit, same settings",
                     f"{b:.0f} /s", f"{m / b:.2f}x of raw", ">= 1,000 /s"))
        if os.geteuid() == 0 and shutil.which("nft") and shutil.which("unshare"):
            from services import nft_sync  # benchmarks/services.py; the bed parts: run it by hand (root)

            r = nft_sync(runs)
            m, b = statistics.median(r["reload"]), statistics.median(r["render"])
            rows.append(("`nft -f` of kube-proxy rules, 1,000 Services x 10 endpoints (private netns)",
                         f"{m * 1000:.0f} ms", "rendering that script (kctl, Python)", f"{b * 1000:.0f} ms",
                         f"load {m / b:.1f}x of render", "< 1 s"))
    print("| what | kctl | baseline | baseline figure | ratio | target |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if shutil.which("etcd"):
        import store_backends  # benchmarks/store_backends.py: SQLite and etcd side by side

        counts = {"n": 160, "watch_n": 50, "get_runs": 3} if args.quick else {"n": 800, "watch_n": 300, "get_runs": 7}
        print("\nThe store on etcd (3 members, TLS) beside SQLite (benchmarks/store_backends.py):\n")
        print("\n".join(store_backends.run(members=3, rounds=1, **counts)))


if __name__ == "__main__":
    main()
