"""Git sync (issue 6): a repository of 500 manifests, synced, re-synced with no change, and applied.

Run with `.venv/bin/python benchmarks/sync.py [--runs 5] [--objects 500]`. It makes a bare
git repository (kctl.testing.gitrepo) holding one manifest per file, ConfigMaps and
Deployments half and half, and in the same run measures, median of the runs:

- first sync on a fresh store and an empty git cache (clone, render, one atomic apply of
  every object, status): `kctl sync URL --once` as a user runs it (a new process), and
  `reconcile()` in-process, as the daemon runs it;
- no-change re-sync (the fast path: `git ls-remote`, one list per kind): the same two;
- `kctl apply -f` of the same folder: on a fresh store, and again with nothing to change;
- the git work a re-sync needs, for the target: `git fetch` in a clone that is up to
  date, and `git ls-remote` of the branch; and kctl's process start (`kctl version`).

Target (issue 6): a no-change re-sync costs at most 1.2 x the `git fetch` + 100 ms.
Prints a Markdown table; docs/benchmarks.md records a run and this command.
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
KCTL = [sys.executable, "-m", "kctl"]


def build_repo(folder: Path, objects: int):
    """A bare repository with `objects` manifests (one per file) on main, and the clone that made it."""
    from kctl.testing.gitrepo import GitRepo, configmap, deployment

    repo = GitRepo.create(folder)
    for i in range(objects):
        if i % 2:
            repo.write(f"apps/web-{i:04d}.yaml", deployment(f"web-{i:04d}", replicas=2,
                                                            command=["httpd", "-f", "-p", "8080"]))
        else:
            repo.write(f"config/cfg-{i:04d}.yaml", configmap(f"cfg-{i:04d}", mode="prod", index=str(i)))
    repo.commit(f"{objects} manifests")
    return repo


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(argv: list[str], env: dict) -> None:
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)


def bench(tmp: Path, runs: int, objects: int) -> dict[str, list[float]]:
    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store
    from kctl.sync.controller import cache_dir_for
    from kctl.sync.reconcile import reconcile
    from kctl.testing.gitrepo import git

    repo = build_repo(tmp / "repo", objects)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    clone = tmp / "clone"
    git("clone", "-q", "--depth", "1", f"file://{repo.remote}", str(clone))
    times: dict[str, list[float]] = {k: [] for k in (
        "first", "first_cli", "resync", "resync_cli", "apply", "reapply", "fetch", "ls_remote", "start")}
    for r in range(runs):
        store = Store(tmp / f"run{r}" / "kctl.db")
        api = APIServer(store)
        api.create({"apiVersion": "kctl.io/v1alpha1", "kind": "GitSource",
                    "metadata": {"name": "bench", "namespace": "default"},
                    "spec": {"url": repo.url, "suspend": True}})
        cache = cache_dir_for(api)
        result = None

        def first() -> None:
            nonlocal result
            result = reconcile(api, "default/bench", cache_dir=cache)

        times["first"].append(timed(first))
        assert result.ready and len(result.results) == objects, result.error_line()
        times["resync"].append(timed(lambda: reconcile(api, "default/bench", cache_dir=cache)))
        assert reconcile(api, "default/bench", cache_dir=cache).fast_path
        store_env = {**env, "KCTL_STORE": str(tmp / f"run{r}" / "kctl.db")}
        times["resync_cli"].append(timed(lambda: run([*KCTL, "sync", repo.url, "--name", "bench", "--once"],
                                                     store_env)))
        store.close()
        (tmp / f"cli{r}").mkdir(mode=0o700, exist_ok=True)  # a named store's folder must exist
        cli_env = {**env, "KCTL_STORE": str(tmp / f"cli{r}" / "kctl.db")}
        times["first_cli"].append(timed(lambda: run([*KCTL, "sync", repo.url, "--name", "bench", "--once"],
                                                    cli_env)))
        times["start"].append(timed(lambda: run([*KCTL, "version"], env)))
        (tmp / f"apply{r}").mkdir(mode=0o700, exist_ok=True)
        apply_env = {**env, "KCTL_STORE": str(tmp / f"apply{r}" / "kctl.db")}
        apply = [*KCTL, "apply", "-R", "-f", str(repo.work / "apps"), "-f", str(repo.work / "config")]
        times["apply"].append(timed(lambda: run(apply, apply_env)))
        times["reapply"].append(timed(lambda: run(apply, apply_env)))
        times["fetch"].append(timed(lambda: git("fetch", "-q", "--depth", "1", "origin", "main", cwd=clone)))
        times["ls_remote"].append(timed(lambda: git("ls-remote", f"file://{repo.remote}", "HEAD")))
        for folder in (f"run{r}", f"cli{r}", f"apply{r}"):
            shutil.rmtree(tmp / folder, ignore_errors=True)
        print(f"run {r + 1}: " + ", ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in times.items()),
              file=sys.stderr)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--objects", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kctl-bench-sync-") as tmp:
        times = bench(Path(tmp), args.runs, args.objects)
    ms = {k: statistics.median(v) * 1000 for k, v in times.items()}
    target = 1.2 * ms["fetch"] + 100

    verdict = "met" if ms["resync"] <= target else "missed"
    verdict_cli = "met" if ms["resync_cli"] <= target else "missed"
    print(f"| case ({args.objects} manifests, median of {args.runs}) | kctl sync | `kctl apply -f` of the folder "
          f"| ratio |")
    print("|---|---|---|---|")
    print(f"| first sync, fresh store, empty git cache: `kctl sync URL --once` | {ms['first_cli']:,.0f} ms "
          f"| {ms['apply']:,.0f} ms | {ms['first_cli'] / ms['apply']:.2f} x |")
    print(f"| no-change re-sync: `kctl sync URL --once` | {ms['resync_cli']:,.0f} ms | {ms['reapply']:,.0f} ms "
          f"| {ms['resync_cli'] / ms['reapply']:.2f} x |")
    print(f"| first sync in-process: `reconcile()` (what the daemon runs) | {ms['first']:,.0f} ms | | |")
    print(f"| no-change re-sync in-process: `reconcile()` | {ms['resync']:,.0f} ms | | |")
    print()
    print("| baseline, same run | time |")
    print("|---|---|")
    print(f"| `git fetch` of the branch, clone up to date | {ms['fetch']:,.0f} ms |")
    print(f"| `git ls-remote` of HEAD (what the fast path runs) | {ms['ls_remote']:,.0f} ms |")
    print(f"| kctl process start (`kctl version`) | {ms['start']:,.0f} ms |")
    print()
    print(f"Target 1.2 x git fetch + 100 ms = {target:,.0f} ms: `reconcile()` {verdict} "
          f"({ms['resync'] / target:.2f} x the target); `kctl sync --once` {verdict_cli} "
          f"({ms['resync_cli'] / target:.2f} x the target; {ms['resync_cli'] - ms['start']:,.0f} ms after "
          f"kctl's process start).")


if __name__ == "__main__":
    main()
