"""`kctl logs` and `kctl exec` when the command line selects a Kubernetes API over HTTPS.

kctl.cli.logs calls `logs` / `exec_` instead of reaching the node's Podman itself when
`connect.current().https`: the API server does that, behind pods/NAME/log (a streamed GET) and
pods/NAME/exec (a WebSocket, kctl.apiserver.rest.channels), as kubectl asks it. The server's
refusals (a pod not scheduled, a container waiting to start) come back as Status errors, printed
by the CLI's edge as kubectl prints them.
"""

from __future__ import annotations

import functools
import sys
from typing import Callable, TextIO

from kctl.cli import connect


def write_bytes(stream: TextIO, data: bytes) -> None:
    """Write a container's bytes to a text stream as they are (through its binary buffer when it has one)."""
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        stream.flush()
        buffer.write(data)
        buffer.flush()
    else:
        stream.write(data.decode("utf-8", "replace"))
        stream.flush()


def _out(stream: TextIO) -> Callable[[bytes], None]:
    return functools.partial(write_bytes, stream)


def logs(pod: str, *, namespace: str | None, container: str | None, follow: bool, tail: int,
         since_seconds: float | None, previous: bool, timestamps: bool) -> None:
    """Write a container's log from pods/NAME/log to stdout (following it with `follow`)."""
    api = connect.api()
    write = _out(sys.stdout)
    since = None if since_seconds is None else max(1, int(since_seconds + 0.999))
    for chunk in api.pod_logs(connect.namespace_arg(namespace), pod, container=container, follow=follow,
                              tail=tail if tail >= 0 else None, since_seconds=since, previous=previous,
                              timestamps=timestamps):
        write(chunk)


def exec_(pod: str, command: list[str], *, namespace: str | None, container: str | None, stdin: bool) -> int:
    """Run a command through pods/NAME/exec: its output to stdout/stderr; its exit code."""
    api = connect.api()
    data = sys.stdin.buffer.read() if stdin else None
    return api.pod_exec(connect.namespace_arg(namespace), pod, list(command), container=container, stdin=data,
                        out=_out(sys.stdout), err=_out(sys.stderr),
                        failure=lambda message: print(f"error: {message}", file=sys.stderr))


__all__ = ["exec_", "logs"]
