"""PodmanRuntime.attach_session on real Podman: stdin reaches the main process, stdinOnce closes it, a TTY works.

(The runtime contract suite checks what MemoryRuntime shares: the end when the container stops, close.)
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from kctl.runtime.interface import LABEL_MANAGED, ContainerSpec, PodSandboxSpec
from kctl.runtime.podman import PodmanRuntime

pytestmark = pytest.mark.integration
IMAGE = "localhost/busybox:demo"
ECHO = ["sh", "-c", "while read line; do echo got:$line; echo err:$line >&2; done; echo bye; exit 4"]
WAIT = 30.0


def start(runtime: PodmanRuntime, *, tty: bool) -> str:
    """A running container of ECHO with stdin open (and a TTY when asked), in a pod of its own."""
    name = f"kctl-it-attach-{uuid.uuid4().hex[:8]}"
    labels = {LABEL_MANAGED: "true"}
    pod = runtime.create_pod(PodSandboxSpec(name=name, labels=labels))
    container_id = runtime.create_container(pod.id, ContainerSpec(name=f"{name}-c", image=IMAGE, labels=labels,
                                                                  command=ECHO, stdin=True, tty=tty))
    runtime.start_container(container_id)
    return container_id


def read_until(session, needle: bytes) -> dict[int, bytes]:
    """Read the session's output (by stream) until `needle` is in it or the output ends, on a thread with a
    deadline (a hang fails the test instead of blocking it)."""
    got: dict[int, bytes] = {}
    done = threading.Event()

    def work() -> None:
        while needle not in b"".join(got.values()):
            piece = session.read()
            if piece is None:
                break
            got[piece[0]] = got.get(piece[0], b"") + piece[1]
        done.set()

    threading.Thread(target=work, daemon=True).start()
    if not done.wait(WAIT):
        session.close()
        pytest.fail(f"no {needle!r} within {WAIT:g} s; got {got!r}")
    return got


def test_attach_stdin_reaches_the_main_process_and_stdin_once_closes_it(runtime: PodmanRuntime) -> None:
    """Lines written reach the process, its stdout/stderr come back apart; closing stdin ends it (exit 4)."""
    container_id = start(runtime, tty=False)
    session = runtime.attach_session(container_id, stdin=True, stdin_once=True)
    try:
        session.write(b"hello\n")
        got = read_until(session, b"err:hello\n")
        assert got.get(1, b"").startswith(b"got:hello\n") and got[2] == b"err:hello\n"
        session.close_stdin()
        rest = read_until(session, b"bye\n")
        assert rest.get(1) == b"bye\n"
        assert read_until(session, b"<end>") == {}
    finally:
        session.close()
    deadline = time.monotonic() + WAIT
    while (state := runtime.inspect_container(container_id)).state == "running" and time.monotonic() < deadline:
        time.sleep(0.1)  # Podman records the exit a moment after the stream ends
    assert (state.state, state.exit_code) == ("exited", 4)


def test_attach_with_a_tty_is_one_stream(runtime: PodmanRuntime) -> None:
    """With a TTY the terminal echoes input and stdout and stderr come as one stream."""
    container_id = start(runtime, tty=True)
    session = runtime.attach_session(container_id, stdin=True, tty=True)
    try:
        session.resize(100, 30)
        session.write(b"hi\n")
        got = read_until(session, b"err:hi")
        assert set(got) == {1} and b"got:hi" in got[1]
    finally:
        session.close()
