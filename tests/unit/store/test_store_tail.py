"""One tail thread per store wakes every watcher (kctl.store.sqlite.Store.watch), instead of one poll per watcher."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from kctl.store.sqlite import Store

WRITER = """
import sys
from kctl.store.sqlite import Store
s = Store(sys.argv[1])
with s.transaction() as txn:
    txn.put("ConfigMap", "default", sys.argv[2], {"metadata": {"name": sys.argv[2], "uid": sys.argv[2]}},
            event="ADDED")
"""


def _tails() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kctl-store-tail:") and t.is_alive()]


def _watch(store: Store, since: int, stop: threading.Event, seen: list[str]) -> threading.Thread:
    def run() -> None:
        for change in store.watch(since, stop=stop):
            seen.append(change.name)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _wait(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_many_watchers_share_one_tail_and_see_another_process_write(tmp_path) -> None:
    """Ten watchers of one store run one tail; a commit by another process reaches all ten."""
    store = Store(tmp_path / "kctl.db")
    before = len(_tails())
    stop = threading.Event()
    seen: list[list[str]] = [[] for _ in range(10)]
    threads = [_watch(store, store.revision(), stop, s) for s in seen]
    try:
        assert _wait(lambda: len(_tails()) == before + 1)
        subprocess.run([sys.executable, "-c", WRITER, str(store.path), "from-elsewhere"], check=True, timeout=60)
        assert _wait(lambda: all(s == ["from-elsewhere"] for s in seen)), seen
        assert len(_tails()) == before + 1
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
    assert _wait(lambda: len(_tails()) == before), "the tail outlived its last watcher"


def test_a_waiting_watcher_stops_promptly(tmp_path) -> None:
    """A watcher with nothing to read notices its stop event (the wait is bounded)."""
    store = Store(tmp_path / "kctl.db")
    stop = threading.Event()
    thread = _watch(store, store.revision(), stop, [])
    time.sleep(0.2)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


def test_a_timed_watch_returns_at_its_deadline(tmp_path) -> None:
    """watch(timeout=...) with no changes returns after about the timeout, not never."""
    store = Store(tmp_path / "kctl.db")
    started = time.monotonic()
    assert list(store.watch(store.revision(), timeout=0.3)) == []
    assert time.monotonic() - started < 10
