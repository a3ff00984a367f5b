"""`kctl apply -f DIR --watch` in its own process: rounds on file changes, atomic, with --prune."""

from __future__ import annotations

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


def configmap(name: str, value: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: '{value}'\n"


class Watcher:
    """A running `kctl apply --watch`, its output (stdout and stderr) read line by line."""

    def __init__(self, args: list[str], store) -> None:
        env = {**os.environ, "KCTL_STORE": str(store), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "kctl", "apply", *args, "--watch",
                                      "--debounce", "100ms"], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=lambda: [self.lines.put(line.rstrip("\n")) for line in self.proc.stdout],
                         daemon=True).start()

    def until(self, predicate, timeout: float = 20.0) -> list[str]:
        """Lines up to and including the first one `predicate` accepts."""
        deadline = time.monotonic() + timeout
        taken = []
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no such line within {timeout} s; output so far: {self.seen}") from None
            self.seen.append(line)
            taken.append(line)
            if predicate(line):
                return taken

    def round(self, number: int) -> list[str]:
        """The lines of round `number` (its header first), once the next header or nothing follows."""
        lines = self.until(lambda line: line.startswith(f"--- round {number}"))
        return [lines[-1]] + self._rest_of_round()

    def _rest_of_round(self) -> list[str]:
        rest = []
        while True:
            try:
                line = self.lines.get(timeout=1.5)
            except queue.Empty:
                return rest
            self.seen.append(line)
            rest.append(line)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                return self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        return self.proc.returncode


@pytest.fixture
def watch(tmp_path):
    """Start `kctl apply ... --watch` processes; each is stopped (killed if need be) at the end."""
    started: list[Watcher] = []

    def start(*args: str) -> Watcher:
        watcher = Watcher(list(args), tmp_path / "state" / "kctl.db")
        started.append(watcher)
        watcher.until(lambda line: line.startswith("watching "))
        return watcher

    yield start
    for watcher in started:
        watcher.stop()
        if watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.proc.wait(15)


@pytest.fixture
def api(tmp_path):
    store = Store(tmp_path / "state" / "kctl.db")
    yield APIServer(store)
    store.close()


def value_of(api: APIServer, name: str):
    from kctl.machinery.errors import NotFound

    try:
        return api.get(api.resource("configmaps"), name, namespace="default")["data"]["value"]
    except NotFound:
        return None


def test_watch_reapplies_changes_and_keeps_watching_after_errors(tmp_path, watch, api):
    """A changed file is re-applied; a bad file prints its error and writes nothing of that round;
    fixing it resumes; Ctrl-C exits 0."""
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "a.yaml").write_text(configmap("a", "1"))
    watcher = watch("-f", str(folder))
    assert watcher.seen[:2] == ["--- round 1 ---", "configmap/a created"]
    assert value_of(api, "a") == "1"

    (folder / "a.yaml").write_text(configmap("a", "2"))
    assert watcher.round(2) == ["--- round 2 (1 file changed) ---", "configmap/a configured"]
    assert value_of(api, "a") == "2"

    (folder / "bad.yaml").write_text("apiVersion: v1\nkind: [\n")
    (folder / "a.yaml").write_text(configmap("a", "3"))
    lines = watcher.round(3)
    assert lines[0].startswith("--- round 3 (") and len(lines) == 2
    assert lines[1].startswith("error: ") and "bad.yaml" in lines[1] and "line" in lines[1]
    assert value_of(api, "a") == "2"  # nothing of the failed round was written

    (folder / "bad.yaml").unlink()
    watcher.until(lambda line: line == "configmap/a configured")
    assert value_of(api, "a") == "3"
    assert watcher.stop() == 0


def test_watch_round_refused_by_the_api_is_atomic(tmp_path, watch, api):
    """An object the API refuses fails the whole round: the other file's change is not written."""
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "a.yaml").write_text(configmap("a", "1"))
    watcher = watch("-f", str(folder))
    (folder / "b.yaml").write_text("apiVersion: v1\nkind: NoSuchKind\nmetadata: {name: b}\n")
    (folder / "a.yaml").write_text(configmap("a", "2"))
    lines = watcher.round(2)
    assert any(line.startswith("error: ") and "b.yaml" in line for line in lines), lines
    assert "error: --atomic: no document was written" in lines
    assert value_of(api, "a") == "1"


def test_watch_with_prune_deletes_removed_objects(tmp_path, watch, api):
    """With --prune, an object whose file is removed is deleted in the next round."""
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "a.yaml").write_text(configmap("a", "1"))
    (folder / "b.yaml").write_text(configmap("b", "1"))
    watcher = watch("-f", str(folder), "--prune", "--all")
    assert value_of(api, "b") == "1"
    (folder / "b.yaml").unlink()
    lines = watcher.round(2)
    assert lines[0] == "--- round 2 (1 file changed) ---"
    assert "configmap/b pruned" in lines and "configmap/a unchanged" in lines
    assert value_of(api, "b") is None and value_of(api, "a") == "1"


def test_watch_ignores_other_files_and_watches_a_single_file(tmp_path, watch, api):
    """Only the named file (or manifests in a named folder) start a round."""
    folder = tmp_path / "manifests"
    folder.mkdir()
    target = folder / "a.yaml"
    target.write_text(configmap("a", "1"))
    watcher = watch("-f", str(target))
    (folder / "notes.txt").write_text("not a manifest")
    (folder / "other.yaml").write_text(configmap("other", "1"))
    target.write_text(configmap("a", "2"))
    assert watcher.round(2) == ["--- round 2 (1 file changed) ---", "configmap/a configured"]
    assert value_of(api, "other") is None


@pytest.mark.parametrize("args, message", [
    (["-f", "-"], "--watch needs local files or directories"),
    (["-f", "nope.yaml"], "no such file or directory"),
    (["-f", ".", "--dry-run=client"], "cannot be combined with --dry-run"),
    (["-f", ".", "--debounce", "soon"], "invalid duration"),
], ids=["stdin", "missing", "dry-run", "debounce"])
def test_watch_bad_options(kctl, tmp_path, monkeypatch, args, message):
    """Options --watch cannot work with are refused before anything is applied (exit 2)."""
    monkeypatch.chdir(tmp_path)
    result = kctl("apply", *args, "--watch")
    assert result.code == 2 and message in result.err
