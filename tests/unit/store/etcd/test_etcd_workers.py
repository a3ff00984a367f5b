"""DaemonWorkers: calls run on daemon threads, queued calls can be cancelled, a hung call does not hold the exit."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from kctl.store.etcd.workers import DaemonWorkers


def test_results_and_exceptions_come_back_through_the_future():
    """A call's return value and its exception reach the caller's Future."""
    workers = DaemonWorkers(2, name="t")
    try:
        assert workers.submit(lambda a, b: a + b, 2, 3).result(timeout=10) == 5
        with pytest.raises(ValueError, match="bad"):
            workers.submit(_raise, ValueError("bad")).result(timeout=10)
    finally:
        workers.shutdown()


def test_a_call_waiting_for_a_busy_worker_can_be_cancelled_and_never_runs():
    """With every worker busy, a new call waits in the queue; cancel() succeeds and it never runs."""
    release = threading.Event()
    ran: list[str] = []
    workers = DaemonWorkers(1, name="t")
    try:
        busy = workers.submit(release.wait, 30)
        queued = workers.submit(ran.append, "queued")
        assert queued.cancel()
        release.set()
        assert busy.result(timeout=10) is True
        assert workers.submit(ran.append, "next").result(timeout=10) is None
        assert ran == ["next"]
    finally:
        release.set()
        workers.shutdown()


def test_threads_are_reused_and_never_more_than_the_limit():
    """Sequential calls reuse one thread; concurrent ones start at most `limit` threads."""
    workers = DaemonWorkers(3, name="t-limit")
    release = threading.Event()
    try:
        for _ in range(5):
            workers.submit(lambda: None).result(timeout=10)
        assert sum(t.name.startswith("t-limit") for t in threading.enumerate()) == 1
        futures = [workers.submit(release.wait, 30) for _ in range(6)]
        assert sum(t.name.startswith("t-limit") for t in threading.enumerate()) == 3
        release.set()
        assert all(f.result(timeout=10) for f in futures)
    finally:
        release.set()
        workers.shutdown()


def test_a_hung_call_does_not_keep_the_process_from_exiting():
    """The interpreter exits at once although a worker is still inside a 60 s call (daemon threads)."""
    code = ("import time\nfrom kctl.store.etcd.workers import DaemonWorkers\n"
            "DaemonWorkers(1, name='t').submit(time.sleep, 60)\ntime.sleep(0.2)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


def _raise(error: Exception) -> None:
    raise error
