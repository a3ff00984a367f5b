"""Exec over Podman's hijacked exec-start stream: stdin in, stdout and stderr out, a deadline.

podman-py's exec loses stdin and, over SSH, the output; the runtime (kctl.runtime.podman.exec_logs)
creates the exec session through the API and then speaks the upgraded stream itself on the
service's local unix socket (Podman's own, or the local end of the SSH tunnel).
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time

from kctl.runtime.interface import NotFoundInRuntime, RuntimeError_
from kctl.runtime.podman.errors import one_line


def demux_frames(data: bytes) -> tuple[bytes, bytes, bytes]:
    """Split a multiplexed stream into (stdout, stderr, rest-not-yet-complete)."""
    out, err = bytearray(), bytearray()
    index = 0
    while len(data) - index >= 8:
        kind, size = struct.unpack_from(">BxxxL", data, index)
        if len(data) - index - 8 < size:
            break
        payload = data[index + 8: index + 8 + size]
        (err if kind == 2 else out).extend(payload)
        index += 8 + size
    return bytes(out), bytes(err), data[index:]


def _http_head(sock: socket.socket, request: bytes) -> tuple[int, bytes, bytes]:
    """Send one request; return (status, header block, bytes read after the headers)."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the Podman service closed the connection")
        data += chunk
        if len(data) > 1 << 20:
            raise ConnectionError("oversized response header")
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, head, rest


def _error_body(sock: socket.socket, head: bytes, rest: bytes) -> str:
    length = 0
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    text = rest.decode(errors="replace")
    with contextlib.suppress(ValueError, AttributeError):
        text = json.loads(text).get("message", text)
    return one_line(text)


def _feed_stdin(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def exec_stream(socket_path: str, path_prefix: str, exec_id: str, *, stdin: bytes | None,
                deadline: float | None) -> tuple[bytes, bytes]:
    """Start exec session `exec_id` on the service, feed stdin, collect (stdout, stderr)."""
    body = json.dumps({"Detach": False, "Tty": False}).encode()
    request = (f"POST {path_prefix}exec/{exec_id}/start HTTP/1.1\r\nHost: d\r\n"
               "Content-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(_remaining(deadline))
        sock.connect(socket_path)
        status, head, rest = _http_head(sock, request)
        if status >= 400:
            message = _error_body(sock, head, rest)
            if status == 404:
                raise NotFoundInRuntime(f"exec: {message}")
            raise RuntimeError_(f"exec: {message}")
        if stdin is not None:
            threading.Thread(target=_feed_stdin, args=(sock, stdin), daemon=True).start()
        return _read_frames(sock, rest, deadline)


def _read_frames(sock: socket.socket, pending: bytes, deadline: float | None) -> tuple[bytes, bytes]:
    out, err = bytearray(), bytearray()
    while True:
        more_out, more_err, pending = demux_frames(pending)
        out += more_out
        err += more_err
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(65536)
        if not chunk:
            return bytes(out), bytes(err)
        pending += chunk


__all__ = ["demux_frames", "exec_stream"]
