"""Several processes writing one store at once: no lost update, no lock error, a sound file."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

from kctl.apiserver.server import APIServer
from kctl.store.sqlite import Store

WORKERS = 4
ROUNDS = 40


def _worker(path: str, worker: int) -> None:
    api = APIServer(Store(path), user=f"w{worker}")
    rt = api.resource("configmaps")
    for i in range(ROUNDS):
        # a patch per round to one shared object: each must survive (retry on Conflict)
        api.patch(rt, "shared", {"data": {f"w{worker}-{i}": str(i)}}, patch_type="merge")
        # and an apply of a shared Deployment that every worker changes a bit
        api.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web",
                   "annotations": {f"w{worker}": str(i)}},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}})


def test_processes_patching_the_same_object_lose_nothing(tmp_path):
    """4 processes x 40 patches to one ConfigMap: all 160 keys land; integrity_check is ok."""
    path = str(tmp_path / "kctl.db")
    api = APIServer(Store(path))
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {}})
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(path, w)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    data = api.get(api.resource("cm"), "shared")["data"]
    assert len(data) == WORKERS * ROUNDS
    assert api.store.integrity_check() == "ok"
    revs = [c.revision for c in api.store.changes(0, limit=100_000)]
    assert revs == sorted(set(revs)) and revs == list(range(1, len(revs) + 1))


def test_cli_processes_at_once(tmp_path):
    """Concurrent `kctl patch` commands each exit 0 and all their changes are kept."""
    path = tmp_path / "kctl.db"
    env = {**os.environ, "KCTL_STORE": str(path)}
    kctl = [sys.executable, "-m", "kctl"]
    subprocess.run([*kctl, "create", "-f", "-"], input=b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
                   env=env, check=True, capture_output=True)
    procs = [subprocess.Popen([*kctl, "patch", "configmap", "c", "--type", "merge", "-p",
                               f'{{"data": {{"k{i}": "v"}}}}'], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for i in range(8)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, outs
    got = subprocess.run([*kctl, "get", "cm", "c", "-o", "jsonpath={.data}"], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert all(f'"k{i}"' in got for i in range(8)), got
