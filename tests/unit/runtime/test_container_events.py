"""Container event streams: MemoryRuntime's, and Podman's (kctl.runtime.podman.events) against a fake service.

The fake service is a unix-socket HTTP server in a thread that answers the events request
with a chunked stream the test writes to, as Podman 4.3.1 does.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
import urllib.parse
from typing import Iterator

import pytest

from kctl.runtime.interface import (
    DEATH_EVENTS,
    LABEL_MANAGED,
    LABEL_POD_UID,
    ContainerEvent,
    ContainerSpec,
    PodSandboxSpec,
    RuntimeError_,
)
from kctl.runtime.memory import FakeClock, MemoryRuntime
from kctl.runtime.podman.events import event_filters, open_event_stream, parse_event

IMAGE = "localhost/busybox:demo"
KCTL = {LABEL_MANAGED: "true"}


# -- MemoryRuntime ------------------------------------------------------------------------------

@pytest.fixture
def runtime() -> MemoryRuntime:
    """A MemoryRuntime holding IMAGE, on a fake clock."""
    return MemoryRuntime(images={IMAGE}, clock=FakeClock())


def start(runtime: MemoryRuntime, name: str = "c", *, command: list[str] | None = None,
          uid: str = "uid-1") -> str:
    pods = runtime.list_pods({LABEL_POD_UID: uid})
    pod = pods[0] if pods else runtime.create_pod(PodSandboxSpec(name=f"p-{uid}", labels={LABEL_POD_UID: uid}))
    container_id = runtime.create_container(pod.id, ContainerSpec(
        name=name, image=IMAGE, labels={LABEL_POD_UID: uid, "io.kctl.container.name": name}, command=command))
    runtime.start_container(container_id)
    return container_id


def drain(stream, count: int, timeout: float = 5.0) -> list[ContainerEvent]:
    """The next `count` events of a stream, read in a thread (fails after `timeout` s)."""
    got: list[ContainerEvent] = []
    done = threading.Event()

    def read() -> None:
        for event in stream:
            got.append(event)
            if len(got) == count:
                break
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(timeout), f"only {len(got)} of {count} events came: {got}"
    return got


@pytest.mark.parametrize(("how", "expected"), [
    ("crash", [("died", 3)]),
    ("oom", [("oom", None), ("died", 137)]),
    ("stop", [("died", 143)]),
    ("remove_container", [("died", 137), ("remove", None)]),
    ("remove_pod", [("died", 137), ("remove", None)]),
])
def test_memory_runtime_streams_deaths(runtime: MemoryRuntime, how: str, expected: list) -> None:
    """However a container stops, its stream says so, with the pod uid label and exit code."""
    container_id = start(runtime)
    stream = runtime.container_events(KCTL)
    try:
        if how == "crash":
            runtime.crash(container_id, 3)
        elif how == "oom":
            runtime.crash(container_id, 137, oom=True)
        elif how == "stop":
            runtime.stop_container(container_id, timeout=5)
        elif how == "remove_container":
            runtime.remove_container(container_id)
        else:
            runtime.remove_pod(runtime.list_pods({})[0].id)
        events = drain(stream, len(expected))
    finally:
        stream.close()
    assert [(e.event, e.exit_code) for e in events] == expected
    assert {(e.container_id, e.pod_uid, e.name) for e in events} == {(container_id, "uid-1", "c")}


def test_memory_runtime_filters_by_label_and_event(runtime: MemoryRuntime) -> None:
    """Only containers with every label, and only the named events, reach a stream."""
    mine, other = start(runtime, "a", uid="u1"), start(runtime, "b", uid="u2")
    stream = runtime.container_events({LABEL_POD_UID: "u1"}, events=DEATH_EVENTS)
    try:
        runtime.crash(other, 1)
        start(runtime, "c", uid="u1")  # a start: not a death
        runtime.crash(mine, 2)
        (event,) = drain(stream, 1)
    finally:
        stream.close()
    assert (event.container_id, event.event, event.exit_code, event.is_death) == (mine, "died", 2, True)


def test_memory_runtime_planned_exit_streams_when_settled(runtime: MemoryRuntime) -> None:
    """A `sleep S` container's exit goes out once its time is over and something looks (or settle())."""
    clock = runtime.clock
    start(runtime, command=["sleep", "5"])
    stream = runtime.container_events(KCTL)
    try:
        clock.advance(6)  # type: ignore[attr-defined]
        runtime.settle()
        (event,) = drain(stream, 1)
    finally:
        stream.close()
    assert (event.event, event.exit_code) == ("died", 0)


def test_memory_runtime_stream_controls(runtime: MemoryRuntime) -> None:
    """drop_event_streams ends (or breaks) open streams; events_error refuses new ones; close unsubscribes."""
    clean, broken = runtime.container_events(KCTL), runtime.container_events(KCTL)
    assert runtime.event_streams == 2
    assert runtime.drop_event_streams() == 2 and runtime.event_streams == 0
    assert list(clean) == []
    runtime.drop_event_streams("ignored: already dropped")
    stream = runtime.container_events(KCTL)
    runtime.drop_event_streams("connection reset by peer")
    with pytest.raises(RuntimeError_, match="connection reset"):
        list(stream)
    runtime.events_error = "no route to host"
    with pytest.raises(RuntimeError_, match="no route to host"):
        runtime.container_events(KCTL)
    runtime.events_error = None
    stream = runtime.container_events(KCTL)
    stream.close()
    assert runtime.event_streams == 0 and list(stream) == []
    del broken


def test_memory_stream_close_from_another_thread_ends_iteration(runtime: MemoryRuntime) -> None:
    """A reader blocked on a quiet stream returns as soon as another thread closes it."""
    stream = runtime.container_events(KCTL)
    ended = threading.Event()
    reader = threading.Thread(target=lambda: (list(stream), ended.set()), daemon=True)
    reader.start()
    time.sleep(0.05)
    stream.close()
    assert ended.wait(5)


# -- Podman's stream: parsing ---------------------------------------------------------------------

def podman_line(status: str, *, cid: str = "c0ffee", exit_code: str = "0", labels: dict | None = None,
                kind: str = "container") -> bytes:
    """One event line as Podman 4.3.1 writes it."""
    attributes = {"containerExitCode": exit_code, "image": IMAGE, "name": "kctl_web", "podId": "",
                  **(labels if labels is not None else {**KCTL, LABEL_POD_UID: "uid-9"})}
    return json.dumps({"status": status, "id": cid, "from": IMAGE, "Type": kind, "Action": status,
                       "Actor": {"ID": cid, "Attributes": attributes}, "scope": "local",
                       "time": 1796394734, "timeNano": 1796394734190622486}).encode() + b"\n"


@pytest.mark.parametrize(("line", "expected"), [
    (podman_line("died", exit_code="137"), ("c0ffee", "died", "uid-9", "kctl_web", 137)),
    (podman_line("start", exit_code="0"), ("c0ffee", "start", "uid-9", "kctl_web", None)),
    (podman_line("died", labels={}), ("c0ffee", "died", "", "kctl_web", 0)),
    (podman_line("died", exit_code="n/a"), ("c0ffee", "died", "uid-9", "kctl_web", None)),
    (podman_line("remove", kind="image"), None),
    (b"not json\n", None),
    (b"[1, 2]\n", None),
    (b'{"Type": "container", "status": "died"}\n', None),
])
def test_parse_event(line: bytes, expected: tuple | None) -> None:
    """Container events become ContainerEvents (exit code only on a death); anything else is skipped."""
    parsed = parse_event(line)
    if expected is None:
        assert parsed is None
        return
    event, attributes = parsed
    assert (event.container_id, event.event, event.pod_uid, event.name, event.exit_code) == expected
    assert event.time == pytest.approx(1796394734.19) and attributes["name"] == "kctl_web"


def test_event_filters() -> None:
    """Containers only, the events asked for, one label filter per label."""
    assert event_filters({"b": "2", "a": "1"}, DEATH_EVENTS) == {
        "type": ["container"], "event": list(DEATH_EVENTS), "label": ["a=1", "b=2"]}
    assert event_filters({}, ()) == {"type": ["container"]}


# -- Podman's stream against a fake service ----------------------------------------------------------

class FakeEventService:
    """A unix-socket server answering one events request with a chunked stream the test feeds."""

    def __init__(self, status: int = 200, body: bytes = b"") -> None:
        self.folder = tempfile.mkdtemp(prefix="kctl-ev-")
        self.path = os.path.join(self.folder, "podman.sock")
        self.status, self.body = status, body
        self.request = b""
        self.connected = threading.Event()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(4)
        self._client: socket.socket | None = None
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            client, _ = self._server.accept()
        except OSError:
            return
        self._client = client
        while b"\r\n\r\n" not in self.request:
            chunk = client.recv(65536)
            if not chunk:
                return
            self.request += chunk
        if self.status != 200:
            client.sendall(f"HTTP/1.1 {self.status} Internal Server Error\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {len(self.body)}\r\n\r\n".encode() + self.body)
        else:
            client.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n")
        self.connected.set()

    def send(self, data: bytes) -> None:
        assert self.connected.wait(5) and self._client is not None
        self._client.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def end(self) -> None:
        assert self.connected.wait(5) and self._client is not None
        self._client.sendall(b"0\r\n\r\n")
        self._client.close()

    def query(self) -> dict:
        target = self.request.split(b" ")[1].decode()
        return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(target).query).items()}

    def close(self) -> None:
        for sock in (self._client, self._server):
            if sock is not None:
                sock.close()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)


@pytest.fixture
def service() -> Iterator[FakeEventService]:
    """A fake events service, closed after the test."""
    fake = FakeEventService()
    yield fake
    fake.close()


def test_podman_stream_yields_matching_events_then_ends(service: FakeEventService) -> None:
    """Events are read as they come (chunk by chunk), filtered by label again; the stream's end ends iteration."""
    stream = open_event_stream(service.path, "/v5.0.0/libpod/", labels=KCTL, events=DEATH_EVENTS, timeout=5)
    try:
        assert service.query()["stream"] == "true"
        assert json.loads(service.query()["filters"]) == {
            "type": ["container"], "event": list(DEATH_EVENTS), "label": ["io.kctl.managed=true"]}
        assert service.request.startswith(b"GET /v5.0.0/libpod/events?")
        service.send(podman_line("died", cid="a1", exit_code="137"))
        service.send(podman_line("died", cid="foreign", labels={"other": "1"}))  # the label is checked here too
        service.send(b'{"Type": "container", "status": "di')  # one event split over two chunks
        service.send(b'ed", "Actor": {"ID": "a2", "Attributes": {"io.kctl.managed": "true"}}}\n')
        service.end()
        events = drain(stream, 2)
        assert [(e.container_id, e.exit_code) for e in events] == [("a1", 137), ("a2", None)]
        assert list(stream) == []
    finally:
        stream.close()


def test_podman_stream_close_from_another_thread_is_prompt(service: FakeEventService) -> None:
    """A reader blocked on a quiet stream returns at once when another thread closes it (no error)."""
    stream = open_event_stream(service.path, "/v5.0.0/libpod/", labels=KCTL, timeout=5)
    outcome: list[object] = []
    reader = threading.Thread(target=lambda: outcome.append(list(stream)), daemon=True)
    reader.start()
    time.sleep(0.1)
    started = time.monotonic()
    stream.close()
    reader.join(5)
    assert not reader.is_alive() and outcome == [[]]
    assert time.monotonic() - started < 2


def test_podman_stream_broken_connection_raises(service: FakeEventService) -> None:
    """A connection cut in the middle of a chunk breaks the stream with one clear error."""
    stream = open_event_stream(service.path, "/v5.0.0/libpod/", labels=KCTL, timeout=5)
    assert service._client is not None
    service._client.sendall(b"40\r\n{\"Type\": \"cont")
    service._client.close()
    with pytest.raises(RuntimeError_, match="^container events: the stream broke"):
        list(stream)


def test_podman_stream_refused_or_unreachable() -> None:
    """An error answer or a missing socket is one RuntimeError_ line naming the cause."""
    refusing = FakeEventService(status=500, body=b'{"cause": "x", "message": "failed to parse\\n filters"}')
    try:
        with pytest.raises(RuntimeError_, match="answered 500: failed to parse filters$"):
            open_event_stream(refusing.path, "/v5.0.0/libpod/", labels=KCTL, timeout=5)
    finally:
        refusing.close()
    with pytest.raises(RuntimeError_, match="cannot reach the Podman service"):
        open_event_stream("/nonexistent/podman.sock", "/v5.0.0/libpod/", labels=KCTL, timeout=5)


def test_podman_runtime_streams_over_its_own_socket(service: FakeEventService) -> None:
    """PodmanRuntime.container_events asks its service (libpod path, filters) and hands back its events."""
    from kctl.runtime.podman import PodmanRuntime

    with PodmanRuntime(f"unix://{service.path}") as runtime:
        stream = runtime.container_events(KCTL, events=DEATH_EVENTS)
        try:
            assert service.request.startswith(b"GET /v") and b"/libpod/events?" in service.request
            service.send(podman_line("oom"))
            service.send(podman_line("died", exit_code="137"))
            service.end()
            assert [(e.event, e.exit_code) for e in stream] == [("oom", None), ("died", 137)]
        finally:
            stream.close()


def test_podman_runtime_unreachable_service_is_one_error() -> None:
    """No service on the socket: one RuntimeError_ naming the call, no traceback of requests/http."""
    from kctl.runtime.podman import PodmanRuntime

    with PodmanRuntime("unix:///nonexistent/podman.sock") as runtime:
        with pytest.raises(RuntimeError_, match="^container events: cannot reach the Podman service"):
            runtime.container_events(KCTL)
