"""Exec, logs and container events of containers on Podman.

A part of PodmanRuntime (kctl.runtime.podman.runtime): exec speaks the hijacked stream
itself (kctl.runtime.podman.execstream) so that stdin, exit status and a deadline work,
also through the SSH tunnel; logs are the service's multiplexed frames; events are a
stream of their own (kctl.runtime.podman.events) that close() ends from any thread.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any, Iterator

from podman import errors as podman_errors

from kctl.runtime.interface import ExecResult, RuntimeError_
from kctl.runtime.podman.connection import ServiceCalls
from kctl.runtime.podman.errors import calling
from kctl.runtime.podman.execstream import exec_stream

EXEC_EXIT_WAIT = 2.0             # seconds to wait for an exec session to record its exit code


class ExecAndLogs(ServiceCalls):
    """The exec, logs and events calls of PodmanRuntime."""

    def exec(self, container_id: str, argv: list[str], *, stdin: bytes | None = None,
             timeout: float | None = None) -> ExecResult:
        """Run argv in the running container; RuntimeError_ when it outlives `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        what = f"exec {argv[0] if argv else ''} in container {container_id[:12]}"
        with calling(what):
            exec_id = self._post(f"/containers/{container_id}/exec", body={
                "AttachStdin": stdin is not None, "AttachStdout": True, "AttachStderr": True,
                "Cmd": list(argv), "Tty": False}).json()["Id"]
            try:
                stdout, stderr = exec_stream(self._connection.socket_path(), self._api().path_prefix,
                                             exec_id, stdin=stdin, deadline=deadline)
            except (TimeoutError, socket.timeout):
                raise RuntimeError_(f"{what}: timed out after {timeout:g} s") from None
            return ExecResult(exit_code=self._exec_exit_code(exec_id), stdout=stdout, stderr=stderr)

    def _exec_exit_code(self, exec_id: str) -> int:
        deadline = time.monotonic() + EXEC_EXIT_WAIT
        while True:
            try:
                session = self._get(f"/exec/{exec_id}/json")
            except podman_errors.NotFound as error:
                raise RuntimeError_(f"exec session {exec_id[:12]} is gone: exit code lost") from error
            if not session.get("Running") or time.monotonic() > deadline:
                return int(session.get("ExitCode", -1) if session.get("ExitCode") is not None else -1)
            time.sleep(0.02)

    def logs(self, container_id: str, *, follow: bool = False, tail: int | None = None,
             since: float | None = None, timestamps: bool = False) -> Iterator[bytes]:
        """The container's output (stdout and stderr), one chunk (a line) at a time."""
        params: dict[str, Any] = {"stdout": True, "stderr": True, "follow": follow,
                                  "timestamps": timestamps}
        if tail is not None:
            params["tail"] = str(max(0, tail))
        if since is not None:
            params["since"] = f"{since:.9f}"
        what = f"logs of container {container_id[:12]}"
        with calling(what):
            response = self._api().get(f"/containers/{container_id}/logs", params=params, stream=True,
                                       timeout=(self._timeout, None if follow else self._timeout))
            response.raise_for_status()
        return self._log_frames(response, what)

    @staticmethod
    def _log_frames(response: Any, what: str) -> Iterator[bytes]:
        try:
            with calling(what):
                while True:
                    header = response.raw.read(8)
                    if len(header) < 8:
                        return
                    _, size = struct.unpack(">BxxxL", header)
                    if size:
                        yield response.raw.read(size)
        finally:
            response.close()

    # -- events

    def container_events(self, labels: dict[str, str], *, events: tuple[str, ...] = ()) -> Any:
        """Podman's container events from now on, over the runtime's socket or SSH tunnel
        (kctl.runtime.podman.events: a stream that close() ends from any thread)."""
        from kctl.runtime.podman.events import open_event_stream

        with calling("container events"):
            return open_event_stream(self._connection.socket_path(), self._api().path_prefix,
                                     labels=labels, events=events, timeout=self._timeout)



__all__ = ["ExecAndLogs"]
