"""Port-forward's SPDY stream pairs (kctl.kubeapi.streams.portforward.SPDYForwarder) against a local TCP "pod"."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest
from multidict import MultiDict

from kctl.kubeapi.streams import portforward, spdy
from kctl.ops.portrelay import Route

DEADLINE = 20.0


class Client:
    """kubectl's side: a client SPDY session whose frames go to the forwarder and whose events are kept."""

    def __init__(self, forwarder_for: Callable[[Callable[[bytes], Awaitable[None]]], portforward.SPDYForwarder]):
        self.session = spdy.Session(server=False)
        self.events: list[spdy.Event] = []
        self.forwarder = forwarder_for(self._deliver)

    async def _deliver(self, data: bytes) -> None:
        self.events.extend(self.session.receive(data))

    async def flush(self) -> None:
        await self.forwarder.receive(self.session.data_to_send())

    async def open_pair(self, port: int, request_id: str | None) -> tuple[int, int]:
        """The error stream (closed for writing at once, as kubectl does) and the data stream of one connection."""
        headers = {"streamType": "error", "port": str(port)}
        if request_id is not None:
            headers["requestID"] = request_id
        error = self.session.open_stream(headers)
        self.session.end_stream(error)
        data = self.session.open_stream({**headers, "streamType": "data"})
        await self.flush()
        return error, data

    def received(self, stream_id: int) -> bytes:
        return b"".join(e.data for e in self.events if isinstance(e, spdy.DataReceived) and e.stream_id == stream_id)

    def ended(self, stream_id: int) -> bool:
        return any(isinstance(e, spdy.StreamEnded) and e.stream_id == stream_id for e in self.events)

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE
        while not condition():
            assert loop.time() < deadline, f"timed out; events: {self.events}"
            await asyncio.sleep(0.01)


async def echo_pod() -> tuple[asyncio.AbstractServer, int]:
    """A TCP server that answers every byte back upper-cased and closes after its peer's end of stream."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data.upper())
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def target(port_map: dict[int, int]) -> portforward.PodTarget:
    """A pod `web` whose port P is 127.0.0.1:port_map[P]."""
    return portforward.PodTarget("web", "default", "uid-1", lambda port: Route("127.0.0.1", port_map.get(port, port)))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("request_id", ["0", None], ids=["request-id", "old-client-without-request-id"])
def test_pair_carries_bytes_both_ways_and_ends_cleanly(request_id: str | None) -> None:
    """Both streams of a pair connect to the pod; bytes go both ways; half-closes pass; the error stream
    ends empty."""
    async def main() -> None:
        server, port = await echo_pod()
        client = Client(lambda send: portforward.SPDYForwarder(target({80: port}), send))
        try:
            error, data = await client.open_pair(80, request_id)
            client.session.send_data(data, b"hello, pod")
            await client.flush()
            await client.wait_for(lambda: client.received(data) == b"HELLO, POD")
            client.session.end_stream(data)
            await client.flush()
            await client.wait_for(lambda: client.ended(data) and client.ended(error))
            assert client.received(error) == b""
        finally:
            await client.forwarder.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_data_stream_reset_after_the_pods_end_still_ends_the_error_stream() -> None:
    """kubectl 1.32 resets the data stream once the pod's side ended: the error stream still ends cleanly
    (no RST), so kubectl learns there was no error."""
    async def main() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"bye")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        client = Client(lambda send: portforward.SPDYForwarder(
            target({80: server.sockets[0].getsockname()[1]}), send))
        try:
            error, data = await client.open_pair(80, "3")
            await client.wait_for(lambda: client.ended(data))
            client.session.reset(data, spdy.CANCEL)
            await client.flush()
            await client.wait_for(lambda: client.ended(error))
            assert client.received(data) == b"bye" and client.received(error) == b""
            assert not any(isinstance(e, spdy.StreamReset) for e in client.events)
        finally:
            await client.forwarder.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_refused_connection_is_kubelets_message_on_the_error_stream() -> None:
    """A port nobody listens on: the error stream says so in kubelet's words, then both streams end."""
    async def main() -> None:
        closed = free_port()
        client = Client(lambda send: portforward.SPDYForwarder(target({80: closed}), send))
        try:
            error, data = await client.open_pair(80, "7")
            await client.wait_for(lambda: client.ended(error) and client.ended(data))
            assert client.received(error).decode() == (
                f"error forwarding port 80 to pod web, uid uid-1: dial tcp 127.0.0.1:{closed}: connect: "
                f"connection refused")
        finally:
            await client.forwarder.close()

    asyncio.run(main())


def test_concurrent_pairs_on_one_connection_stay_apart() -> None:
    """Three connections at once on one SPDY session each get their own bytes back."""
    async def main() -> None:
        server, port = await echo_pod()
        client = Client(lambda send: portforward.SPDYForwarder(target({80: port}), send))
        try:
            pairs = [await client.open_pair(80, str(n)) for n in range(3)]
            for n, (_, data) in enumerate(pairs):
                client.session.send_data(data, f"connection {n} ".encode() * 1000, fin=True)
            await client.flush()
            for n, (error, data) in enumerate(pairs):
                await client.wait_for(lambda d=data, e=error: client.ended(d) and client.ended(e))
                assert client.received(data) == f"CONNECTION {n} ".encode() * 1000
        finally:
            await client.forwarder.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_large_transfer_from_the_pod_needs_no_window_updates() -> None:
    """Megabytes from the pod reach a client that never sends WINDOW_UPDATE (kubectl's spdystream)."""
    async def main() -> None:
        payload = bytes(range(256)) * 8192  # 2 MiB

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(payload)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        client = Client(lambda send: portforward.SPDYForwarder(
            target({80: server.sockets[0].getsockname()[1]}), send))
        try:
            _, data = await client.open_pair(80, "1")
            await client.wait_for(lambda: client.ended(data))
            assert client.received(data) == payload
        finally:
            await client.forwarder.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_closing_the_connection_closes_the_pods_side() -> None:
    """When the client's connection goes (close()), each open forward's connection to the pod is closed."""
    async def main() -> None:
        got, ended = bytearray(), asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while data := await reader.read(65536):
                got.extend(data)
            ended.set()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        client = Client(lambda send: portforward.SPDYForwarder(
            target({80: server.sockets[0].getsockname()[1]}), send))
        try:
            _, data = await client.open_pair(80, "0")
            client.session.send_data(data, b"half a request")
            await client.flush()
            await client.wait_for(lambda: bytes(got) == b"half a request")
            await client.forwarder.close()
            await asyncio.wait_for(ended.wait(), DEADLINE)
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_unknown_stream_type_is_reset() -> None:
    """A stream that is neither error nor data is refused with RST_STREAM PROTOCOL_ERROR."""
    async def main() -> None:
        client = Client(lambda send: portforward.SPDYForwarder(target({}), send))
        stream_id = client.session.open_stream({"streamType": "stdin", "port": "80", "requestID": "0"})
        await client.flush()
        assert spdy.StreamReset(stream_id, spdy.PROTOCOL_ERROR) in client.events
        await client.forwarder.close()

    asyncio.run(main())


def test_goaway_from_the_client_finishes_the_connection() -> None:
    """kubectl's GOAWAY at its end marks the forwarder finished."""
    async def main() -> None:
        client = Client(lambda send: portforward.SPDYForwarder(target({}), send))
        client.session.go_away()
        await client.flush()
        assert client.forwarder.finished.is_set()
        await client.forwarder.close()

    asyncio.run(main())


@pytest.mark.parametrize(("query", "expected"), [
    ([("ports", "80")], [80]),
    ([("ports", "80,8080")], [80, 8080]),
    ([("ports", "80"), ("ports", "81")], [80, 81]),
    ([("port", "9090")], [9090]),
    ([], 'query parameter "port" is required'),
    ([("ports", "")], 'query parameter "port" cannot be empty'),
    ([("ports", "http")], 'unable to parse "http" as a port'),
    ([("ports", "70000")], 'unable to parse "70000" as a port: .*value out of range'),
    ([("ports", "0")], 'port "0" must be > 0'),
], ids=["one", "comma", "repeated", "kubelet-name", "none", "empty", "name", "too-big", "zero"])
def test_websocket_ports_query(query: list[tuple[str, str]], expected: list[int] | str) -> None:
    """The WebSocket protocol's ports come from `ports` (or kubelet's `port`), with kubelet's errors."""
    if isinstance(expected, str):
        with pytest.raises(ValueError, match=expected):
            portforward.ports_of(MultiDict(query))
    else:
        assert portforward.ports_of(MultiDict(query)) == expected
