"""Smoke tests of the store benchmarks' harness (benchmarks/store_backends.py, scheduler.py --store), on SQLite.

The etcd half needs a cluster and minutes; it is run by hand and recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import store_backends  # noqa: E402  (benchmarks/ is not a package)


def test_writes_measures_every_kind_of_write(tmp_path):
    """writes() returns a positive rate for the API's and the raw store's serial and threaded writes."""
    spec = store_backends.SQLiteBackend(str(tmp_path)).spec("w")
    rates = store_backends.writes(spec, 16)
    assert set(rates) == {"api create, serial", "api create, 8 threads", "api update, serial",
                          "raw store put, serial", "raw store put, 8 threads"}
    assert all(rate > 0 for rate in rates.values())


@pytest.mark.parametrize("names, header", [
    (["SQLite"], "| measurement (median of 2 rounds) | SQLite |"),
    (["SQLite", "etcd"], "| measurement (median of 2 rounds) | SQLite | etcd | etcd / SQLite |"),
])
def test_table_has_a_column_per_backend_and_ratios(names, header):
    """The table has one column per backend and one ratio column per backend after the first."""
    one = {"api create, serial": [100.0, 300.0], "watch p50": [0.002, 0.004], "watch p99": [0.01, 0.01],
           "patch p50": [0.001, 0.001], "get": [0.1, 0.1], "python -c pass": [0.01, 0.01]}
    lines = store_backends.table({name: one for name in names}, rounds=2)
    assert lines[0] == header
    columns = lines[0].count("|")
    assert all(line.count("|") == columns for line in lines)
    assert "| api create, serial (writes/s) | 200 |" in lines[2]


def test_scheduler_rejects_an_unknown_store():
    """scheduler.py --store with an unknown backend exits non-zero with one line naming it."""
    out = subprocess.run([sys.executable, str(BENCH / "scheduler.py"), "--store", "mysql"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "--store mysql" in out.stderr and "Traceback" not in out.stderr
