"""`kctl get -w` in its own process sees writes from another, and `--store` selects the store."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time

import pytest

from kctl.api.apiserver import APIServer
from kctl.api.store import Store


@pytest.fixture
def spawn():
    """Start processes that are killed at the end of the test, pass or fail."""
    procs: list[subprocess.Popen] = []

    def start(args, env):
        p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait(10)


def lines_of(proc) -> queue.Queue:
    """Lines the process prints, gathered by a reader thread (no blocking on a buffered pipe)."""
    q: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [q.put(line) for line in proc.stdout], daemon=True).start()
    return q


def read_line(lines: queue.Queue, timeout: float = 10.0) -> str:
    return lines.get(timeout=timeout)


def test_get_watch_prints_changes_from_another_process(tmp_path, spawn):
    """A ConfigMap created by another process appears on the watching `kctl get -w`."""
    path = tmp_path / "kctl.db"
    api = APIServer(Store(path))
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "first"}})
    env = {**os.environ, "KCTL_STORE": str(path)}
    proc = lines_of(spawn([sys.executable, "-m", "kctl", "get", "configmaps", "-w"], env))
    assert read_line(proc).split()[:2] == ["NAME", "DATA"]
    assert read_line(proc).split()[0] == "first"
    time.sleep(0.2)
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "second"}, "data": {"a": "1"}})
    assert read_line(proc).split()[:2] == ["second", "1"]


def test_store_option_and_env(tmp_path, kctl):
    """--store on the command line wins over KCTL_STORE."""
    other = tmp_path / "other.db"
    result = kctl("--store", str(other), "create", "-f", "-",
                  input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert result.code == 0, result.err
    assert kctl("--store", str(other), "get", "cm", "-o", "name").out == "configmap/x\n"
    assert kctl("get", "cm", "-o", "name").out == ""
