"""The relay of `kctl port-forward`: local listeners, and each connection's bytes carried to a pod and back.

kctl.cli.portforward builds a `Forwarder` with the ports and addresses kctl.ops.portforward
resolved and one `Route` per pod port (kctl.ops.portforward.route_for), calls `listen()`
(prints kubectl's "Forwarding from 127.0.0.1:8080 -> 80" lines; a failure to listen is
kubectl's message), `start()`, and `close()` when the user ends it. Each accepted connection
prints "Handling connection for 8080" and gets a thread that opens its Route (a TCP
connection to the pod's IP, or an `ssh ... -W ip:port` process whose stdin and stdout are the
stream) and copies bytes both ways, passing on either side's end of stream (half-close), and
closes both when both directions ended. A connection that cannot be opened is one line on
stderr; the forwarding goes on (kubectl 1.32 would end it: docs/networking.md says so).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import IO, Protocol, TextIO

#: bytes read at once, either way
CHUNK = 64 * 1024
#: seconds a direct TCP connection to a pod may take to open
CONNECT_TIMEOUT = 10.0
#: how often the accept loop looks whether it should stop (seconds)
ACCEPT_POLL = 0.2


@dataclass(frozen=True)
class ListenAddress:
    """A local address to listen on; `required`: its failure is fatal (an IP given), else only if all fail
    (the two of `localhost`), as client-go's failureMode "any" / "all"."""

    address: str
    family: int  # 4 or 6
    required: bool = True


@dataclass(frozen=True)
class Route:
    """How a connection reaches host:port: directly, or through `ssh` (argv) whose stdin/stdout carry it."""

    host: str
    port: int
    ssh: tuple[str, ...] | None = None
    #: the ssh server in between (for messages)
    via: str | None = None

    def open(self) -> "Upstream":
        """A connected stream to the pod's port; OSError (direct) when it cannot be opened."""
        if self.ssh is None:
            return SocketUpstream(socket.create_connection((self.host, self.port), timeout=CONNECT_TIMEOUT))
        return ProcessUpstream.start(list(self.ssh), via=self.via or "")


class Upstream(Protocol):
    """The pod's side of one connection."""

    def read(self) -> bytes:
        """Some bytes; b"" at the end of the stream."""

    def write(self, data: bytes) -> None:
        """Send all of data (OSError when the other end is gone)."""

    def end_writing(self) -> None:
        """Tell the pod no more bytes come (half-close)."""

    def abort(self) -> None:
        """Break the stream now (wakes a read blocked in another thread)."""

    def close(self) -> str:
        """Release it; why it failed, if it did ("" when it ended well)."""


class SocketUpstream:
    """A TCP connection straight to the pod's IP and port."""

    def __init__(self, sock: socket.socket) -> None:
        sock.settimeout(None)
        self.sock = sock

    def read(self) -> bytes:
        return self.sock.recv(CHUNK)

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def end_writing(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> str:
        self.sock.close()
        return ""


class ProcessUpstream:
    """`ssh ... -W host:port`: its stdin goes to the pod's port, its stdout comes from it."""

    def __init__(self, process: subprocess.Popen[bytes], errors: IO[bytes], via: str) -> None:
        self.process, self.errors, self.via = process, errors, via
        self.received = False

    @classmethod
    def start(cls, argv: list[str], *, via: str) -> "ProcessUpstream":
        errors = tempfile.TemporaryFile()
        try:
            # a session of its own: the user's Ctrl-C ends kctl, which then ends its ssh processes
            process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                       bufsize=0, start_new_session=True)
        except OSError:
            errors.close()
            raise
        return cls(process, errors, via)

    def read(self) -> bytes:
        assert self.process.stdout is not None
        data = os.read(self.process.stdout.fileno(), CHUNK)
        self.received = self.received or bool(data)
        return data

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self.process.stdin.fileno(), view):]

    def end_writing(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()

    def close(self) -> str:
        from kctl.ssh import ssh_verdict, stop_process

        self.end_writing()
        stop_process(self.process, grace=2)
        try:
            self.errors.seek(0)
            said = self.errors.read().decode(errors="replace")
        finally:
            self.errors.close()
        if self.process.returncode in (0, None, -9, -15) and "open failed" not in said:
            return ""
        said = "\n".join(line for line in said.splitlines() if "stdio forwarding failed" not in line)
        return f"ssh {self.via}: {ssh_verdict(said) or f'exit status {self.process.returncode}'}"


class Output:
    """kubectl's lines, written whole and flushed at once from any thread."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out, self.err = out, err
        self._lock = threading.Lock()

    def line(self, text: str, *, error: bool = False) -> None:
        stream = (self.err or sys.stderr) if error else (self.out or sys.stdout)
        with self._lock, contextlib.suppress(OSError, ValueError):  # a closed pipe: forwarding goes on, unsaid
            stream.write(text + "\n")
            stream.flush()


class _Connection:
    """One accepted connection and, once opened, its upstream (so close() can break both)."""

    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.upstream: Upstream | None = None

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.client.shutdown(socket.SHUT_RDWR)
        if self.upstream is not None:
            self.upstream.abort()


def _go_error(exc: OSError) -> str:
    """An OSError as Go words it (lower-case first letter: `address already in use`)."""
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]


def _joined(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Forwarder:
    """Local listeners for each (local, remote) port, relaying every connection along `routes[remote]`."""

    def __init__(self, ports: list[tuple[int, int]], addresses: list[ListenAddress], routes: dict[int, Route],
                 *, output: Output | None = None) -> None:
        self.ports = [list(p) for p in ports]  # [local, remote]; a local 0 becomes the port first given
        self.addresses = addresses
        self.routes = routes
        self.output = output or Output()
        self._listeners: list[tuple[socket.socket, int, int]] = []  # (socket, local, remote)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._live: set[_Connection] = set()
        self._lock = threading.Lock()

    # -- listening ---------------------------------------------------------------------------

    def listen(self) -> None:
        """Open every listener, printing "Forwarding from ..."; PortForwardError when no port could listen."""
        from kctl.ops.portforward import PortForwardError

        any_port = False
        for port in self.ports:
            errors, failed, succeeded = [], {True: 0, False: 0}, {True: 0, False: 0}
            for address in self.addresses:
                try:
                    self._listen(port, address)
                    succeeded[address.required] += 1
                except OSError as exc:
                    protocol = f"tcp{address.family}"
                    errors.append(f"unable to create listener: Error listen {protocol} "
                                  f"{_joined(address.address, port[0])}: bind: {_go_error(exc)}")
                    failed[address.required] += 1
            if (succeeded[False] == 0 and failed[False] > 0) or failed[True] > 0:
                self.output.line(f"Unable to listen on port {port[0]}: Listeners failed to create with the "
                                 f"following errors: [{' '.join(errors)}]", error=True)
            else:
                any_port = True
        if not any_port:
            self.close()
            ports = " ".join(f"{{{local} {remote}}}" for local, remote in self.ports)
            raise PortForwardError(f"unable to listen on any of the requested ports: [{ports}]")

    def _listen(self, port: list[int], address: ListenAddress) -> None:
        family = socket.AF_INET6 if address.family == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address.address, port[0]))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        port[0] = sock.getsockname()[1]  # a local 0: the other addresses listen on the port this one got
        self._listeners.append((sock, port[0], port[1]))
        self.output.line(f"Forwarding from {_joined(address.address, port[0])} -> {port[1]}")

    @property
    def local_ports(self) -> list[int]:
        """The local ports listened on (after listen(): a `:REMOTE`'s free port is known)."""
        return [local for local, _ in self.ports]

    # -- serving -----------------------------------------------------------------------------

    def start(self) -> None:
        """Accept connections in a thread of its own until close()."""
        thread = threading.Thread(target=self._accept_loop, name="port-forward-accept", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            for sock, local, remote in self._listeners:
                sock.setblocking(False)
                selector.register(sock, selectors.EVENT_READ, (local, remote))
            while not self._stop.is_set():
                for key, _ in selector.select(ACCEPT_POLL):
                    try:
                        client, _ = key.fileobj.accept()  # type: ignore[union-attr]
                    except OSError:
                        continue
                    client.setblocking(True)
                    local, remote = key.data
                    self.output.line(f"Handling connection for {local}")
                    thread = threading.Thread(target=self._handle, args=(client, local, remote),
                                              name=f"port-forward-{local}", daemon=True)
                    thread.start()

    def _handle(self, client: socket.socket, local: int, remote: int) -> None:
        """One connection: open the route, copy both ways, close both."""
        connection = _Connection(client)
        with self._lock:
            if self._stop.is_set():
                client.close()
                return
            self._live.add(connection)
        failure = ""
        upstream: Upstream | None = None
        try:
            route = self.routes[remote]
            try:
                upstream = route.open()
            except OSError as exc:
                failure = (f"ssh {route.via}: {exc}" if route.ssh else
                           f"dial tcp {_joined(route.host, route.port)}: connect: {_go_error(exc)}")
                return
            with self._lock:
                connection.upstream = upstream
                if self._stop.is_set():  # close() came while it opened
                    upstream.abort()
            back = threading.Thread(target=self._pump_back, args=(upstream, client),
                                    name=f"port-forward-{local}-back", daemon=True)
            back.start()
            self._pump_out(client, upstream)
            back.join()
            upstream, opened = None, upstream
            failure = opened.close()
        except Exception as exc:  # a thread's end: one line, never a traceback
            failure = f"{type(exc).__name__}: {exc}"
        finally:
            if upstream is not None:  # left early: its ssh must not outlive it
                upstream.abort()
                upstream.close()
            with contextlib.suppress(OSError):
                client.close()
            with self._lock:
                self._live.discard(connection)
            if failure and not self._stop.is_set():
                self.output.line(f"error: an error occurred forwarding {local} -> {remote}: {failure}", error=True)

    @staticmethod
    def _pump_out(client: socket.socket, upstream: Upstream) -> None:
        """Client -> pod, then the pod is told the client is done sending."""
        try:
            while data := client.recv(CHUNK):
                upstream.write(data)
        except OSError:
            upstream.abort()
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
        finally:
            upstream.end_writing()

    @staticmethod
    def _pump_back(upstream: Upstream, client: socket.socket) -> None:
        """Pod -> client, then the client is told the pod is done sending."""
        try:
            while data := upstream.read():
                client.sendall(data)
        except OSError:
            upstream.abort()
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
        finally:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_WR)

    # -- ending ------------------------------------------------------------------------------

    def close(self, *, timeout: float = 5.0) -> None:
        """Stop accepting, break every open connection (ending its ssh), wait for the threads."""
        with self._lock:
            self._stop.set()
            live = list(self._live)
        for thread in self._threads:
            thread.join(timeout)
        for sock, _, _ in self._listeners:
            with contextlib.suppress(OSError):
                sock.close()
        self._listeners.clear()
        for connection in live:
            connection.abort()
        for thread in threading.enumerate():
            if thread.name.startswith("port-forward-") and thread is not threading.current_thread():
                thread.join(timeout)


__all__ = ["ListenAddress", "Forwarder", "Output", "ProcessUpstream", "Route", "SocketUpstream", "Upstream"]
