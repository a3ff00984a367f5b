"""Podman's container event stream (`GET /libpod/events?stream=true`) as a kctl EventStream.

PodmanRuntime.container_events (kctl.runtime.podman.exec_logs) opens one for the node agent's event
watcher (kctl.agent.runtime_events) on the runtime's local socket: Podman's own socket, or
the local end of the SSH tunnel to a remote host, so the events of a remote host come
through the same tunnel as every other call.

It speaks HTTP over the unix socket itself (http.client) rather than through podman-py's
`client.events()`, whose generator keeps its response to itself and whose client timeout
(30 s) would cut a quiet stream: here `close()` shuts the socket down from any thread, so
an agent stops at once rather than at the next event, and a stream may stay quiet for hours.

Filters, as Podman 4.3.1's API takes them (checked against the service): `type=container`,
`event=NAME` (repeated: any of them), `label=KEY=VALUE` (repeated). The labels are checked
again here, all of them. An event carries its container's labels in Actor.Attributes (with
`name`, `image`, `podId`) and the exit code in `containerExitCode`, meaningful on "died".
With Podman's `file` events logger the service polls its log: an event arrives about
0.25 s after it happened. Podman services of one machine share that log (it lives in
Podman's tmpdir, /run/libpod, not in --runroot), so a stream may also bring events of
another service's containers; the agent acts only on pods bound to its node.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import urllib.parse
from typing import Iterable, Iterator

from kctl.runtime.interface import LABEL_POD_UID, ContainerEvent, RuntimeError_

MAX_EVENT_LINE = 1 << 20  # bytes; an event line longer than this ends the stream as broken


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a unix socket (the path replaces host and port); kctl.runtime.podman.logstream uses it too."""

    def __init__(self, socket_path: str, *, timeout: float) -> None:
        super().__init__("d", timeout=timeout)
        self._socket_path = socket_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def event_filters(labels: dict[str, str], events: Iterable[str]) -> dict[str, list[str]]:
    """The `filters` of an events request: containers only, these events (all when none), these labels."""
    filters: dict[str, list[str]] = {"type": ["container"]}
    names = [str(name) for name in events]
    if names:
        filters["event"] = names
    if labels:
        filters["label"] = [f"{key}={value}" for key, value in sorted(labels.items())]
    return filters


def parse_event(line: bytes | str) -> tuple[ContainerEvent, dict[str, str]] | None:
    """(the event, its container's attributes) from one line of the stream; None for anything else."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict) or str(doc.get("Type") or doc.get("type") or "") != "container":
        return None
    actor = doc.get("Actor") if isinstance(doc.get("Actor"), dict) else {}
    attributes = {str(k): str(v) for k, v in (actor.get("Attributes") or {}).items()}
    name = str(doc.get("status") or doc.get("Action") or "")
    container_id = str(actor.get("ID") or doc.get("id") or "")
    if not name or not container_id:
        return None
    exit_code: int | None = None
    if name in ("died", "exited"):
        with contextlib.suppress(KeyError, ValueError):
            exit_code = int(attributes["containerExitCode"])
    when = 0.0
    with contextlib.suppress(TypeError, ValueError, OverflowError):
        when = int(doc["timeNano"]) / 1e9 if doc.get("timeNano") else float(doc.get("time") or 0)
    event = ContainerEvent(container_id=container_id, event=name, pod_uid=attributes.get(LABEL_POD_UID, ""),
                           name=attributes.get("name", ""), exit_code=exit_code, time=when)
    return event, attributes


class PodmanEventStream:
    """One open events request; iterate for ContainerEvents, close() from any thread."""

    def __init__(self, connection: UnixHTTPConnection, response: http.client.HTTPResponse,
                 labels: dict[str, str], *, what: str) -> None:
        self._connection = connection
        self._response = response
        self._labels = dict(labels)
        self._what = what
        self._closed = threading.Event()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def __iter__(self) -> Iterator[ContainerEvent]:
        try:
            while not self._closed.is_set():
                try:
                    line = self._response.readline(MAX_EVENT_LINE)
                except (OSError, ValueError, AttributeError, http.client.HTTPException) as error:
                    if self._closed.is_set():
                        return
                    raise RuntimeError_(f"{self._what}: the stream broke: "
                                        f"{str(error) or type(error).__name__}") from error
                if not line:
                    return  # the service ended the stream (stopped, or the tunnel went down)
                if not line.endswith(b"\n") and len(line) >= MAX_EVENT_LINE:
                    raise RuntimeError_(f"{self._what}: an event longer than {MAX_EVENT_LINE} bytes")
                parsed = parse_event(line)
                if parsed is None:
                    continue
                event, attributes = parsed
                if all(attributes.get(key) == value for key, value in self._labels.items()):
                    yield event
        finally:
            self.close()

    def close(self) -> None:
        """End the stream now: a reader blocked in another thread returns at once."""
        first = not self._closed.is_set()
        self._closed.set()
        if not first:
            return
        sock = self._connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            self._connection.close()


def open_event_stream(socket_path: str, path_prefix: str, *, labels: dict[str, str], events: Iterable[str] = (),
                      timeout: float) -> PodmanEventStream:
    """Subscribe to the container events of the service on `socket_path`; returns once subscribed.

    `timeout` bounds connecting and the response's head only; the stream itself has no read
    timeout. RuntimeError_ (one line) when the service cannot be reached or refuses.
    """
    what = "container events"
    query = urllib.parse.urlencode({"stream": "true", "filters": json.dumps(event_filters(labels, events))})
    connection = UnixHTTPConnection(socket_path, timeout=timeout)
    try:
        connection.request("GET", f"{path_prefix}events?{query}")
        response = connection.getresponse()
        if response.status != 200:
            body = response.read(65536).decode(errors="replace")
            with contextlib.suppress(ValueError, AttributeError):
                body = json.loads(body).get("message", body)
            message = " ".join(str(body).split()) or response.reason
            raise RuntimeError_(f"{what}: the Podman service answered {response.status}: {message}")
        if connection.sock is not None:
            connection.sock.settimeout(None)
    except RuntimeError_:
        connection.close()
        raise
    except (OSError, http.client.HTTPException) as error:
        connection.close()
        raise RuntimeError_(f"{what}: cannot reach the Podman service: {str(error) or type(error).__name__}") \
            from error
    return PodmanEventStream(connection, response, labels, what=what)


__all__ = ["PodmanEventStream", "UnixHTTPConnection", "event_filters", "open_event_stream", "parse_event"]
