"""kctl.ops.portrelay: listeners print kubectl's lines; bytes relayed both ways through a process route
(as `ssh -W` is one), half-close passed on, failures one line, nothing left running after close()."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from kctl.ops.portrelay import Forwarder, ListenAddress, Output, Route

WAIT = 30.0
LOOPBACK = [ListenAddress("127.0.0.1", 4)]


@pytest.fixture
def relay() -> Iterator:
    """Start a Forwarder on 127.0.0.1:any to one route; closed after the test."""
    made: list[Forwarder] = []

    def start(route: Route) -> tuple[Forwarder, io.StringIO, io.StringIO]:
        out, err = io.StringIO(), io.StringIO()
        forwarder = Forwarder([(0, 80)], LOOPBACK, {80: route}, output=Output(out, err))
        made.append(forwarder)
        forwarder.listen()
        forwarder.start()
        return forwarder, out, err

    try:
        yield start
    finally:
        for forwarder in made:
            forwarder.close()


def _exchange(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
    return answer


def _until(check, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _running(marker: str) -> bool:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
    return False


def test_process_route_relays_both_ways_with_half_close(relay):
    """A process route (stdin/stdout as the stream, as `ssh -W`): data there and back, EOF passed on."""
    forwarder, out, err = relay(Route("10.0.0.1", 80, ssh=("cat",), via="h1:22"))
    port = forwarder.local_ports[0]
    payload = os.urandom(200_000)
    assert _exchange(port, payload) == payload
    _until(lambda: f"Handling connection for {port}\n" in out.getvalue(), "the connection line")
    assert out.getvalue() == f"Forwarding from 127.0.0.1:{port} -> 80\nHandling connection for {port}\n"
    assert err.getvalue() == ""


def test_failed_ssh_is_one_line_in_its_own_words(relay):
    """An ssh that cannot open its channel: `error: an error occurred forwarding L -> R: ssh HOST: <its words>`."""
    script = ('echo "channel 0: open failed: connect failed: Connection refused" >&2; '
              'echo "stdio forwarding failed" >&2; exit 255')
    forwarder, _, err = relay(Route("10.0.0.1", 80, ssh=("sh", "-c", script), via="h1:22"))
    port = forwarder.local_ports[0]
    assert _exchange(port, b"x") == b""
    _until(lambda: err.getvalue(), "the error line")
    assert err.getvalue() == (f"error: an error occurred forwarding {port} -> 80: ssh h1:22: channel 0: open failed: "
                              "connect failed: Connection refused\n")


def test_close_ends_open_connections_and_their_processes(relay):
    """close() breaks an open connection and ends its process; the port no longer listens."""
    marker = f"kctl-relay-test-{uuid.uuid4().hex}"
    forwarder, _, err = relay(Route("10.0.0.1", 80, ssh=(sys.executable, "-c", "import time; time.sleep(600)",
                                                          marker)))
    port = forwarder.local_ports[0]
    client = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    try:
        _until(lambda: _running(marker), "the route's process")
        forwarder.close()
        assert client.recv(1) == b""
        assert not _running(marker)
        assert err.getvalue() == ""
    finally:
        client.close()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


def test_localhost_listens_on_both_and_one_port(relay):
    """`localhost` gives one free port on 127.0.0.1 and ::1 (the second uses the port the first got)."""
    out = io.StringIO()
    forwarder = Forwarder([(0, 8080)], [ListenAddress("127.0.0.1", 4, required=False),
                                        ListenAddress("::1", 6, required=False)],
                          {8080: Route("127.0.0.1", 1)}, output=Output(out, io.StringIO()))
    try:
        forwarder.listen()
        port = forwarder.local_ports[0]
        lines = out.getvalue().splitlines()
        assert lines[0] == f"Forwarding from 127.0.0.1:{port} -> 8080"
        assert lines[1:] in ([], [f"Forwarding from [::1]:{port} -> 8080"])  # ::1 may be off: allowed to fail
    finally:
        forwarder.close()
