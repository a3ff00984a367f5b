"""Compaction runs from the store's own state, so many short-lived writers (processes) still move the horizon."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kctl.store.sqlite import Store

HISTORY = 20
BATCH = 10


def put(store: Store, name: str) -> None:
    with store.transaction() as txn:
        txn.put("ConfigMap", "default", name, {"metadata": {"name": name}}, event="ADDED")


def changes_kept(store: Store) -> int:
    return store._conn().execute("SELECT count(*) FROM changes").fetchone()[0]


@pytest.mark.parametrize("writers,writes_each", [(120, 1), (40, 3), (1, 120)],
                         ids=["one-write-each", "three-writes-each", "one-long-lived-writer"])
def test_short_lived_writers_move_the_horizon(tmp_path, writers, writes_each):
    """Whatever the number of Store instances the writes come from, the log stays near `history`."""
    path = tmp_path / "s" / "kctl.db"
    for w in range(writers):
        store = Store(path, history=HISTORY, compact_batch=BATCH)
        for i in range(writes_each):
            put(store, f"w{w}-{i}")
        store.close()
    store = Store(path)
    try:
        head = store.revision()
        assert head == 1 + writers * writes_each
        assert store.compacted() >= head - HISTORY - BATCH - 1
        assert changes_kept(store) <= HISTORY + BATCH
    finally:
        store.close()


def test_each_step_is_bounded(tmp_path, monkeypatch):
    """A write that finds the log long runs one compaction step of at most compact_batch rows."""
    path = tmp_path / "s" / "kctl.db"
    seed = Store(path, history=10_000)
    for i in range(200):  # a log far past the small history below, built without compaction
        put(seed, f"o{i}")
    seed.close()
    store = Store(path, history=HISTORY, compact_batch=BATCH)
    steps: list[int] = []
    original = Store.compact

    def spy(self, **kwargs):
        steps.append(original(self, **kwargs))
        return steps[-1]

    monkeypatch.setattr(Store, "compact", spy)
    try:
        put(store, "next")
        assert steps == [BATCH]
        put(store, "again")
        assert steps == [BATCH, BATCH]
    finally:
        store.close()


WRITER = textwrap.dedent("""
    import sys
    from kctl.store.sqlite import Store
    store = Store(sys.argv[1], history=int(sys.argv[2]), compact_batch=int(sys.argv[3]))
    for i in range(int(sys.argv[5])):
        with store.transaction() as txn:
            name = f"{sys.argv[4]}-{i}"
            txn.put("ConfigMap", "default", name, {"metadata": {"name": name}}, event="ADDED")
    store.close()
""")


def test_writer_processes_move_the_horizon(tmp_path):
    """Many separate `kctl`-like processes, each writing a little, push the log past the threshold:
    the horizon moves and the log stays bounded."""
    path = tmp_path / "s" / "kctl.db"
    Store(path).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(HISTORY), str(BATCH), f"p{p}", "8"])
             for p in range(12)]
    try:
        assert [p.wait(timeout=300) for p in procs] == [0] * len(procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    store = Store(path)
    try:
        assert store.revision() == 1 + 12 * 8
        assert store.compacted() > 0
        assert changes_kept(store) <= HISTORY + 2 * BATCH  # two processes may both see the same threshold
        assert [c.revision for c in store.changes(store.compacted())] == list(
            range(store.compacted() + 1, store.revision() + 1))
    finally:
        store.close()
