"""pods/exec over a WebSocket from kctl's REST client: Kubernetes' channel protocol, client side, stdlib only.

kctl.apiserver.rest.client.RESTAPIClient.pod_exec calls `exec_over_websocket` for `kctl exec` over
HTTPS. The request is a GET upgraded to a WebSocket (RFC 6455) offering `v5.channel.k8s.io` then
`v4.channel.k8s.io`, as kubectl 1.30+ does. Every message is one channel byte and data: the client
sends its stdin on channel 0 (then, in v5, `[255, 0]` to close it); the server sends stdout (1) and
stderr (2) as the command writes them, and last the error channel (3): a v1 Status, `Success`, or
`NonZeroExitCode` with the exit code in details.causes. Client frames are masked (RFC 6455 5.3).
An answer other than 101 (the pod is not running, no such container) is the Status it carries,
raised as its kctl error.
"""

from __future__ import annotations

import base64
import json
import os
import struct
from typing import TYPE_CHECKING, Callable

from kctl.apiserver.rest.status import error_of
from kctl.apiserver.wire import ServerUnavailable
from kctl.machinery.remotecommand import CLOSE as CLOSE_CHANNEL
from kctl.machinery.remotecommand import ERROR, PROTOCOLS, STDERR, STDIN, STDOUT, exit_code_of

if TYPE_CHECKING:
    import ssl

#: the largest stdin piece one message carries
CHUNK = 32 * 1024
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class _Socket:
    """Buffered reads and whole writes over one TLS socket."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self.sock = sock
        self.buffer = b""

    def read_exact(self, n: int) -> bytes:
        while len(self.buffer) < n:
            data = self.sock.recv(65536)
            if not data:
                raise ServerUnavailable("the server closed the exec stream")
            self.buffer += data
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def read_until(self, marker: bytes, *, limit: int = 65536) -> bytes:
        while marker not in self.buffer:
            if len(self.buffer) > limit:
                raise ServerUnavailable("the server's answer to the exec upgrade is too long")
            data = self.sock.recv(65536)
            if not data:
                raise ServerUnavailable("the server closed the connection during the exec upgrade")
            self.buffer += data
        head, _, self.buffer = self.buffer.partition(marker)
        return head

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)


def frame(opcode: int, payload: bytes) -> bytes:
    """One final, masked client frame."""
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    return head + mask + _masked(payload, mask)


def _masked(data: bytes, mask: bytes) -> bytes:
    """data XOR the repeated 4-byte mask (RFC 6455 5.3), as one big-integer operation."""
    if not data:
        return b""
    n = len(data)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")


def read_message(sock: _Socket) -> tuple[int, bytes]:
    """The next whole message (fragments joined): (opcode, payload)."""
    opcode = None
    parts: list[bytes] = []
    while True:
        b1, b2 = sock.read_exact(2)
        fin, op = b1 & 0x80, b1 & 0x0F
        n = b2 & 0x7F
        if n == 126:
            n = struct.unpack("!H", sock.read_exact(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", sock.read_exact(8))[0]
        mask = sock.read_exact(4) if b2 & 0x80 else None
        data = sock.read_exact(n) if n else b""
        if mask:
            data = _masked(data, mask)
        if op >= 0x8:  # control frames stand alone, even between fragments
            return op, data
        if op != OP_CONT:
            opcode = op
        parts.append(data)
        if fin:
            return opcode if opcode is not None else OP_BINARY, b"".join(parts)


def upgrade_request(host: str, target: str, headers: dict[str, str]) -> tuple[bytes, str]:
    """The HTTP/1.1 upgrade request and its Sec-WebSocket-Key."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {target} HTTP/1.1", f"Host: {host}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13",
             f"Sec-WebSocket-Protocol: {', '.join(PROTOCOLS)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), key


def exec_over_websocket(sock: ssl.SSLSocket, host: str, target: str, headers: dict[str, str], *,
                        stdin: bytes | None, out: Callable[[bytes], None],
                        err: Callable[[bytes], None], failure: Callable[[str], None]) -> int:
    """Run an exec request on a connected TLS socket: stdin sent, output handed over; the exit code."""
    conn = _Socket(sock)
    request, _key = upgrade_request(host, target, headers)
    conn.send(request)
    head = conn.read_until(b"\r\n\r\n").decode("latin-1")
    status_line, *header_lines = head.split("\r\n")
    try:
        code = int(status_line.split()[1])
    except (IndexError, ValueError):
        raise ServerUnavailable(f"the server answered the exec upgrade with {status_line[:80]!r}") from None
    answer = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    if code != 101:
        length = int(answer.get("content-length") or 0)
        body = conn.read_exact(length) if length else b""
        raise error_of(code, body)
    protocol = answer.get("sec-websocket-protocol", "")
    if stdin is not None:
        for i in range(0, len(stdin), CHUNK):
            conn.send(frame(OP_BINARY, bytes([STDIN]) + stdin[i:i + CHUNK]))
        if protocol == PROTOCOLS[0]:
            conn.send(frame(OP_BINARY, bytes([CLOSE_CHANNEL, STDIN])))
    exit_code: int | None = None
    while True:
        try:
            opcode, payload = read_message(conn)
        except (ServerUnavailable, OSError):
            break
        if opcode == OP_CLOSE:
            try:
                conn.send(frame(OP_CLOSE, payload[:2]))
            except OSError:
                pass
            break
        if opcode == OP_PING:
            conn.send(frame(OP_PONG, payload))
            continue
        if opcode not in (OP_BINARY, OP_TEXT) or not payload:
            continue
        channel, data = payload[0], payload[1:]
        if opcode == OP_TEXT:  # a text message's first character names the channel
            channel = int(chr(payload[0])) if chr(payload[0]).isdigit() else -1
        if channel == STDOUT:
            out(data)
        elif channel == STDERR:
            err(data)
        elif channel == ERROR and data:
            try:
                status = json.loads(data)
            except ValueError:
                failure(data.decode("utf-8", "replace").strip())
                exit_code = 1
                continue
            exit_code = exit_code_of(status) if isinstance(status, dict) else 1
            if exit_code and isinstance(status, dict) and status.get("reason") != "NonZeroExitCode":
                failure(str(status.get("message") or "the command failed"))
    if exit_code is None:
        raise ServerUnavailable("the exec stream ended without the command's exit status")
    return exit_code


__all__ = ["exec_over_websocket", "frame", "read_message", "upgrade_request"]
