"""pods/exec's channel protocol over a WebSocket, client side (kctl.apiserver.rest.channels), on a socketpair."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from kctl.apiserver.rest import channels
from kctl.machinery import remotecommand
from kctl.machinery.errors import BadRequest

WAIT = 20.0


def server_frame(opcode: int, payload: bytes) -> bytes:
    """An unmasked server frame."""
    n = len(payload)
    if n < 126:
        length = bytes([n])
    elif n < 1 << 16:
        length = bytes([126]) + n.to_bytes(2, "big")
    else:
        length = bytes([127]) + n.to_bytes(8, "big")
    return bytes([0x80 | opcode]) + length + payload


@pytest.mark.parametrize("size", [0, 5, 125, 126, 70_000], ids=["empty", "small", "125", "126", "64k+"])
def test_client_frames_are_masked_and_read_back(size):
    """A client frame (masked, any length form) reads back as its payload."""
    payload = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    a, b = socket.socketpair()
    try:
        data = channels.frame(channels.OP_BINARY, payload)
        assert data[1] & 0x80  # the mask bit
        a.sendall(data)
        assert channels.read_message(channels._Socket(b)) == (channels.OP_BINARY, payload)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("status,code", [
    ({"status": "Success"}, 0),
    ({"status": "Failure", "reason": "NonZeroExitCode",
      "details": {"causes": [{"reason": "ExitCode", "message": "42"}]}}, 42),
    ({"status": "Failure", "message": "container not found"}, 1),
], ids=["success", "exit-code", "failure"])
def test_exit_code_of_the_error_channel(status, code):
    """The error channel's Status gives the command's exit code."""
    assert remotecommand.exit_code_of(status) == code


def fake_exec_server(sock: socket.socket, *, status_line: str, got: dict) -> None:
    """Answer one upgrade: echo stdin to stdout, say hi on stderr, exit 3 (or refuse with a Status)."""
    conn = channels._Socket(sock)
    got["request"] = conn.read_until(b"\r\n\r\n").decode()
    if not status_line.startswith("HTTP/1.1 101"):
        body = json.dumps({"kind": "Status", "status": "Failure", "reason": "BadRequest", "code": 400,
                           "message": "container nope is not valid for pod p"}).encode()
        sock.sendall(f"{status_line}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        return
    sock.sendall(f"{status_line}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Protocol: {channels.PROTOCOLS[0]}\r\n\r\n".encode())
    stdin = b""
    while True:
        _op, payload = channels.read_message(conn)
        if payload[:1] == bytes([channels.CLOSE_CHANNEL]):
            break
        stdin += payload[1:]
    got["stdin"] = stdin
    sock.sendall(server_frame(channels.OP_PING, b"x"))
    sock.sendall(server_frame(channels.OP_BINARY, bytes([channels.STDOUT]) + stdin))
    sock.sendall(server_frame(channels.OP_BINARY, bytes([channels.STDERR]) + b"hi"))
    status = {"status": "Failure", "reason": "NonZeroExitCode",
              "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}
    sock.sendall(server_frame(channels.OP_BINARY, bytes([channels.ERROR]) + json.dumps(status).encode()))
    sock.sendall(server_frame(channels.OP_CLOSE, b"\x03\xe8"))


def run_exec(status_line: str, stdin: bytes | None) -> tuple[int | BaseException, dict, list, list]:
    client, server = socket.socketpair()
    client.settimeout(WAIT)  # a broken fake server fails the test instead of hanging it
    got: dict = {}
    thread = threading.Thread(target=fake_exec_server, args=(server,), kwargs={"status_line": status_line, "got": got},
                              daemon=True)
    thread.start()
    out: list[bytes] = []
    err: list[bytes] = []
    try:
        result: int | BaseException = channels.exec_over_websocket(
            client, "h:1", "/api/v1/namespaces/d/pods/p/exec?command=cat", {"Authorization": "Bearer t"},
            stdin=stdin, out=out.append, err=err.append, failure=lambda m: None)
    except BaseException as exc:  # noqa: BLE001 - returned to the test
        result = exc
    finally:
        thread.join(WAIT)
        client.close()
        server.close()
    return result, got, out, err


def test_exec_sends_stdin_reads_output_and_the_exit_code():
    """stdin goes on channel 0 then [255, 0]; stdout/stderr come back; the exit code is the error channel's."""
    code, got, out, err = run_exec("HTTP/1.1 101 Switching Protocols", b"payload" * 10_000)
    assert code == 3
    assert got["stdin"] == b"payload" * 10_000
    assert b"".join(out) == b"payload" * 10_000 and err == [b"hi"]
    request = got["request"]
    assert request.startswith("GET /api/v1/namespaces/d/pods/p/exec?command=cat HTTP/1.1")
    assert "Sec-WebSocket-Protocol: v5.channel.k8s.io, v4.channel.k8s.io" in request
    assert "Authorization: Bearer t" in request


def test_a_refused_upgrade_raises_the_status_error():
    """An answer other than 101 is the Status it carries, as its kctl error."""
    result, _, _, _ = run_exec("HTTP/1.1 400 Bad Request", None)
    assert isinstance(result, BadRequest) and result.message == "container nope is not valid for pod p"
