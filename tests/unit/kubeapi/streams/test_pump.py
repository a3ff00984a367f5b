"""ThreadReader (kctl.kubeapi.streams.pump): a blocking iterator read on its own thread and awaited."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Iterator

import pytest

from kctl.kubeapi.streams.pump import BUFFER, ThreadReader

WAIT = 30.0


def test_pieces_in_order_then_none() -> None:
    """Every piece arrives in order; the end is None (again None after it)."""
    async def main() -> list[object]:
        reader = ThreadReader(lambda: iter([b"a", b"b", b"c"]), name="test-pump")
        got = [await reader.get(timeout=WAIT) for _ in range(4)]
        return got + [await reader.get(timeout=WAIT)]

    assert asyncio.run(main()) == [b"a", b"b", b"c", None, None]


def test_the_producers_error_is_raised_by_get() -> None:
    """An exception on the thread (after some pieces) is raised to the consumer in order."""
    def produce() -> Iterator[bytes]:
        yield b"first"
        raise OSError("connection lost")

    async def main() -> None:
        reader = ThreadReader(produce, name="test-pump")
        assert await reader.get(timeout=WAIT) == b"first"
        with pytest.raises(OSError, match="connection lost"):
            await reader.get(timeout=WAIT)
        assert await reader.get(timeout=WAIT) is None

    asyncio.run(main())


def test_get_times_out_while_the_producer_is_quiet() -> None:
    """A quiet producer makes get(timeout=) raise TimeoutError; the piece still comes later."""
    release = threading.Event()

    def produce() -> Iterator[bytes]:
        release.wait(WAIT)
        yield b"late"

    async def main() -> None:
        reader = ThreadReader(produce, name="test-pump")
        with pytest.raises(asyncio.TimeoutError):
            await reader.get(timeout=0.05)
        release.set()
        assert await reader.get(timeout=WAIT) == b"late"

    asyncio.run(main())


def test_stop_ends_a_producer_blocked_on_a_full_buffer() -> None:
    """A consumer that stops (its client left) ends the thread even while the buffer is full; the iterator is
    closed (its finally runs)."""
    closed = threading.Event()
    made: list[int] = []

    def produce() -> Iterator[int]:
        try:
            while True:
                made.append(len(made))
                yield made[-1]
        finally:
            closed.set()

    async def main() -> None:
        reader = ThreadReader(produce, name="test-pump")
        assert await reader.get(timeout=WAIT) == 0
        deadline = time.monotonic() + WAIT
        while len(made) < BUFFER + 2:  # the buffer is full and the producer waits to hand over one more
            assert time.monotonic() < deadline, "the producer never filled the buffer"
            await asyncio.sleep(0.01)
        reader.stop()
        assert await asyncio.get_running_loop().run_in_executor(None, closed.wait, WAIT)

    asyncio.run(main())


def test_stop_closes_what_the_thread_reads() -> None:
    """stop() calls close() of a (non-generator) iterator the thread is blocked on: it ends at once."""
    class Quiet:
        """Blocks in __next__ until closed (as a followed log of a quiet container)."""

        def __init__(self) -> None:
            self.closed = threading.Event()

        def __iter__(self) -> "Quiet":
            return self

        def __next__(self) -> bytes:
            self.closed.wait(WAIT)
            raise StopIteration

        def close(self) -> None:
            self.closed.set()

    quiet = Quiet()

    async def main() -> None:
        reader = ThreadReader(lambda: quiet, name="test-pump")
        with pytest.raises(asyncio.TimeoutError):
            await reader.get(timeout=0.05)
        reader.stop()
        assert quiet.closed.is_set()

    asyncio.run(main())
