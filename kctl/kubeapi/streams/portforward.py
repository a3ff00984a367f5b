"""pods/portforward over the HTTPS API: kubectl's SPDY streams (tunnelled in a WebSocket, or a raw upgrade) and
the WebSocket channel protocol, each connection carried to the pod's port.

kctl.kubeapi.streams.handle calls `handle(request, ctx, info, user)` for `.../pods/NAME/portforward`. Three
ways in, as kube-apiserver + kubelet serve them:

* kubectl 1.31+: a WebSocket with subprotocol `SPDY/3.1+portforward.k8s.io` whose binary messages carry a
  SPDY/3.1 byte stream (KEP-4006 tunnelling); kctl.kubeapi.streams.spdy is the session.
* older kubectl (and kubectl's fallback): HTTP/1.1 `Upgrade: SPDY/3.1`, `X-Stream-Protocol-Version:
  portforward.k8s.io`, answered 101 and followed by the same SPDY stream on the connection itself.
* the WebSocket channel protocol (`v4.channel.k8s.io`, `portforward.k8s.io`, `v4.base64.channel.k8s.io`; the
  official Python client): the ports come in the query (`ports=80,8080`), port i has channel 2i for data and
  2i+1 for errors, and the server's first message on each channel is the port (2 bytes, little-endian).

Over SPDY each forwarded connection is a pair of streams the client opens, with headers `streamType`
(error|data), `port` and `requestID`; once both came, kctl connects to the pod's port the way `kctl
port-forward` does (kctl.ops.portforward.route_for: straight to the pod's IP from this host, or `ssh -W`
through the pod's Node) and copies both ways, passing on half-closes. A failure is written on the error
stream as kubelet words it (`error forwarding port 80 to pod web, uid ...: dial tcp 10.88.0.5:80: connect:
connection refused`); kubectl prints it after "an error occurred forwarding 8080 -> 80: ".
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from aiohttp import WSMsgType, web

from kctl.kubeapi.streams import spdy

if TYPE_CHECKING:
    from kctl.kubeapi.app import ServerContext
    from kctl.kubeapi.requestinfo import RequestInfo
    from kctl.ops.portrelay import Route

log = logging.getLogger("kctl.kubeapi.portforward")

#: the WebSocket subprotocol of SPDY tunnelled in a WebSocket (kubectl 1.31+)
SPDY_TUNNEL_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
#: the port-forward stream protocol (SPDY's X-Stream-Protocol-Version; also a WebSocket subprotocol)
PORTFORWARD_PROTOCOL = "portforward.k8s.io"
V4_BINARY = "v4.channel.k8s.io"
V4_BASE64 = "v4.base64.channel.k8s.io"
#: the WebSocket subprotocols served, best first (the client's first that is here wins)
WEBSOCKET_PROTOCOLS = (SPDY_TUNNEL_PROTOCOL, V4_BINARY, PORTFORWARD_PROTOCOL, V4_BASE64)
#: bytes read from a pod at once
CHUNK = 256 * 1024
#: seconds to connect to a pod's port
CONNECT_TIMEOUT = 10.0
#: seconds the second stream of a pair may take to come (kubelet's streamCreationTimeout)
STREAM_CREATION_TIMEOUT = 30.0
#: seconds the client's side of a connection may go on after the pod's side ended (kubelet/CRI: 1 s)
END_GRACE = 1.0
#: bytes from the client queued for one pod before the session stops reading (back-pressure)
MAX_QUEUED = 8 * 1024 * 1024
#: the largest WebSocket message taken
MAX_MESSAGE = 32 * 1024 * 1024


class ForwardError(Exception):
    """A connection to the pod's port could not be opened; the message is the reason, in Go's words."""


# -- reaching the pod ---------------------------------------------------------------------------

class Upstream:
    """One connection to the pod's port: an asyncio stream pair (TCP, or an `ssh -W` process's pipes)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None, *,
                 process: asyncio.subprocess.Process | None = None, via: str = "") -> None:
        self.reader, self.writer, self.process, self.via = reader, writer, process, via
        self.received = False

    async def read(self) -> bytes:
        """Some bytes from the pod; b"" at its end of stream (or when the connection broke)."""
        try:
            data = await self.reader.read(CHUNK)
        except (OSError, asyncio.IncompleteReadError):
            return b""
        self.received = self.received or bool(data)
        return data

    async def failure(self) -> str:
        """Why an `ssh -W` connection failed, in ssh's words (`ssh HOST:PORT: channel 0: open failed: connect
        failed: Connection refused`); "" when it did not (and always for a direct connection)."""
        process = self.process
        if process is None or self.received:
            return ""
        try:
            await asyncio.wait_for(process.wait(), CONNECT_TIMEOUT)
        except asyncio.TimeoutError:
            return ""
        said = (await process.stderr.read()).decode(errors="replace") if process.stderr is not None else ""
        if process.returncode in (0, -9, -15) and "open failed" not in said:
            return ""
        from kctl.ssh import ssh_verdict

        said = "\n".join(line for line in said.splitlines() if "stdio forwarding failed" not in line)
        return f"ssh {self.via}: {ssh_verdict(said) or f'exit status {process.returncode}'}"

    async def write(self, data: bytes) -> None:
        """Send all of data to the pod (OSError when it is gone)."""
        if self.writer is None:
            raise ConnectionResetError("closed")
        self.writer.write(data)
        await self.writer.drain()

    def end_writing(self) -> None:
        """Tell the pod no more bytes come (half-close)."""
        if self.writer is None:
            return
        with contextlib.suppress(OSError, RuntimeError, AttributeError):
            if self.writer.can_write_eof():
                self.writer.write_eof()
            else:
                self.writer.close()

    async def close(self) -> None:
        """Release the connection (and end its ssh process)."""
        if self.writer is not None:
            with contextlib.suppress(OSError, RuntimeError):
                self.writer.close()
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 2)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                await self.process.wait()


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _go_error(exc: OSError) -> str:
    """An OSError as Go words it (`connection refused`: the errno's text, not asyncio's "Connect call failed")."""
    import os

    text = (os.strerror(exc.errno) if exc.errno else exc.strerror or str(exc)) or type(exc).__name__
    return text[:1].lower() + text[1:]


async def open_route(route: Route) -> Upstream:
    """A connection along the route (kctl.ops.portrelay.Route); ForwardError with Go's words when it fails."""
    if route.ssh is None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(route.host, route.port), CONNECT_TIMEOUT)
        except asyncio.TimeoutError:
            raise ForwardError(f"dial tcp {_hostport(route.host, route.port)}: i/o timeout") from None
        except OSError as exc:
            raise ForwardError(f"dial tcp {_hostport(route.host, route.port)}: connect: {_go_error(exc)}") from None
        return Upstream(reader, writer)
    try:
        process = await asyncio.create_subprocess_exec(
            *route.ssh, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise ForwardError(f"ssh {route.via}: {_go_error(exc)}") from None
    assert process.stdout is not None and process.stdin is not None
    return Upstream(process.stdout, process.stdin, process=process, via=route.via or "")  # type: ignore[arg-type]


@dataclass(frozen=True)
class PodTarget:
    """The pod being forwarded to and how each of its ports is reached."""

    name: str
    namespace: str
    uid: str
    route: Callable[[int], Route]

    def failure(self, port: int, reason: str) -> str:
        """The error stream's text, as kubelet words it."""
        return f"error forwarding port {port} to pod {self.name}, uid {self.uid}: {reason}"

    async def dial(self, port: int) -> Upstream:
        """A connection to the pod's port; ForwardError with kubelet's message when it cannot be made."""
        from kctl.ops.portforward import PortForwardError

        try:
            route = self.route(port)
        except PortForwardError as exc:
            raise ForwardError(self.failure(port, str(exc))) from None
        try:
            return await open_route(route)
        except ForwardError as exc:
            raise ForwardError(self.failure(port, str(exc))) from None


def target_of(ctx: ServerContext, namespace: str, name: str) -> PodTarget:
    """The pod `namespace/name` and its routes (blocking: API calls); APIError NotFound, BadRequest without a
    Node (kube-apiserver's `pod web does not have a host assigned`)."""
    from kctl.machinery.errors import BadRequest
    from kctl.ops import portforward as pf

    api = ctx.api
    pod = api.get(api.resource("pods"), name, namespace=namespace)
    node_name = (pod.get("spec") or {}).get("nodeName") or ""
    if not node_name:
        raise BadRequest(f"pod {name} does not have a host assigned")
    node = api.find(api.resource("nodes"), node_name)
    reach = pf.Reach(known_hosts=_known_hosts(ctx))
    return PodTarget(name, namespace, str((pod.get("metadata") or {}).get("uid") or ""),
                     lambda port: pf.route_for(pod, node, port, reach))


def _known_hosts(ctx: ServerContext) -> str | None:
    """kctl's known_hosts beside the store (the PKI's folder is `<store>.pki`, beside it)."""
    folder = getattr(ctx.pki, "folder", None)
    return str(folder.parent / "known_hosts") if folder is not None else None


# -- the entry point ----------------------------------------------------------------------------

async def handle(request: web.Request, ctx: ServerContext, info: RequestInfo, user: Any) -> web.StreamResponse:
    """Serve one pods/portforward request (any of the three ways in)."""
    from kctl.kubeapi import status

    target = await ctx.run(target_of, ctx, info.namespace, info.name)
    upgrade = request.headers.get("Upgrade", "").strip().lower()
    if upgrade == "websocket":
        offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
        chosen = next((p for p in offered if p in WEBSOCKET_PROTOCOLS), None)
        if chosen == SPDY_TUNNEL_PROTOCOL:
            return await _serve_spdy_websocket(request, target)
        if offered and chosen is None:
            return status.status_response(status.failure(
                400, f"unable to upgrade: none of the requested protocols {offered} is supported "
                     f"(supported: {list(WEBSOCKET_PROTOCOLS)})"))
        try:
            ports = ports_of(request.query)
        except ValueError as exc:
            return status.status_response(status.failure(400, str(exc)))
        return await _serve_channels(request, target, ports, chosen or V4_BINARY)
    if upgrade.startswith("spdy/3.1"):
        versions = [v.strip() for v in request.headers.getall("X-Stream-Protocol-Version", [])
                    for v in v.split(",") if v.strip()]
        if versions and PORTFORWARD_PROTOCOL not in versions:
            return status.status_response(status.failure(
                403, f"unable to upgrade: unable to negotiate protocol: client supports {versions}, server "
                     f"accepts {[PORTFORWARD_PROTOCOL]}"))
        return await _serve_spdy_upgrade(request, target, negotiated=bool(versions))
    return status.status_response(status.failure(400, "Upgrade request required"))


def ports_of(query: Any) -> list[int]:
    """The ports of a WebSocket port-forward (`ports`, as kube-apiserver takes them, or kubelet's `port`; each
    comma-separated and/or repeated); ValueError with kubelet's words."""
    given = [*query.getall("ports", []), *query.getall("port", [])]
    if not given:
        raise ValueError('query parameter "port" is required')
    ports = []
    for text in given:
        if not text:
            raise ValueError('query parameter "port" cannot be empty')
        for part in text.split(","):
            if not part.isascii() or not part.isdigit() or int(part) > 65535:
                why = "value out of range" if part.isascii() and part.isdigit() else "invalid syntax"
                raise ValueError(f'unable to parse "{text}" as a port: strconv.ParseUint: parsing "{part}": {why}')
            if int(part) < 1:
                raise ValueError(f'port "{text}" must be > 0')
            ports.append(int(part))
    return ports


# -- SPDY: streams in pairs ---------------------------------------------------------------------

@dataclass
class _Pair:
    """One forwarded connection: its error and data streams, and the pod's side once connected."""

    request_id: str
    port: int = 0
    port_text: str = ""
    error_stream: int | None = None
    data_stream: int | None = None
    incoming: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    queued: int = 0
    drained: asyncio.Event = field(default_factory=asyncio.Event)
    data_reset: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    upstream: Upstream | None = None


class SPDYForwarder:
    """One SPDY connection's port-forwards: frames from the client in (`receive`), frames out through `send`."""

    def __init__(self, target: PodTarget, send: Callable[[bytes], Awaitable[None]]) -> None:
        self.target = target
        self.session = spdy.Session(server=True)
        self._send = send
        self._send_lock = asyncio.Lock()
        self._pairs: dict[str, _Pair] = {}
        self._by_stream: dict[int, _Pair] = {}
        self._windows: dict[int, asyncio.Event] = {}
        self.finished = asyncio.Event()

    async def flush(self) -> None:
        """Write what the session queued (in order, one writer at a time)."""
        async with self._send_lock:
            data = self.session.data_to_send()
            if data:
                await self._send(data)

    async def receive(self, data: bytes) -> None:
        """Bytes from the client: handle their events; spdy.SPDYError ends the connection (GOAWAY sent)."""
        try:
            events = self.session.receive(data)
        except spdy.SPDYError:
            await self.flush()
            raise
        for event in events:
            self._on_event(event)
        await self.flush()
        for pair in list(self._pairs.values()):
            if pair.queued > MAX_QUEUED:  # the pod reads slower than the client sends: wait for it
                pair.drained.clear()
                await pair.drained.wait()

    def _on_event(self, event: spdy.Event) -> None:
        if isinstance(event, spdy.StreamOpened):
            self._on_stream(event)
        elif isinstance(event, spdy.DataReceived):
            pair = self._by_stream.get(event.stream_id)
            if pair is not None and event.stream_id == pair.data_stream:
                pair.incoming.put_nowait(event.data)
                pair.queued += len(event.data)
            else:  # the client writes nothing on the error stream: consumed at once
                self.session.consumed(event.stream_id, len(event.data))
        elif isinstance(event, spdy.StreamEnded):
            pair = self._by_stream.get(event.stream_id)
            if pair is not None and event.stream_id == pair.data_stream:
                pair.incoming.put_nowait(None)
        elif isinstance(event, spdy.StreamReset):
            pair = self._by_stream.get(event.stream_id)
            if pair is not None and event.stream_id == pair.data_stream:
                # kubectl 1.32 resets the data stream once the pod's side ended (or its local side failed), then
                # waits for the error stream: the copying stops, the error stream still gets its say
                pair.data_reset.set()
                pair.incoming.put_nowait(None)
            elif pair is not None:
                self._abort(pair)
        elif isinstance(event, spdy.WindowOpened):
            for stream_id, opened in list(self._windows.items()):
                if event.stream_id in (0, stream_id):
                    opened.set()
        elif isinstance(event, spdy.GoneAway):
            self.finished.set()

    def _on_stream(self, event: spdy.StreamOpened) -> None:
        headers = event.headers
        stream_type = spdy.header_value(headers, "streamType")
        port_text = spdy.header_value(headers, "port")
        if stream_type not in ("error", "data"):
            self.session.reset(event.stream_id, spdy.PROTOCOL_ERROR)
            return
        self.session.reply(event.stream_id)
        request_id = spdy.header_value(headers, "requestID")
        if not request_id:  # an old client: the pair's streams are consecutive (kubelet's best effort)
            request_id = str(event.stream_id if stream_type == "error" else event.stream_id - 2)
        pair = self._pairs.get(request_id)
        if pair is None:
            pair = self._pairs[request_id] = _Pair(request_id)
            pair.timer = asyncio.get_running_loop().call_later(STREAM_CREATION_TIMEOUT, self._expire, pair)
        if (pair.error_stream if stream_type == "error" else pair.data_stream) is not None:
            self.session.reset(event.stream_id, spdy.PROTOCOL_ERROR)
            return
        if stream_type == "error":
            pair.error_stream = event.stream_id
        else:
            pair.data_stream = event.stream_id
        self._by_stream[event.stream_id] = pair
        pair.port_text = port_text
        pair.port = int(port_text) if port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536 \
            else -1
        if pair.error_stream is not None and pair.data_stream is not None:
            if pair.timer is not None:
                pair.timer.cancel()
            pair.task = asyncio.ensure_future(self._forward(pair))

    def _expire(self, pair: _Pair) -> None:
        """The second stream of a pair never came: reset the first (kubelet's "timed out waiting for streams")."""
        if pair.task is None and self._pairs.get(pair.request_id) is pair:
            for stream_id in (pair.error_stream, pair.data_stream):
                if stream_id is not None:
                    self.session.reset(stream_id, spdy.CANCEL)
            self._forget(pair)
            pair.drained.set()
            asyncio.ensure_future(self.flush())

    def _forget(self, pair: _Pair) -> None:
        self._pairs.pop(pair.request_id, None)
        for stream_id in (pair.error_stream, pair.data_stream):
            if stream_id is not None:
                self._by_stream.pop(stream_id, None)
                self._windows.pop(stream_id, None)

    def _abort(self, pair: _Pair) -> None:
        if pair.task is not None:
            pair.task.cancel()
        else:
            self._forget(pair)
            pair.drained.set()

    async def _forward(self, pair: _Pair) -> None:
        """Connect to the pod's port and copy both ways; kubelet's message on the error stream on failure."""
        assert pair.error_stream is not None and pair.data_stream is not None
        sender: asyncio.Future[None] | None = None
        receiver: asyncio.Future[None] | None = None
        try:
            if pair.port < 0:
                raise ForwardError(f'error parsing port: unable to parse "{pair.port_text}" as a port')
            pair.upstream = await self.target.dial(pair.port)
            sender = asyncio.ensure_future(self._to_pod(pair))
            receiver = asyncio.ensure_future(self._from_pod(pair))
            reset = asyncio.ensure_future(pair.data_reset.wait())
            await asyncio.wait({receiver, reset}, return_when=asyncio.FIRST_COMPLETED)
            reset.cancel()
            pod_ended = receiver.done() and not receiver.cancelled() and receiver.exception() is None
            if not pod_ended:  # the client reset the data stream first: the copying ends here
                receiver.cancel()
            try:  # the pod ended its side: the client's side may finish briefly
                await asyncio.wait_for(asyncio.shield(sender), END_GRACE)
            except asyncio.TimeoutError:
                sender.cancel()
            reason = await pair.upstream.failure() if pod_ended else ""
            if reason:
                raise ForwardError(self.target.failure(pair.port, reason))
            self.session.end_stream(pair.error_stream)
        except ForwardError as exc:
            self.session.end_stream(pair.data_stream)
            self.session.send_data(pair.error_stream, str(exc).encode(), fin=True)
        except asyncio.CancelledError:
            self.session.reset(pair.data_stream, spdy.CANCEL)
            self.session.reset(pair.error_stream, spdy.CANCEL)
            raise
        except (OSError, RuntimeError) as exc:  # the client's connection broke: this forward ends quietly
            log.debug("port-forward %s/%s port %s: %s", self.target.namespace, self.target.name, pair.port, exc)
            self.session.reset(pair.data_stream, spdy.CANCEL)
            self.session.reset(pair.error_stream, spdy.CANCEL)
        finally:
            for task in (sender, receiver):
                if task is not None and not task.done():
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            if pair.upstream is not None:
                await pair.upstream.close()
            self._forget(pair)
            pair.drained.set()
            with contextlib.suppress(Exception):
                await self.flush()

    async def _to_pod(self, pair: _Pair) -> None:
        """Client -> pod, then the pod is told the client is done sending."""
        assert pair.upstream is not None and pair.data_stream is not None
        try:
            while (data := await pair.incoming.get()) is not None:
                pair.queued -= len(data)
                if pair.queued <= MAX_QUEUED // 2:
                    pair.drained.set()
                await pair.upstream.write(data)
                self.session.consumed(pair.data_stream, len(data))
                await self.flush()
        except OSError:
            pass
        finally:
            pair.upstream.end_writing()

    async def _from_pod(self, pair: _Pair) -> None:
        """Pod -> client (within the client's windows if it keeps them), then a FIN on the data stream."""
        assert pair.upstream is not None and pair.data_stream is not None
        stream_id = pair.data_stream
        while data := await pair.upstream.read():
            while data:
                taken = self.session.send_data(stream_id, data)
                await self.flush()
                if stream_id not in self.session.open_streams:
                    return  # reset by the client
                data = data[taken:]
                if data:
                    opened = self._windows.setdefault(stream_id, asyncio.Event())
                    opened.clear()
                    await opened.wait()
        self.session.end_stream(stream_id)
        await self.flush()

    async def close(self) -> None:
        """End every forward (the connection is gone)."""
        tasks = [p.task for p in self._pairs.values() if p.task is not None]
        for pair in list(self._pairs.values()):
            if pair.timer is not None:
                pair.timer.cancel()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def _serve_spdy_websocket(request: web.Request, target: PodTarget) -> web.StreamResponse:
    """SPDY/3.1 in a WebSocket's binary messages (kubectl 1.31+)."""
    ws = web.WebSocketResponse(protocols=(SPDY_TUNNEL_PROTOCOL,), max_msg_size=MAX_MESSAGE, autoping=True)
    await ws.prepare(request)
    forwarder = SPDYForwarder(target, ws.send_bytes)
    reader = asyncio.ensure_future(_pump_websocket(ws, forwarder))
    finished = asyncio.ensure_future(forwarder.finished.wait())
    try:
        await asyncio.wait({reader, finished}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        reader.cancel()
        finished.cancel()
        await forwarder.close()
        with contextlib.suppress(Exception):
            await ws.close()
    return ws


async def _pump_websocket(ws: web.WebSocketResponse, forwarder: SPDYForwarder) -> None:
    async for message in ws:
        if message.type != WSMsgType.BINARY:
            break
        try:
            await forwarder.receive(message.data)
        except spdy.SPDYError as exc:
            log.info("port-forward to %s/%s: %s", forwarder.target.namespace, forwarder.target.name, exc)
            break


class _RawParser:
    """aiohttp's hook for an upgraded connection's bytes (as its WebSocket reader): they go to a queue."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.queue.put_nowait(bytes(data))
        return False, b""

    def feed_eof(self) -> None:
        self.queue.put_nowait(None)


async def _serve_spdy_upgrade(request: web.Request, target: PodTarget, *, negotiated: bool) -> web.StreamResponse:
    """HTTP/1.1 `Upgrade: SPDY/3.1`: 101, then SPDY on the connection itself."""
    protocol, transport = request.protocol, request.transport
    if transport is None:
        raise ConnectionResetError("connection lost")
    response = web.StreamResponse(status=101, headers={"Connection": "Upgrade", "Upgrade": "SPDY/3.1"})
    if negotiated:
        response.headers["X-Stream-Protocol-Version"] = PORTFORWARD_PROTOCOL
    response.force_close()
    parser = _RawParser()
    await response.prepare(request)
    protocol.set_parser(parser)  # what WebSocketResponse does: the connection's next bytes come here
    protocol.keep_alive(False)

    async def send(data: bytes) -> None:
        if transport.is_closing():
            raise ConnectionResetError("connection closed")
        await response.write(data)  # raw bytes (a 101 has no body framing), waiting when the buffer is full

    forwarder = SPDYForwarder(target, send)
    finished = asyncio.ensure_future(forwarder.finished.wait())
    try:
        while True:
            getter = asyncio.ensure_future(parser.queue.get())
            await asyncio.wait({getter, finished}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()
                break
            data = getter.result()
            if data is None:
                break
            try:
                await forwarder.receive(data)
            except spdy.SPDYError:
                break
    except ConnectionResetError:
        pass
    finally:
        finished.cancel()
        await forwarder.close()
        transport.close()
    return response


# -- the WebSocket channel protocol ---------------------------------------------------------------

async def _serve_channels(request: web.Request, target: PodTarget, ports: list[int],
                          protocol: str) -> web.StreamResponse:
    """Port i: channel 2i data, 2i+1 errors; the first message of each channel is its port (little-endian)."""
    ws = web.WebSocketResponse(protocols=WEBSOCKET_PROTOCOLS[1:], max_msg_size=MAX_MESSAGE, autoping=True)
    await ws.prepare(request)
    text = (ws.ws_protocol or protocol) == V4_BASE64
    lock = asyncio.Lock()

    async def send(channel: int, data: bytes) -> None:
        async with lock:
            if text:
                await ws.send_str(chr(ord("0") + channel) + base64.b64encode(data).decode())
            else:
                await ws.send_bytes(bytes((channel,)) + data)

    for index, port in enumerate(ports):
        await send(2 * index, struct.pack("<H", port))
        await send(2 * index + 1, struct.pack("<H", port))
    queues: list[asyncio.Queue[bytes | None]] = [asyncio.Queue() for _ in ports]
    forwards = [asyncio.ensure_future(_forward_channel(target, port, index, queues[index], send))
                for index, port in enumerate(ports)]
    reader = asyncio.ensure_future(_read_channels(ws, queues, text))
    try:
        await asyncio.wait({reader, asyncio.gather(*forwards, return_exceptions=True)},
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        reader.cancel()
        for task in forwards:
            task.cancel()
        await asyncio.gather(*forwards, return_exceptions=True)
        with contextlib.suppress(Exception):
            await ws.close()
    return ws


async def _read_channels(ws: web.WebSocketResponse, queues: list[asyncio.Queue[bytes | None]], text: bool) -> None:
    """Client messages to each port's queue (data channels only; the error channels are the server's)."""
    try:
        async for message in ws:
            if message.type == WSMsgType.BINARY:
                data: bytes = message.data
            elif message.type == WSMsgType.TEXT and message.data:
                try:
                    data = bytes((ord(message.data[0]) - ord("0"),)) + base64.b64decode(message.data[1:])
                except (binascii.Error, ValueError):
                    continue
            else:
                break
            if not data or data[0] % 2 or data[0] // 2 >= len(queues):
                continue
            if len(data) > 1:
                queues[data[0] // 2].put_nowait(data[1:])
    finally:
        for queue in queues:
            queue.put_nowait(None)


async def _forward_channel(target: PodTarget, port: int, index: int, incoming: asyncio.Queue[bytes | None],
                           send: Callable[[int, bytes], Awaitable[None]]) -> None:
    """One port of the channel protocol: connect, copy both ways until the pod's side ends."""
    try:
        upstream = await target.dial(port)
    except ForwardError as exc:
        await send(2 * index + 1, str(exc).encode())
        return

    async def to_pod() -> None:
        try:
            while (data := await incoming.get()) is not None:
                await upstream.write(data)
        except OSError:
            pass
        finally:
            upstream.end_writing()

    sender = asyncio.ensure_future(to_pod())
    try:
        while data := await upstream.read():
            await send(2 * index, data)
        try:
            await asyncio.wait_for(asyncio.shield(sender), END_GRACE)
        except asyncio.TimeoutError:
            pass
        reason = await upstream.failure()
        if reason:
            await send(2 * index + 1, target.failure(port, reason).encode())
    finally:
        sender.cancel()
        await upstream.close()


__all__ = ["ForwardError", "PORTFORWARD_PROTOCOL", "PodTarget", "SPDYForwarder", "SPDY_TUNNEL_PROTOCOL",
           "Upstream", "WEBSOCKET_PROTOCOLS", "handle", "open_route", "ports_of", "target_of"]
