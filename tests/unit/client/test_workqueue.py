"""The work queue: de-duplication, per-key serialisation, delays, back-off and shutdown."""

from __future__ import annotations

import threading
import time

import pytest

from kctl.client.workqueue import ExponentialBackoff, WorkQueue


@pytest.fixture
def queue():
    """A fresh queue, shut down (timer thread joined) after the test."""
    q: WorkQueue[str] = WorkQueue(name="test")
    yield q
    q.shutdown()


def drain(q: WorkQueue, *, timeout: float = 0.05) -> list[str]:
    """Every key handed out now (each marked done at once)."""
    out = []
    while (key := q.get(timeout=timeout)) is not None:
        out.append(key)
        q.done(key)
    return out


@pytest.mark.parametrize("adds, expected", [
    (["a"], ["a"]),
    (["a", "a", "a"], ["a"]),
    (["a", "b", "a", "c", "b"], ["a", "b", "c"]),
], ids=["one", "same-key-thrice", "order-of-first-add"])
def test_dedupe(queue, adds, expected):
    """A key waiting in the queue is held once, in the order it was first added."""
    for key in adds:
        queue.add(key)
    assert len(queue) == len(expected)
    assert drain(queue) == expected


def test_readd_while_processing_runs_once_after(queue):
    """A key added (twice) while being processed is not handed out until done, then once."""
    queue.add("a")
    assert queue.get(timeout=1) == "a"
    queue.add("a")
    queue.add("a")
    assert queue.get(timeout=0.05) is None  # not to a second worker meanwhile
    queue.done("a")
    assert drain(queue) == ["a"]


def test_one_worker_per_key_under_concurrency(queue):
    """Many workers and many adds: a key is never processed by two workers at once."""
    active: set[str] = set()
    overlaps: list[str] = []
    lock = threading.Lock()
    processed = []

    def worker() -> None:
        while (key := queue.get()) is not None:
            with lock:
                if key in active:
                    overlaps.append(key)
                active.add(key)
            time.sleep(0.001)
            with lock:
                active.discard(key)
                processed.append(key)
            queue.done(key)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(300):
        queue.add(f"k{i % 5}")
    deadline = time.monotonic() + 5
    while (len(queue) or len(set(processed)) < 5) and time.monotonic() < deadline:
        time.sleep(0.01)
    queue.shutdown()
    for t in threads:
        t.join(5)
    assert not overlaps
    assert set(processed) == {f"k{i}" for i in range(5)}


@pytest.mark.parametrize("delays, expected", [
    ({"a": 0.15, "b": 0.05, "c": 0.10}, ["b", "c", "a"]),
    ({"a": 0.0, "b": 0.05}, ["a", "b"]),
], ids=["by-time", "zero-is-now"])
def test_add_after_ordering(queue, delays, expected):
    """Delayed keys come out in the order of their times, not of their adds."""
    for key, delay in delays.items():
        queue.add_after(key, delay)
    got = [queue.get(timeout=1) for _ in expected]
    assert got == expected


def test_add_after_waits(queue):
    """A delayed key is not handed out before its time."""
    start = time.monotonic()
    queue.add_after("a", 0.2)
    assert queue.get(timeout=0.05) is None
    assert queue.delayed() == 1
    assert queue.get(timeout=2) == "a"
    assert time.monotonic() - start >= 0.19


def test_add_after_keeps_earlier_time(queue):
    """A key already waiting keeps the earlier of two times and comes out once."""
    queue.add_after("a", 0.05)
    queue.add_after("a", 5.0)
    assert queue.get(timeout=1) == "a"
    queue.done("a")
    assert queue.get(timeout=0.2) is None


def test_rate_limited_backoff_and_forget(queue):
    """add_rate_limited doubles the delay per failure; forget starts it over."""
    queue.backoff = ExponentialBackoff(base=0.02, cap=1.0)
    for _ in range(3):
        queue.add_rate_limited("a")
        assert queue.get(timeout=1) == "a"
        queue.done("a")
    assert queue.num_requeues("a") == 3
    queue.forget("a")
    assert queue.num_requeues("a") == 0


@pytest.mark.parametrize("failures, delay", [(0, 0.05), (1, 0.1), (3, 0.4), (20, 60.0), (500, 60.0)],
                         ids=["first", "second", "fourth", "capped", "huge"])
def test_backoff_delays(failures, delay):
    """The back-off is base * 2**failures, capped."""
    assert ExponentialBackoff().delay(failures) == pytest.approx(delay)


def test_shutdown_wakes_getters_and_refuses_adds(queue):
    """shutdown wakes a blocked get (None), stops the timer and ignores later adds."""
    got: list = []
    getter = threading.Thread(target=lambda: got.append(queue.get()))
    getter.start()
    queue.add_after("later", 10)
    time.sleep(0.05)
    queue.shutdown()
    getter.join(2)
    assert not getter.is_alive() and got == [None]
    queue.add("a")
    assert queue.get(timeout=0.01) is None
    assert queue.shutting_down
    assert queue._timer is not None and not queue._timer.is_alive()


class FakeClock:
    """A settable clock for the queue's timestamps."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_observe_reports_first_add_thread_and_take_time():
    """observe(): one QueueWait per key handed out, with its first add's time and thread, and when taken."""
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(name="observed", clock=clock)
    try:
        q.add("before")  # added before anyone observed: not reported
        waits = []
        q.observe(waits.append)
        adder = threading.Thread(target=lambda: (q.add("a"), q.add("b")))
        adder.start()
        adder.join()
        clock.now = 101.0
        q.add("a")  # a second add of a waiting key keeps the first add's time
        clock.now = 102.5
        taken = [q.get(), q.get(), q.get()]  # all queued: no wait (the fake clock would never time out)
        assert taken == ["before", "a", "b"]
        assert [(w.key, w.added, w.thread, w.taken) for w in waits] == [
            ("a", 100.0, adder.ident, 102.5), ("b", 100.0, adder.ident, 102.5)]
    finally:
        q.shutdown()


def test_observe_counts_the_wait_behind_a_running_pass():
    """A key added while it is processed is reported when handed out again, from that add's time."""
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(name="observed", clock=clock)
    try:
        waits = []
        q.observe(waits.append)
        q.add("k")
        assert q.get() == "k"
        clock.now = 101.0
        q.add("k")  # during the pass
        clock.now = 103.0
        q.done("k")
        assert q.get() == "k"
        assert [(w.added, w.taken) for w in waits] == [(100.0, 100.0), (101.0, 103.0)]
    finally:
        q.shutdown()
