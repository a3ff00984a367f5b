"""The store on etcd beside the store on SQLite, in one run (issue 17).

Run with `.venv/bin/python benchmarks/store_backends.py [--rounds 3] [--members 3] [--quick]`
(needs /usr/bin/etcd; `make bench`, i.e. benchmarks/run.py, runs one round of it when etcd
is installed; `--members 0` measures SQLite alone, as tests/unit/test_benchmarks_store.py does).
It starts an etcd cluster of `--members` members with TLS and client certificates
(kctl.testing.etcdcluster.EtcdCluster, every member on 127.0.0.1), then, in every round,
measures each backend on a fresh store (SQLite: a new file in a temporary folder; etcd: a
new random key prefix on the same cluster), the backends interleaved:

- single-object writes per second through kctl's API server (APIServer.create of a new
  ConfigMap; APIServer.update of one ConfigMap), serial and from 8 threads sharing one
  APIServer (as the daemon's HTTP handlers do); and, labelled "raw store", the same
  creates as bare `Store.transaction()` puts with no API server (no admission, no read);
- watch latency: a writer in another process (its own store object on the same backend)
  patches a ConfigMap every 10 ms (APIServer.patch, merge), stamping the wall time into it
  just before the call; this process watches through APIServer.watch; p50 and p99 of stamp
  -> event, and beside them the p50 of the patch call itself (its share of that latency);
- `kctl get configmaps` with 1,000 stored (a new `python -m kctl` process per run,
  bytecode cached), beside `python -c pass`.

Prints a Markdown table of medians over the rounds (and, on stderr, each round's figures
and the load average); docs/benchmarks.md records a run and this command.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
KCTL = [sys.executable, "-m", "kctl"]
THREADS = 8

# -- backends: how to make a fresh store, and how another process opens the same one -----------


class Backend:
    """A place to make fresh stores: SQLite files in a folder, or prefixes on one etcd cluster."""

    name = ""

    def spec(self, tag: str) -> dict:
        """A JSON-able description another process opens with `open_spec` (the same store)."""
        raise NotImplementedError

    def env(self, spec: dict) -> dict[str, str]:
        """Environment for a `kctl` process using the store of `spec`."""
        raise NotImplementedError


class SQLiteBackend(Backend):
    """SQLite stores, one file per tag, in `folder`."""

    name = "SQLite"

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def spec(self, tag: str) -> dict:
        os.makedirs(os.path.join(self.folder, tag), mode=0o700, exist_ok=True)
        return {"backend": "sqlite", "path": os.path.join(self.folder, tag, "kctl.db")}

    def env(self, spec: dict) -> dict[str, str]:
        return {"KCTL_STORE": spec["path"]}


class EtcdBackend(Backend):
    """etcd stores, one random key prefix per tag, on one running cluster."""

    def __init__(self, cluster: Any, folder: str) -> None:
        self.cluster = cluster
        self.folder = folder
        self.name = f"etcd, {len(cluster.members)} member{'s' if len(cluster.members) > 1 else ''}"

    def spec(self, tag: str) -> dict:
        state = os.path.join(self.folder, f"etcd-state-{tag}")
        os.makedirs(state, mode=0o700, exist_ok=True)
        return {"backend": "etcd", "address": f"{self.cluster.address}/kctl-bench-{tag}-{secrets.token_hex(4)}",
                "tls": [str(self.cluster.ca_file), str(self.cluster.client_cert_file),
                        str(self.cluster.client_key_file)], "state": state}

    def env(self, spec: dict) -> dict[str, str]:
        ca, cert, key = spec["tls"]
        return {"KCTL_STORE": spec["address"], "KCTL_ETCD_CAFILE": ca, "KCTL_ETCD_CERTFILE": cert,
                "KCTL_ETCD_KEYFILE": key, "KCTL_ETCD_STATE_DIR": spec["state"]}


def open_spec(spec: dict) -> Any:
    """The kctl Store a spec names (this process's own store object), opened as kctl opens one."""
    from kctl.store.open import open_store

    if spec["backend"] == "sqlite":
        return open_store(spec["path"])
    from kctl.store.etcd.address import EtcdTLS

    return open_store(spec["address"], tls=EtcdTLS(*spec["tls"]), state_dir=spec["state"])


@contextmanager
def etcd_cluster(folder: str, members: int) -> Iterator[Any]:
    """A running TLS etcd cluster of `members` members on 127.0.0.1, stopped (data removed) on exit."""
    from kctl.testing.etcdcluster import EtcdCluster

    cluster = EtcdCluster(Path(folder), members=members)
    try:
        cluster.start(timeout=60)
        yield cluster
    finally:
        cluster.stop()


# -- the measurements ------------------------------------------------------------------------------


def configmap(name: str, i: int = 0) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default",
                                                                  "labels": {"app": "bench"}},
            "data": {"i": str(i), "payload": "x" * 200}}


def _api(store: Any) -> Any:
    from kctl.apiserver.server import APIServer

    return APIServer(store, user="bench", audit_log=False)


def _threaded(n: int, threads: int, work: Callable[[int, int], None]) -> float:
    """Run work(thread, i) for i in range(n // threads) on `threads` threads; writes per second."""
    per = n // threads
    errors: list[BaseException] = []

    def body(t: int) -> None:
        try:
            for i in range(per):
                work(t, i)
        except BaseException as exc:  # noqa: BLE001 - reported below, after the join
            errors.append(exc)

    workers = [threading.Thread(target=body, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return per * threads / elapsed


def writes(spec: dict, n: int) -> dict[str, float]:
    """Writes per second on one fresh store: API create/update (serial, 8 threads) and raw store puts."""
    store = open_spec(spec)
    api = _api(store)
    try:
        out: dict[str, float] = {}
        start = time.perf_counter()
        for i in range(n):
            api.create(configmap(f"serial-{i}", i))
        out["api create, serial"] = n / (time.perf_counter() - start)
        out[f"api create, {THREADS} threads"] = _threaded(
            n, THREADS, lambda t, i: api.create(configmap(f"t{t}-{i}", i)))
        obj = api.create(configmap("updated"))
        start = time.perf_counter()
        for i in range(n):
            obj["data"]["i"] = str(i)
            obj = api.update(obj)
        out["api update, serial"] = n / (time.perf_counter() - start)

        def raw(name: str, i: int) -> None:
            obj = configmap(name, i)
            obj["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp="2026-12-05T00:00:00Z")
            with store.transaction() as txn:
                txn.put("ConfigMap", "default", name, obj, event="ADDED")

        start = time.perf_counter()
        for i in range(n):
            raw(f"raw-{i}", i)
        out["raw store put, serial"] = n / (time.perf_counter() - start)
        out[f"raw store put, {THREADS} threads"] = _threaded(n, THREADS, lambda t, i: raw(f"raw-t{t}-{i}", i))
        return out
    finally:
        api.close()  # its caches' threads (a remote store), then the store


def _watch_writer(spec: dict, n: int, ready: Any, go: Any, durations: Any) -> None:
    """In another process: patch ConfigMap `tick` n times, 10 ms apart, stamping the time of each write.

    Puts the list of the patch calls' durations on `durations` when done.
    """
    store = open_spec(spec)
    api = _api(store)
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tick"}, "data": {}})
    ready.set()
    go.wait(60)
    rt = api.resource("configmaps")
    took = []
    for _ in range(n):
        time.sleep(0.01)
        stamp = time.time()
        api.patch(rt, "tick", {"data": {"t": repr(stamp)}}, patch_type="merge")
        took.append(time.time() - stamp)
    durations.put(took)
    api.close()


def watch_latency(spec: dict, n: int) -> tuple[list[float], list[float]]:
    """Seconds from just before a write in another process to its event at this process's APIServer.watch,
    and the seconds each of those writes (API patch calls) took in the writer."""
    api = _api(open_spec(spec))
    ctx = multiprocessing.get_context("spawn")
    ready, go, durations = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=_watch_writer, args=(spec, n, ready, go, durations))
    proc.start()
    try:
        if not ready.wait(120):
            raise SystemExit("the watch benchmark's writer did not start")
        rt = api.resource("configmaps")
        since = api.revision()
        stop = threading.Event()
        lat: list[float] = []
        go.set()
        for kind, obj in api.watch(rt, namespace="default", since=since, stop=stop, timeout=60 + n * 0.1):
            if kind == "MODIFIED" and obj["metadata"]["name"] == "tick":
                lat.append(time.time() - float(obj["data"]["t"]))
            if len(lat) >= n:
                break
        stop.set()
        if len(lat) < n:
            raise SystemExit(f"the watcher saw {len(lat)} of {n} writes")
        return lat, durations.get(timeout=60)
    finally:
        proc.join(60)
        if proc.is_alive():
            proc.kill()
        api.close()


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    out = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
    took = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[1:])} on {env.get('KCTL_STORE')}: exit {out.returncode}\n"
                         f"{out.stderr.decode(errors='replace')[-3000:]}")
    return took


def get_1000(backend: Backend, spec: dict, runs: int) -> dict[str, list[float]]:
    """`kctl get configmaps` with 1,000 ConfigMaps stored, runs times, beside `python -c pass`."""
    store = open_spec(spec)
    api = _api(store)
    try:
        chunk = store.max_writes_per_transaction or 100
        for start in range(0, 1000, chunk):
            batch = [("create", configmap(f"cm-{i:04d}", i)) for i in range(start, min(1000, start + chunk))]
            for result in api.write_all(batch):
                if result.error is not None:
                    raise SystemExit(f"populating the store: {result.error}")
    finally:
        api.close()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("KCTL_")}
    env.update(backend.env(spec))
    out = subprocess.run([*KCTL, "get", "configmaps", "--no-headers"], env=env, capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0 or len(out.stdout.splitlines()) != 1000:
        raise SystemExit(f"kctl get configmaps on {backend.name}: exit {out.returncode}, "
                         f"{len(out.stdout.splitlines())} lines: {out.stderr.strip()[-300:]}")
    ours = [_timed([*KCTL, "get", "configmaps"], env) for _ in range(runs)]
    base = [_timed([sys.executable, "-c", "pass"], env) for _ in range(runs)]
    return {"ours": ours, "base": base}


# -- the run ---------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(backends: list[Backend], *, rounds: int, n: int, watch_n: int, get_runs: int) -> dict:
    """Every measurement on every backend, interleaved, `rounds` times; the raw figures by backend."""
    figures: dict[str, dict[str, list]] = {b.name: {} for b in backends}
    for r in range(rounds):
        for b in backends:
            f = figures[b.name]
            for key, rate in writes(b.spec(f"w{r}"), n).items():
                f.setdefault(key, []).append(rate)
            lat, took = watch_latency(b.spec(f"watch{r}"), watch_n)
            f.setdefault("watch p50", []).append(statistics.median(lat))
            f.setdefault("watch p99", []).append(pct(lat, 0.99))
            f.setdefault("patch p50", []).append(statistics.median(took))
            got = get_1000(b, b.spec(f"get{r}"), get_runs)
            f.setdefault("get", []).append(statistics.median(got["ours"]))
            f.setdefault("python -c pass", []).append(statistics.median(got["base"]))
            print(f"round {r + 1}, {b.name}: " + ", ".join(f"{k} {v[-1]:.4g}" for k, v in f.items())
                  + f" (load {load()})", file=sys.stderr)
    return figures


def table(figures: dict, *, rounds: int) -> list[str]:
    """The Markdown table: one row per measurement, one column per backend, then each backend / the first."""
    names = list(figures)
    med = {name: {k: statistics.median(v) for k, v in f.items()} for name, f in figures.items()}
    first, others = names[0], names[1:]

    def row(what: str, cells: list[str], ratios: list[str]) -> str:
        return "| " + " | ".join([what, *cells, *ratios]) + " |"

    def ratio(key: str, fmt: str = "{:.2f}") -> list[str]:
        return [fmt.format(med[n][key] / med[first][key]) for n in others]

    lines = [row(f"measurement (median of {rounds} round{'s' if rounds > 1 else ''})", names,
                 [f"{n} / {first}" for n in others]),
             "|" + "---|" * (1 + len(names) + len(others))]
    for k in [k for k in med[first] if k not in ("watch p50", "watch p99", "patch p50", "get", "python -c pass")]:
        lines.append(row(f"{k} (writes/s)", [f"{med[n][k]:,.0f}" for n in names], ratio(k)))
    lines.append(row("watch latency, write in another process -> APIServer.watch, p50 (p99)",
                     [f"{med[n]['watch p50'] * 1000:.1f} ms ({med[n]['watch p99'] * 1000:.1f})" for n in names],
                     ratio("watch p50", "{:.1f}")))
    lines.append(row("... of which the write itself (the writer's API patch call, p50)",
                     [f"{med[n]['patch p50'] * 1000:.1f} ms" for n in names], ratio("patch p50", "{:.1f}")))
    lines.append(row("`kctl get configmaps`, 1,000 stored (whole command)",
                     [f"{med[n]['get'] * 1000:.0f} ms" for n in names], ratio("get")))
    lines.append(row("baseline `python -c pass`", [f"{med[n]['python -c pass'] * 1000:.0f} ms" for n in names],
                     ["" for _ in others]))
    return lines


def run(*, members: int, rounds: int, n: int, watch_n: int, get_runs: int, folder: str | None = None) -> list[str]:
    """Start the cluster, measure SQLite and etcd side by side, return the table's lines."""
    with tempfile.TemporaryDirectory(prefix="kctl-bench-stores-", dir=folder) as tmp:
        sqlite = SQLiteBackend(os.path.join(tmp, "sqlite"))
        if not members:  # SQLite alone (the smoke test of the harness)
            return table(measure([sqlite], rounds=rounds, n=n, watch_n=watch_n, get_runs=get_runs), rounds=rounds)
        with etcd_cluster(os.path.join(tmp, "etcd"), members) as cluster:
            backends = [sqlite, EtcdBackend(cluster, tmp)]
            figures = measure(backends, rounds=rounds, n=n, watch_n=watch_n, get_runs=get_runs)
    return table(figures, rounds=rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each backend measured once per round)")
    parser.add_argument("--members", type=int, default=3, help="etcd cluster members (default 3; 0: SQLite alone)")
    parser.add_argument("--writes", type=int, default=800, help="writes per write measurement (default 800)")
    parser.add_argument("--watch", type=int, default=300, help="watched writes per round (default 300)")
    parser.add_argument("--get-runs", type=int, default=7, help="`kctl get` runs per round (default 7)")
    parser.add_argument("--quick", action="store_true", help="1 round, few writes (a smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.writes, args.watch, args.get_runs = 1, 160, 50, 3
    print(f"load average before: {load()}", file=sys.stderr)
    lines = run(members=args.members, rounds=args.rounds, n=args.writes, watch_n=args.watch,
                get_runs=args.get_runs)
    print(f"load average after: {load()}", file=sys.stderr)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
