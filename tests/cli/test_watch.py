"""`kctl get -w` in its own process: writes from another process, gaps after compaction or restore
(never silent), --watch-only, --output-watch-events and resuming with --resource-version."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from kctl.apiserver.server import APIServer
from kctl.store.sqlite import Store


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
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)  # a stopped process cannot die of SIGKILL until continued
            p.kill()
        p.wait(10)
        p.stdout.close()
        p.stderr.close()


def lines_of(proc) -> queue.Queue:
    """Lines the process prints, gathered by a reader thread (no blocking on a buffered pipe)."""
    q: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [q.put(line) for line in proc.stdout], daemon=True).start()
    return q


def read_line(lines: queue.Queue, timeout: float = 20.0) -> str:
    return lines.get(timeout=timeout)


def read_lines(lines: queue.Queue, n: int, timeout: float = 20.0) -> list[str]:
    return [read_line(lines, timeout) for _ in range(n)]


def cm(name: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


@pytest.fixture
def store(tmp_path):
    """A store with ConfigMaps a, b and c, and the environment that points kctl at it."""
    path = tmp_path / "kctl.db"
    api = APIServer(Store(path))
    for name in ("a", "b", "c"):
        api.create(cm(name))
    yield api, {**os.environ, "KCTL_STORE": str(path)}
    api.store.close()


def kctl_args(*args: str) -> list[str]:
    return [sys.executable, "-m", "kctl", *args]


def test_get_watch_prints_changes_from_another_process(store, spawn):
    """A ConfigMap created by another process appears on the watching `kctl get -w`."""
    api, env = store
    proc = lines_of(spawn(kctl_args("get", "configmaps", "-w"), env))
    assert read_line(proc).split()[:2] == ["NAME", "DATA"]
    assert [line.split()[0] for line in read_lines(proc, 3)] == ["a", "b", "c"]
    api.create(cm("second", a="1"))
    assert read_line(proc).split()[:2] == ["second", "1"]


def _gap(api: APIServer, proc: subprocess.Popen) -> None:
    """Freeze the watcher, write and delete behind its back, compact the log past it, let it go on."""
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        rt = api.resource("configmaps")
        api.create(cm("d"))
        api.delete(rt, "b", namespace="default")
        api.patch(rt, "c", {"data": {"x": "1"}}, patch_type="merge", namespace="default")
        api.create(cm("e"))
        api.delete(rt, "e", namespace="default")  # born and gone inside the gap: never shown
        api.store.compact(keep=0)
        assert api.store.compacted() == api.store.revision()
    finally:
        os.kill(proc.pid, signal.SIGCONT)


@pytest.mark.parametrize(("args", "initial", "after_gap"), [
    (("-o", "name"), ["configmap/a", "configmap/b", "configmap/c"],
     {"configmap/b", "configmap/c", "configmap/d"}),
    (("-o", "name", "--output-watch-events"), ["ADDED configmap/a", "ADDED configmap/b", "ADDED configmap/c"],
     {"DELETED configmap/b", "MODIFIED configmap/c", "ADDED configmap/d"}),
], ids=["name", "name-with-events"])
def test_compaction_gap_shows_deletes(store, spawn, args, initial, after_gap):
    """After the change log is compacted past a watcher, it re-lists and prints what changed, deletes included."""
    api, env = store
    p = spawn(kctl_args("get", "cm", "-w", *args), env)
    proc = lines_of(p)
    assert [line.strip() for line in read_lines(proc, 3)] == initial
    _gap(api, p)
    assert {line.strip() for line in read_lines(proc, 3)} == after_gap
    api.create(cm("f"))  # and the watch goes on from the new list
    assert read_line(proc).strip().endswith("configmap/f")
    with pytest.raises(queue.Empty):
        read_line(proc, timeout=0.5)


def test_compaction_gap_in_a_table(store, spawn):
    """The table watch prints the deleted object's row after a gap (EVENT column with --output-watch-events)."""
    api, env = store
    p = spawn(kctl_args("get", "cm", "-w", "--output-watch-events"), env)
    proc = lines_of(p)
    assert read_line(proc).split() == ["EVENT", "NAME", "DATA", "AGE"]
    assert [line.split()[:2] for line in read_lines(proc, 3)] == [["ADDED", "a"], ["ADDED", "b"], ["ADDED", "c"]]
    _gap(api, p)
    rows = [line.split()[:3] for line in read_lines(proc, 3)]
    assert rows[0] == ["DELETED", "b", "0"]
    assert sorted(rows[1:]) == [["ADDED", "d", "0"], ["MODIFIED", "c", "1"]]


def test_restore_relists_and_shows_the_difference(store, spawn, tmp_path):
    """`kctl restore` under a watcher: it re-lists and prints objects the backup lacks as DELETED."""
    api, env = store
    backup = tmp_path / "backup.db"
    assert subprocess.run(kctl_args("backup", str(backup)), env=env, capture_output=True, timeout=60).returncode == 0
    api.create(cm("late"))
    api.delete(api.resource("configmaps"), "a", namespace="default")
    p = spawn(kctl_args("get", "cm", "-w", "-o", "name", "--output-watch-events"), env)
    proc = lines_of(p)
    assert [line.strip() for line in read_lines(proc, 3)] == [
        "ADDED configmap/b", "ADDED configmap/c", "ADDED configmap/late"]
    result = subprocess.run(kctl_args("restore", str(backup)), env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert {line.strip() for line in read_lines(proc, 2)} == {"DELETED configmap/late", "ADDED configmap/a"}


def test_watch_only_json_events(store, spawn):
    """--watch-only skips the list; --output-watch-events -o json prints kubectl's {"type", "object"} events."""
    api, env = store
    p = spawn(kctl_args("get", "cm", "--watch-only", "--output-watch-events", "-o", "json"), env)
    time.sleep(1.0)  # no list is printed, so nothing tells us the watch started; a late start still sees it
    api.create(cm("new", k="v"))
    text = ""
    deadline = time.monotonic() + 20
    lines = lines_of(p)
    while time.monotonic() < deadline:
        text += read_line(lines)
        if text.startswith("{") and text.rstrip().endswith("}") and text.count("{") == text.count("}"):
            break
    event = json.loads(text)
    assert list(event) == ["type", "object"]
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "new"
    assert list(event["object"]) == sorted(event["object"])


def test_resource_version_resumes_exactly(store, spawn):
    """-w --resource-version RV prints exactly the changes after RV, then goes on watching."""
    api, env = store
    rv = api.store.revision()
    rt = api.resource("configmaps")
    api.create(cm("d"))
    api.delete(rt, "a", namespace="default")
    proc = lines_of(spawn(kctl_args("get", "cm", "-w", "--resource-version", str(rv), "-o", "name",
                                    "--output-watch-events"), env))
    assert [line.strip() for line in read_lines(proc, 2)] == ["ADDED configmap/d", "DELETED configmap/a"]
    api.create(cm("z"))
    assert read_line(proc).strip() == "ADDED configmap/z"


def test_resource_version_compacted_is_an_error(store):
    """A --resource-version behind the compacted horizon is one clear error line and exit 8 (Gone)."""
    api, env = store
    rv = api.store.revision()
    api.create(cm("d"))
    api.store.compact(keep=0)
    result = subprocess.run(kctl_args("get", "cm", "-w", "--resource-version", str(rv)), env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 8
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and f"resourceVersion {rv} is too old" in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("--resource-version", "3"), "--resource-version is only supported with --watch"),
    (("--output-watch-events",), "--output-watch-events is only supported with --watch"),
    (("-w", "--resource-version", "x"), 'invalid --resource-version "x"'),
], ids=["rv-without-watch", "events-without-watch", "rv-not-a-number"])
def test_watch_flag_errors(kctl, args, message):
    """Watch flags used wrongly give one error line and a non-zero exit."""
    result = kctl("get", "cm", *args)
    assert result.code != 0
    assert result.err.startswith("error: ") and message in result.err and result.err.count("\n") == 1


def test_store_option_and_env(tmp_path, kctl):
    """--store on the command line wins over KCTL_STORE."""
    other = tmp_path / "other.db"
    result = kctl("--store", str(other), "create", "-f", "-",
                  input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert result.code == 0, result.err
    assert kctl("--store", str(other), "get", "cm", "-o", "name").out == "configmap/x\n"
    assert kctl("get", "cm", "-o", "name").out == ""
