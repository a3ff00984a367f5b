"""pods/exec and pods/attach over a WebSocket (`v5.channel.k8s.io`, `v4.channel.k8s.io`), as kubectl 1.30+ uses.

kctl.kubeapi.streams.handle calls `handle_exec` / `handle_attach`. Before the upgrade the request is
checked as Kubernetes checks it (a command, at least one stream, the pod, the container, a running
instance: kctl.ops.podstreams): a problem is an HTTP Status, which kubectl shows. After the upgrade:

- exec runs the command through the runtime's streaming exec (Runtime.exec_session): stdin
  messages go to the command as they come, `[255, 0]` (v5) closes its stdin, resize messages
  resize its TTY; its stdout/stderr come back on channels 1/2 as they are written (one stream with
  a TTY); when it ends the error channel carries `Success` or `NonZeroExitCode` with the exit code,
  and the server closes the socket. The client closing the socket ends the command's session.
- attach joins the container's main process (Runtime.attach_session: Podman's attach stream): its
  output from now on, stdin to it when the container spec has `stdin: true` (else stdin messages
  are dropped, as the kubelet does), v5's close of stdin closes the process's stdin only when the
  spec has `stdinOnce: true`; when the container stops, `Success` and the socket closes. The
  client leaving detaches; the container keeps running.

A plain HTTP request (no WebSocket upgrade, e.g. kubectl's SPDY fallback) is answered, after the same
checks, with 400 `Upgrade request required`, so kubectl reports the real problem when there is one.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Mapping

from aiohttp import WSMsgType, web

from kctl.machinery import remotecommand
from kctl.kubeapi.streams.pump import ThreadReader
from kctl.machinery.errors import BadRequest
from kctl.ops import podstreams
from kctl.runtime.interface import LABEL_CONTAINER

if TYPE_CHECKING:
    from kctl.kubeapi.app import ServerContext
    from kctl.kubeapi.requestinfo import RequestInfo
    from kctl.runtime.interface import ContainerState, ExecSession

#: seconds between WebSocket pings the server sends (kubectl answers; a dead peer is noticed)
HEARTBEAT = 30.0
#: largest message a client may send (stdin chunks are far smaller)
MAX_MESSAGE = 4 * 1024 * 1024


def _flag(query: Mapping[str, str], key: str, default: bool = False) -> bool:
    value = query.get(key)
    if value is None or value == "":
        return default
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise BadRequest(f'{key}: invalid boolean "{value}"')


def _streams(query: Mapping[str, str]) -> tuple[bool, bool, bool, bool]:
    """(stdin, stdout, stderr, tty) of the request, as PodExecOptions/PodAttachOptions read them."""
    stdin, stdout, stderr, tty = (_flag(query, "stdin"), _flag(query, "stdout", True), _flag(query, "stderr", True),
                                  _flag(query, "tty"))
    if not (stdin or stdout or stderr):
        raise BadRequest("you must specify at least 1 of stdin, stdout, stderr")
    return stdin, stdout, stderr, tty


def is_websocket(request: web.Request) -> bool:
    """Whether the request asks to upgrade to a WebSocket."""
    return request.headers.get("Upgrade", "").lower() == "websocket" and \
        "upgrade" in request.headers.get("Connection", "").lower()


def _upgrade_required() -> BadRequest:
    return BadRequest("Upgrade request required: kctl serves pods/exec, pods/attach over WebSocket "
                      f"({', '.join(remotecommand.PROTOCOLS)})")


async def _target(request: web.Request, ctx: ServerContext, info: RequestInfo, *,
                  verb: str) -> tuple[dict, Any, ContainerState]:
    """The pod, its node's runtime and the running instance of the container the request names."""
    from kctl.kubeapi.streams.logs import runtime_for

    pod, runtime = await ctx.run(podstreams.pod_and_runtime, ctx.api, info.name, info.namespace,
                                 runtime_for=runtime_for())
    try:
        container = request.query.get("container") or None  # none: the only one (kube-apiserver's rule)
        instance = await ctx.run(podstreams.running_instance, runtime, pod, container, verb=verb)
    except BaseException:
        await _close_runtime(runtime)
        raise
    return pod, runtime, instance


async def _close_runtime(runtime: Any) -> None:
    await asyncio.get_running_loop().run_in_executor(None, podstreams.close_runtime, runtime)


async def _open(request: web.Request) -> tuple[web.WebSocketResponse, str]:
    """Upgrade to a WebSocket speaking the best protocol both sides know."""
    protocol = remotecommand.negotiate(request.headers.get("Sec-WebSocket-Protocol"))
    if protocol is None:
        offer = ", ".join(remotecommand.offered(request.headers.get("Sec-WebSocket-Protocol"))) or "none"
        raise BadRequest(f"requested protocol(s) are not supported: [{offer}]; supports "
                         f"[{', '.join(remotecommand.PROTOCOLS)}]")
    ws = web.WebSocketResponse(protocols=(protocol,), heartbeat=HEARTBEAT, max_msg_size=MAX_MESSAGE)
    await ws.prepare(request)
    return ws, protocol


async def handle_exec(request: web.Request, ctx: ServerContext, info: RequestInfo, user: Any) -> web.StreamResponse:
    """pods/exec (module docstring)."""
    argv = request.query.getall("command", [])
    stdin, stdout, stderr, tty = _streams(request.query)
    if not argv:
        raise BadRequest("you must specify at least 1 command")
    _pod, runtime, instance = await _target(request, ctx, info, verb="exec")
    try:
        if not is_websocket(request):
            raise _upgrade_required()
        ws, _protocol = await _open(request)
        try:
            session = await ctx.run(runtime.exec_session, instance.id, list(argv), stdin=stdin, tty=tty)
        except Exception as exc:  # noqa: BLE001 - the runtime's one line goes to the client's error channel
            await _finish(ws, remotecommand.failure(_one_line(exc)))
            return ws
        try:
            await _pump(ws, session, stdout=stdout, stderr=stderr and not tty, name=f"kubeapi-exec-{info.name}")
            code = await asyncio.get_running_loop().run_in_executor(None, session.exit_code)
        finally:
            await asyncio.get_running_loop().run_in_executor(None, session.close)
        await _finish(ws, remotecommand.success() if code == 0 else remotecommand.exit_status(code, list(argv)))
        return ws
    finally:
        await _close_runtime(runtime)


async def handle_attach(request: web.Request, ctx: ServerContext, info: RequestInfo,
                        user: Any) -> web.StreamResponse:
    """pods/attach (module docstring): the main process's output from now on, and its stdin."""
    stdin, stdout, stderr, _tty = _streams(request.query)
    pod, runtime, instance = await _target(request, ctx, info, verb="attach")
    try:
        if not is_websocket(request):
            raise _upgrade_required()
        spec = podstreams.container_spec(pod, instance.labels.get(LABEL_CONTAINER, ""))
        attach_stdin = stdin and bool(spec.get("stdin"))  # a container without stdin gets none (as kubelet)
        has_tty = bool(spec.get("tty"))  # the stream's form is the container's, whatever the request says
        ws, _protocol = await _open(request)
        try:
            session = await ctx.run(runtime.attach_session, instance.id, stdin=attach_stdin, tty=has_tty,
                                    stdin_once=bool(spec.get("stdinOnce")))
        except Exception as exc:  # noqa: BLE001 - the runtime's one line goes to the client's error channel
            await _finish(ws, remotecommand.failure(_one_line(exc)))
            return ws
        try:
            await _pump(ws, session, stdout=stdout, stderr=stderr and not has_tty,
                        name=f"kubeapi-attach-{info.name}")
        finally:
            await asyncio.get_running_loop().run_in_executor(None, session.close)
        await _finish(ws, remotecommand.success())
        return ws
    finally:
        await _close_runtime(runtime)


async def _pump(ws: web.WebSocketResponse, session: ExecSession, *, stdout: bool, stderr: bool, name: str) -> None:
    """Copy the session's output to the socket and the socket's stdin/close/resize to the session, until the
    output ends (or the client leaves: the session is then closed)."""
    loop = asyncio.get_running_loop()
    reader: ThreadReader[tuple[int, bytes]] = ThreadReader(lambda: iter(session.read, None), name=name)
    receiving = asyncio.ensure_future(_input(ws, session))
    try:
        while True:
            piece = await reader.get()
            if piece is None:
                return
            stream, data = piece
            if (stream == 1 and stdout) or (stream == 2 and stderr):
                channel = remotecommand.STDOUT if stream == 1 else remotecommand.STDERR
                await ws.send_bytes(remotecommand.encode(channel, data))
    except ConnectionError:  # the client left while output was on its way
        await loop.run_in_executor(None, session.close)
    finally:
        reader.stop()
        receiving.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await receiving


async def _input(ws: web.WebSocketResponse, session: ExecSession) -> None:
    """The client's messages: stdin data, stdin's close (v5), resizes. The socket closing ends the session."""
    loop = asyncio.get_running_loop()
    async for message in ws:
        if message.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
            continue
        decoded = remotecommand.decode(message.data)
        if decoded is None:
            continue
        channel, data = decoded
        if channel == remotecommand.STDIN and data:
            await loop.run_in_executor(None, session.write, data)
        elif channel == remotecommand.CLOSE and data[:1] == bytes((remotecommand.STDIN,)):
            await loop.run_in_executor(None, session.close_stdin)
        elif channel == remotecommand.RESIZE:
            size = remotecommand.resize_of(data)
            if size is not None:
                await loop.run_in_executor(None, session.resize, *size)
    await loop.run_in_executor(None, session.close)  # the client closed the socket: end the command


async def _finish(ws: web.WebSocketResponse, status: dict) -> None:
    """Send the error channel's Status and close the socket (quietly when the client already left)."""
    with contextlib.suppress(ConnectionError, RuntimeError):
        if not ws.closed:
            await ws.send_bytes(remotecommand.status_message(status))
    with contextlib.suppress(ConnectionError, RuntimeError):
        await ws.close()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


__all__ = ["handle_attach", "handle_exec", "is_websocket"]
