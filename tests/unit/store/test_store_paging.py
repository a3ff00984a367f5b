"""The change log and lists are read in pages bounded by bytes, so a catching-up watcher's memory stays bounded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tracemalloc


from kctl.store.sqlite import Store

MB = 1 << 20


def put_big(store: Store, name: str, size: int) -> None:
    with store.transaction() as txn:
        txn.put("ConfigMap", "default", name, {"metadata": {"name": name}, "data": {"blob": "x" * size}},
                event="ADDED")


def test_catching_up_watcher_memory_is_bounded(tmp_path):
    """A watcher that catches up over 24 changes of 1 MB holds a few pages at most, not the whole log."""
    store = Store(tmp_path / "s" / "kctl.db", page_bytes=2 * MB)
    try:
        for i in range(24):
            put_big(store, f"o{i}", MB)
        seen = 0
        tracemalloc.start()
        try:
            for change in store.watch(1, timeout=0):
                assert len(change.obj["data"]["blob"]) == MB
                seen += 1
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert seen == 24
        assert peak < 8 * MB, f"peak {peak / MB:.1f} MB while catching up over 24 MB of changes"
    finally:
        store.close()


CATCH_UP = textwrap.dedent("""
    import resource, sys
    from kctl.store.sqlite import Store
    store = Store(sys.argv[1])
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    n = sum(1 for _ in store.watch(0, timeout=0))
    print(n, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
""")


def test_watcher_in_another_process_keeps_rss_bounded(tmp_path):
    """As in the issue: writes of large objects, then a watcher process catches up; its RSS grows by far
    less than the log's size (ru_maxrss, in MB)."""
    path = tmp_path / "s" / "kctl.db"
    store = Store(path, synchronous="OFF")
    try:
        for i in range(30):
            put_big(store, f"o{i}", 4 * MB)
    finally:
        store.close()
    done = subprocess.run([sys.executable, "-c", CATCH_UP, str(path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    count, grown_mb = map(int, done.stdout.split())
    assert count == 31  # the default namespace and the 30 objects
    assert grown_mb < 60, f"watcher grew by {grown_mb} MB catching up over 120 MB of changes"
