"""Kubernetes' remote-command channel protocol over a WebSocket (`v5.channel.k8s.io`, `v4.channel.k8s.io`).

Both ends speak it with these pure functions: the server (kctl.kubeapi.streams.exec: pods/exec,
pods/attach) and kctl's own client (kctl.apiserver.rest.channels: `kctl exec` over HTTPS). Each
message is one channel byte and its data: 0 stdin (client to server), 1 stdout, 2 stderr,
3 error (the server's last word: a v1 Status, `Success` or `Failure`; a non-zero exit is reason
`NonZeroExitCode` with the code in details.causes[0].message), 4 resize (the client's terminal size,
JSON `{"Width": W, "Height": H}`); v5 adds 255 "close": `[255, N]` half-closes channel N (the client
sends `[255, 0]` at the end of its stdin). Clients may send text messages too (the Python client
does for str data): the first character is then the channel. As kube-apiserver, the server picks
the first protocol of the client's offer that it speaks.
"""

from __future__ import annotations

import json
from typing import Any

STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE = 255
V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
#: the protocols served, best first
PROTOCOLS = (V5, V4)


def offered(header: str | None) -> list[str]:
    """The protocols a `Sec-WebSocket-Protocol` header offers, in the client's order."""
    return [p.strip() for p in (header or "").split(",") if p.strip()]


def negotiate(header: str | None) -> str | None:
    """The protocol to answer: the first of the client's offer that is served (None: none is)."""
    return next((p for p in offered(header) if p in PROTOCOLS), None)


def encode(channel: int, data: bytes) -> bytes:
    """One binary message of `data` on `channel`."""
    return bytes((channel,)) + data


def decode(data: bytes | str) -> tuple[int, bytes] | None:
    """(channel, data) of a client's message (binary, or text whose first character is the channel); None
    for an empty one."""
    if isinstance(data, str):
        if not data:
            return None
        return ord(data[0]) & 0xFF, data[1:].encode()
    if not data:
        return None
    return data[0], bytes(data[1:])


def resize_of(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a resize message, None when it is not one."""
    try:
        size = json.loads(data)
        width, height = int(size.get("Width", 0)), int(size.get("Height", 0))
    except (ValueError, TypeError, AttributeError):
        return None
    return (width, height) if width > 0 and height > 0 else None


def success() -> dict[str, Any]:
    """The error channel's Status when the command (or attach) ended well."""
    return {"metadata": {}, "status": "Success"}


def exit_status(code: int, argv: list[str]) -> dict[str, Any]:
    """The error channel's Status of a command that exited with `code` (not 0), as the kubelet words it."""
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: command '{' '.join(argv)}' exited with {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def exit_code_of(status: dict) -> int:
    """The exit code an error channel's Status says (0 for Success; 1 for any other failure)."""
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        for cause in (status.get("details") or {}).get("causes") or ():
            if cause.get("reason") == "ExitCode":
                try:
                    return int(cause.get("message"))
                except (TypeError, ValueError):
                    break
    return 1


def failure(message: str) -> dict[str, Any]:
    """The error channel's Status of a stream that failed on the server (Kubernetes' InternalError)."""
    return {"metadata": {}, "status": "Failure", "message": f"Internal error occurred: {message}",
            "reason": "InternalError", "details": {"causes": [{"message": message}]}, "code": 500}


def status_message(status: dict[str, Any]) -> bytes:
    """A Status as the error channel carries it (compact JSON)."""
    return encode(ERROR, json.dumps(status, separators=(",", ":")).encode())


__all__ = ["CLOSE", "ERROR", "PROTOCOLS", "RESIZE", "STDERR", "STDIN", "STDOUT", "V4", "V5", "decode", "encode",
           "exit_code_of", "exit_status", "failure", "negotiate", "offered", "resize_of", "status_message", "success"]
