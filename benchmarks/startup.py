"""Start-up: `kctl version` and `kctl get` of 1,000 objects against their baselines, and where the time goes.

Run by hand: `.venv/bin/python benchmarks/startup.py [--runs N] [--old TREE]` (docs/benchmarks.md,
"Start-up (issue 13)"). Each command is a new process (`python -m kctl`, bytecode caching on),
run in rounds that interleave every command and the baselines, so load from other jobs falls on
all alike: `kubectl version --client` (Go) and `python -c pass` (the interpreter alone). With
`--old TREE` (a `git archive` or worktree of an earlier commit) the same commands run from that
tree too, in the same rounds (PYTHONPATH points at each tree, both on this venv).

Prints a Markdown table of medians (wall and CPU = user + system of the process), the targets of
issue 13 (`kctl version` <= 2x kubectl's, `kctl get` of 1,000 <= 100 ms), and the in-process
phases of each kctl command (CPU ms, medians): importing Click and Typer, importing the command's
modules and the API, building the Click command, and running it (store, list or admission, print).
`apply one Pod` is the CLI's part of apply -> serving (benchmarks/apply_serving.py): start-up,
reading the manifest and admitting a new Pod, with --dry-run=server so that no run writes.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import timed, tree_env  # noqa: E402  (the same process timing as benchmarks/compare.py)

ROOT = Path(__file__).resolve().parents[1]

_SEED = """
import sys
from kctl.apiserver.server import APIServer
from kctl.store.sqlite import Store
api = APIServer(Store(sys.argv[1]))
kind = sys.argv[2]
def obj(i):
    if kind == "pods":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i:04d}", "labels": {"app": "bench"}},
                "spec": {"containers": [{"name": "c", "image": "localhost/busybox:1"}]}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i:04d}", "labels": {"app": "bench"}},
            "data": {"key": "value " * 10, "index": str(i)}}
api.write_all([("create", obj(i)) for i in range(1000)])
"""

#: the phases of one command line, measured inside one process (CPU time); argv[1:] is the line
_PHASES = """
import contextlib, io, os, sys, time
T = time.process_time
args = sys.argv[1:]
from kctl.cli.argv import normalise, plain_version, verb_of
fast = plain_version(args) is not None  # `kctl version` imports neither Click nor Typer
t0 = T()
if not fast:
    import click, typer
t1 = T()
from kctl.cli import connect
if fast:
    from kctl.cli.version import print_version
    import kctl.apiserver.server
else:
    import importlib
    from kctl.cli.root import COMMANDS
    importlib.import_module(COMMANDS[verb_of(args)])
    import kctl.apiserver.server, kctl.output.printers
t2 = T()
root = None if fast else __import__("kctl.cli.root", fromlist=["command"]).command(verb=verb_of(args))
t3 = T()
with contextlib.redirect_stdout(io.StringIO()):
    if fast:
        print_version(connect.connect(connect.CLIContext(store_path=os.environ.get("KCTL_STORE"))))
    else:
        try:
            root.main(args=normalise(root, args), prog_name="kctl", standalone_mode=False)
        except SystemExit:
            pass
t4 = T()
print(f"{(t1 - t0) * 1e3:.2f} {(t2 - t1) * 1e3:.2f} {(t3 - t2) * 1e3:.2f} {(t4 - t3) * 1e3:.2f}")
"""
PHASE_NAMES = ("import click + typer", "import the command and the API", "build the Click command",
               "run (store, list, print)")

#: one new Pod, admitted in full but not written (--dry-run=server), so every run does the same work
POD_YAML = ("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: httpd\n"
            "    image: localhost/busybox:demo\n    ports: [{containerPort: 8080, hostPort: 18480}]\n")

CASES = {"version": ["version"], "get configmaps (1,000 stored)": ["get", "configmaps"],
         "get pods (1,000 stored)": ["get", "pods"],
         "get pods -o wide (1,000 stored)": ["get", "pods", "-o", "wide"],
         "get pods -o json (1,000 stored)": ["get", "pods", "-o", "json"],
         "apply one Pod (--dry-run=server)": ["apply", "-f", "{pod}", "--dry-run=server"]}


def main() -> None:
    """Measure, interleaved, and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds (default 15)")
    parser.add_argument("--old", help="an earlier source tree to measure in the same rounds")
    args = parser.parse_args()
    trees = {"new": str(ROOT), **({"old": args.old} if args.old else {})}
    kctl = [sys.executable, "-m", "kctl"]
    results: dict[tuple[str, str], list[tuple[float, float]]] = {(t, c): [] for t in trees for c in CASES}
    base: dict[str, list[tuple[float, float]]] = {"python -c pass": [], "kubectl version --client": []}
    phases: dict[str, list[list[float]]] = {c: [] for c in CASES}
    with tempfile.TemporaryDirectory(prefix="kctl-startup-") as tmp:
        Path(tmp, "pod.yaml").write_text(POD_YAML)
        for argv in CASES.values():
            argv[:] = [a.format(pod=os.path.join(tmp, "pod.yaml")) for a in argv]
        stores = {}
        for tag, tree in trees.items():
            for kind in ("configmaps", "pods"):
                folder = os.path.join(tmp, tag, kind)
                os.makedirs(folder, mode=0o700)
                stores[tag, kind] = os.path.join(folder, "kctl.db")
                env = tree_env(tree, stores[tag, kind])
                subprocess.run([sys.executable, "-c", _SEED, env["KCTL_STORE"], kind], env=env, cwd="/", check=True)

        def env_for(tag: str, case: str) -> dict[str, str]:
            return tree_env(trees[tag], stores[tag, "pods" if "pods" in case else "configmaps"])

        for tag in trees:  # warm bytecode and the page cache
            for case, argv in CASES.items():
                timed([*kctl, *argv], env=env_for(tag, case))
        for r in range(args.runs):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for tag in order:
                for case, argv in CASES.items():
                    results[tag, case].append(timed([*kctl, *argv], env=env_for(tag, case)))
            base["python -c pass"].append(timed([sys.executable, "-c", "pass"]))
            if shutil.which("kubectl"):
                base["kubectl version --client"].append(timed(["kubectl", "version", "--client"]))
            for case, argv in CASES.items():
                out = subprocess.run([sys.executable, "-c", _PHASES, *argv], env=env_for("new", case), cwd="/",
                                     capture_output=True, text=True, check=True)
                phases[case].append([float(x) for x in out.stdout.split()])

    def med(values: list[tuple[float, float]], i: int) -> float:
        return statistics.median(v[i] for v in values) * 1000

    print(f"| command (median of {args.runs}) | " + " | ".join(f"{t} wall | {t} CPU" for t in trees) + " |")
    print("|---|" + "---|---|" * len(trees))
    for case in CASES:
        cells = " | ".join(f"{med(results[t, case], 0):.0f} ms | {med(results[t, case], 1):.0f} ms" for t in trees)
        print(f"| `kctl {case}` | {cells} |")
    for name, values in base.items():
        if values:
            blank = " | |" * (len(trees) - 1)
            print(f"| baseline `{name}` | {med(values, 0):.0f} ms | {med(values, 1):.0f} ms |{blank}")
    if base["kubectl version --client"]:
        kubectl = med(base["kubectl version --client"], 0), med(base["kubectl version --client"], 1)
        version = med(results["new", "version"], 0), med(results["new", "version"], 1)
        print(f"\n`kctl version` / `kubectl version --client`: {version[0] / kubectl[0]:.2f}x wall, "
              f"{version[1] / kubectl[1]:.2f}x CPU (target <= 2x)")
    for case in ("get configmaps (1,000 stored)", "get pods (1,000 stored)"):
        print(f"`kctl {case.split(' (')[0]}` of 1,000: {med(results['new', case], 0):.0f} ms wall, "
              f"{med(results['new', case], 1):.0f} ms CPU (target <= 100 ms)")
    print("\nIn-process phases of the new tree, CPU ms (median):\n")
    print("| command | " + " | ".join(PHASE_NAMES) + " |")
    print("|---|" + "---|" * len(PHASE_NAMES))
    for case, rows in phases.items():
        print(f"| `kctl {case}` | "
              + " | ".join(f"{statistics.median(r[i] for r in rows):.1f}" for i in range(len(PHASE_NAMES))) + " |")
    print("\nall runs, wall ms: " + json.dumps({f"{t} {c}": [round(v[0] * 1000) for v in vs]
                                               for (t, c), vs in results.items()}))


if __name__ == "__main__":
    main()
