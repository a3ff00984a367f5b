"""Exec, logs and container events of containers on Podman.

A part of PodmanRuntime (kctl.runtime.podman.runtime): exec speaks the hijacked stream
itself (kctl.runtime.podman.execstream) so that stdin, exit status and a deadline work,
also through the SSH tunnel; logs (kctl.runtime.podman.logstream) and events
(kctl.runtime.podman.events) are streams of their own that close() ends from any thread.
"""

from __future__ import annotations

import contextlib
import socket
import time
from typing import Any

from podman import errors as podman_errors

from kctl.runtime.interface import ExecResult, RuntimeError_
from kctl.runtime.podman.connection import ServiceCalls
from kctl.runtime.podman.errors import calling
from kctl.runtime.podman.logstream import PodmanLogStream
from kctl.runtime.podman.execstream import StreamingExec, attach_request, exec_start_request, exec_stream

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

    def exec_session(self, container_id: str, argv: list[str], *, stdin: bool = False,
                     tty: bool = False) -> StreamingExec:
        """Start argv in the running container and stream it (kctl.runtime.podman.execstream.StreamingExec)."""
        what = f"exec {argv[0] if argv else ''} in container {container_id[:12]}"
        with calling(what):
            exec_id = self._post(f"/containers/{container_id}/exec", body={
                "AttachStdin": stdin, "AttachStdout": True, "AttachStderr": True,
                "Cmd": list(argv), "Tty": tty}).json()["Id"]

            def resize(width: int, height: int) -> None:
                with contextlib.suppress(Exception):
                    self._post(f"/exec/{exec_id}/resize", params={"h": height, "w": width})

            return StreamingExec(self._connection.socket_path(),
                                 exec_start_request(self._api().path_prefix, exec_id, tty=tty), tty=tty,
                                 timeout=self._timeout, exit_code=lambda: self._exec_exit_code(exec_id),
                                 resize=resize)

    def attach_session(self, container_id: str, *, stdin: bool = False, tty: bool = False,
                       stdin_once: bool = False) -> StreamingExec:
        """Attach to the container's main process (Podman's hijacked attach stream; Runtime.attach_session)."""
        what = f"attach to container {container_id[:12]}"

        def resize(width: int, height: int) -> None:
            with contextlib.suppress(Exception):
                self._post(f"/containers/{container_id}/resize", params={"h": height, "w": width})

        def exit_code() -> int:
            state = self.inspect_container(container_id)
            return -1 if state.state == "running" or state.exit_code is None else int(state.exit_code)

        with calling(what):
            return StreamingExec(self._connection.socket_path(),
                                 attach_request(self._api().path_prefix, container_id, stdin=stdin), tty=tty,
                                 timeout=self._timeout, exit_code=exit_code, resize=resize,
                                 half_close=stdin_once, what="attach")

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
             since: float | None = None, timestamps: bool = False) -> PodmanLogStream:
        """The container's output (stdout and stderr), one chunk (a line) at a time; close() ends it from any
        thread (kctl.runtime.podman.logstream)."""
        params: dict[str, Any] = {"stdout": True, "stderr": True, "follow": follow,
                                  "timestamps": timestamps}
        if tail is not None:
            params["tail"] = str(max(0, tail))
        if since is not None:
            params["since"] = f"{since:.9f}"
        with calling(f"logs of container {container_id[:12]}"):
            return PodmanLogStream(self._connection.socket_path(), self._api().path_prefix, container_id, params,
                                   timeout=self._timeout, follow=follow)

    # -- events

    def container_events(self, labels: dict[str, str], *, events: tuple[str, ...] = ()) -> Any:
        """Podman's container events from now on, over the runtime's socket or SSH tunnel
        (kctl.runtime.podman.events: a stream that close() ends from any thread)."""
        from kctl.runtime.podman.events import open_event_stream

        with calling("container events"):
            return open_event_stream(self._connection.socket_path(), self._api().path_prefix,
                                     labels=labels, events=events, timeout=self._timeout)



__all__ = ["ExecAndLogs"]
