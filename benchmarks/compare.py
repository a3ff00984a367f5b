"""Old against new: kctl's start-up, `get` and `apply` figures for two source trees, in one run.

Run by hand when a change may have slowed the CLI (docs/benchmarks.md, "nothing slower"):
`.venv/bin/python benchmarks/compare.py --old /tmp/kctl-old` with /tmp/kctl-old a
`git worktree add /tmp/kctl-old <commit>` of the tree to compare with. Both trees run on
this venv's interpreter and libraries (PYTHONPATH points at each tree), each on stores of
its own, runs interleaved (old, new, old, new, ...) so load from other jobs falls on both
alike; prints a Markdown table of medians with the bare baselines (`python -c pass`,
`kubectl version --client`) measured in the same loop.
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import deployment, manifest  # noqa: E402  (the same objects as benchmarks/run.py)

_SEED = """
import sys
from kctl.apiserver.server import APIServer
from kctl.store.sqlite import Store
from run import pod
api = APIServer(Store(sys.argv[1]))
api.write_all([("create", pod(i)) for i in range(1000)])
"""


def tree_env(tree: str, store: str) -> dict[str, str]:
    """The environment of one tree's commands: its sources first, bytecode caching on, a store of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "KCTL_SERVER")}
    env["PYTHONPATH"] = os.pathsep.join([tree, str(Path(__file__).resolve().parent)])
    env["KCTL_STORE"] = store
    return env


def timed(cmd: list[str], *, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one command, which must succeed.

    It runs in / : `python -m` puts its working folder first on sys.path, ahead of PYTHONPATH.
    """
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else b""
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}: {err.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    """Measure both trees and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--old", required=True, help="the source tree to compare with (a git worktree)")
    parser.add_argument("--new", default=str(ROOT), help="the source tree under test (default: this one)")
    parser.add_argument("--runs", type=int, default=9, help="interleaved runs of each command (default 9)")
    args = parser.parse_args()
    kctl = [sys.executable, "-m", "kctl"]
    trees = {"old": args.old, "new": args.new}
    cases = ["apply -f (1,000 Deployments, fresh store)", "get pods (1,000 stored)", "version", "--help"]
    results: dict[str, dict[str, list[tuple[float, float]]]] = {t: {c: [] for c in cases} for t in trees}
    base: dict[str, list[tuple[float, float]]] = {"python -c pass": [], "kubectl version --client": []}
    with tempfile.TemporaryDirectory(prefix="kctl-compare-") as tmp:
        path = os.path.join(tmp, "1000.yaml")
        Path(path).write_text(manifest([deployment(i) for i in range(1000)]))
        for tag, tree in trees.items():
            os.makedirs(os.path.join(tmp, tag), mode=0o700)
            env = tree_env(tree, os.path.join(tmp, tag, "get.db"))
            subprocess.run([sys.executable, "-c", _SEED, env["KCTL_STORE"]], env=env, cwd="/", check=True)
            for argv in (["get", "pods"], ["version"], ["--help"]):  # warm bytecode and page cache
                timed([*kctl, *argv], env=env)
        for r in range(args.runs):
            for tag, tree in (trees.items() if r % 2 == 0 else reversed(list(trees.items()))):
                folder = os.path.join(tmp, tag, f"apply{r}")
                os.makedirs(folder, mode=0o700)
                res = results[tag]
                res[cases[0]].append(timed([*kctl, "apply", "-f", path], env=tree_env(tree, f"{folder}/kctl.db")))
                shutil.rmtree(folder)
                env = tree_env(tree, os.path.join(tmp, tag, "get.db"))
                res[cases[1]].append(timed([*kctl, "get", "pods"], env=env))
                res[cases[2]].append(timed([*kctl, "version"], env=env))
                res[cases[3]].append(timed([*kctl, "--help"], env=env))
            base["python -c pass"].append(timed([sys.executable, "-c", "pass"]))
            if shutil.which("kubectl"):
                base["kubectl version --client"].append(timed(["kubectl", "version", "--client"]))
    def med(values: list[tuple[float, float]], i: int) -> float:
        return statistics.median(v[i] for v in values) * 1000

    print(f"| command (median of {args.runs}) | old wall | new wall | new / old | old CPU | new CPU | new / old |")
    print("|---|---|---|---|---|---|---|")
    for case in cases:
        o, n = results["old"][case], results["new"][case]
        print(f"| `kctl {case}` | {med(o, 0):.0f} ms | {med(n, 0):.0f} ms | {med(n, 0) / med(o, 0):.2f} "
              f"| {med(o, 1):.0f} ms | {med(n, 1):.0f} ms | {med(n, 1) / med(o, 1):.2f} |")
    for name, values in base.items():
        if values:
            print(f"| `{name}` | {med(values, 0):.0f} ms | | | {med(values, 1):.0f} ms | | |")
    print()
    print("all runs, wall ms: " + json.dumps({t: {c: [round(v[0] * 1000) for v in vs] for c, vs in rs.items()}
                                             for t, rs in results.items()}))


if __name__ == "__main__":
    main()
