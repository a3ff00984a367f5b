"""HTTPS to a Kubernetes API server with the standard library: a keep-alive pool, TLS from a kubeconfig.

kctl.apiserver.rest.client (the REST API client) sends every request through one `Transport`:
`call` for a request and its JSON answer (errors become kctl.machinery.errors classes through
kctl.apiserver.rest.status, Warning headers go to the caller), `stream` for answers read as
they come (a watch's events, followed logs). http.client and ssl only, so a CLI command that
uses it pays no start-up for an HTTP library.

Connections: idle keep-alive connections wait in a pool (at most MAX_IDLE), any thread may
take one; a request that finds its reused connection closed by the server (its keep-alive
ran out) is sent once more on a new one, as Go's transport does. A stream has a connection of
its own for its whole life; stopping it (its stop event or its deadline, from a thread that waits
for them) shuts that socket down, which ends the blocked read at once; the reader then closes it.

TLS: the kubeconfig's CA only (the system's CAs when it names none), the client certificate and
key (data written to a private temporary file just long enough for ssl to load it), or a bearer
token; `insecure-skip-tls-verify` only when asked; `tls-server-name` for the certificate's name.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator
from urllib.parse import quote, urlencode, urlsplit

from kctl.apiserver.rest.kubeconfig import Connection, KubeconfigError
from kctl.apiserver.rest.status import error_of, warnings_of
from kctl.apiserver.wire import ServerUnavailable

#: idle keep-alive connections kept for reuse
MAX_IDLE = 16
#: seconds a request may wait for its answer (a connection attempt, or a silent server)
REQUEST_TIMEOUT = 60.0
#: errors of a reused connection the server closed while it was idle: send again on a new one
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


@dataclass
class Response:
    """One answer: HTTP status, body, and the texts of its Warning headers."""

    status: int
    body: bytes
    content_type: str = ""
    warnings: list[str] = field(default_factory=list)

    def json(self) -> object:
        import orjson  # 2-3x json's speed on a LIST of 1,000 objects

        try:
            return orjson.loads(self.body) if self.body else None
        except ValueError:
            raise ServerUnavailable(f"the server answered {self.status} with a body that is not JSON") from None


class _Conn(http.client.HTTPSConnection):
    """An HTTPSConnection that may verify the certificate against another name (tls-server-name)."""

    def __init__(self, host: str, port: int | None, *, context: ssl.SSLContext, server_name: str | None,
                 timeout: float | None) -> None:
        super().__init__(host, port, context=context, timeout=timeout)
        self._server_name = server_name
        self._ssl_context = context
        self.reused = False

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout, self.source_address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self._ssl_context.wrap_socket(sock, server_hostname=self._server_name or self.host)


class Transport:
    """Requests to one API server over HTTPS (see the module docstring); thread-safe."""

    def __init__(self, connection: Connection, *, user_agent: Callable[[], str] | None = None,
                 timeout: float = REQUEST_TIMEOUT) -> None:
        self.connection = connection
        parts = urlsplit(connection.server)
        self.host = parts.hostname or ""
        self.port = parts.port or 443
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self._user_agent = user_agent or (lambda: "kctl")
        self._context: ssl.SSLContext | None = None
        self._idle: list[_Conn] = []
        self._lock = threading.Lock()

    # -- TLS ----------------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        """The client's TLS context (made once)."""
        with self._lock:
            if self._context is None:
                self._context = _ssl_context(self.connection)
            return self._context

    # -- connections --------------------------------------------------------------------------

    def _take(self) -> _Conn:
        with self._lock:
            if self._idle:
                conn = self._idle.pop()
                conn.reused = True
                return conn
        return self._new(timeout=self.timeout)

    def _new(self, *, timeout: float | None) -> _Conn:
        return _Conn(self.host, self.port, context=self.ssl_context(), server_name=self.connection.tls_server_name,
                     timeout=timeout)

    def _give_back(self, conn: _Conn) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close every idle connection (streams close their own; a later request opens a new one)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # -- requests -----------------------------------------------------------------------------

    def url(self, path: str, query: dict | None = None) -> str:
        """The request target: the server's path prefix, path, and the query (None values left out)."""
        target = self.prefix + path
        if query:
            items = [(k, v) for k, v in query.items() if v is not None]
            if items:
                target += "?" + urlencode(items)
        return target

    def _headers(self, *, accept: str, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": self._user_agent()}
        if content_type:
            headers["Content-Type"] = content_type
        if self.connection.token:
            headers["Authorization"] = f"Bearer {self.connection.token}"
        return headers

    def request(self, method: str, path: str, *, query: dict | None = None, body: bytes | None = None,
                content_type: str | None = None, accept: str = "application/json") -> Response:
        """Send one request on a pooled connection and read its whole answer."""
        target = self.url(path, query)
        headers = self._headers(accept=accept, content_type=content_type)
        for attempt in (1, 2):
            conn = self._take()
            try:
                conn.request(method, target, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
            except _STALE as exc:
                conn.close()
                if conn.reused and attempt == 1:
                    continue
                raise self.unreachable(exc) from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise self.unreachable(exc) from None
            if answer.will_close:
                conn.close()
            else:
                self._give_back(conn)
            return Response(answer.status, data, answer.getheader("Content-Type", "") or "",
                            warnings_of(answer.msg.get_all("Warning") or []))
        raise AssertionError("unreachable")  # pragma: no cover

    def call(self, method: str, path: str, *, query: dict | None = None, body: object = None,
             content_type: str = "application/json", warn: Callable[[str], None] | None = None) -> object:
        """One request with a JSON body (or none) and its JSON answer; an error answer raises its kctl error."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        answer = self.request(method, path, query=query, body=data,
                              content_type=content_type if data is not None else None)
        if warn is not None:
            for text in answer.warnings:
                warn(text)
        if answer.status >= 400:
            raise error_of(answer.status, answer.body)
        return answer.json()

    def stream(self, method: str, path: str, *, query: dict | None = None,
               accept: str = "application/json") -> "Stream":
        """Open a request whose answer is read as it comes, on a connection of its own."""
        conn = self._new(timeout=self.timeout)
        try:
            conn.request(method, self.url(path, query), headers=self._headers(accept=accept, content_type=None))
            answer = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise self.unreachable(exc) from None
        if answer.status >= 400:
            data = answer.read()
            conn.close()
            raise error_of(answer.status, data)
        if conn.sock is not None:
            conn.sock.settimeout(None)  # a watch may be silent for long: the stop event ends it
        return Stream(conn, answer)

    def open_socket(self, *, timeout: float | None = None) -> tuple[ssl.SSLSocket, str, dict[str, str]]:
        """A new TLS socket to the server for a protocol of its own (a WebSocket): (socket, Host, headers)."""
        conn = self._new(timeout=self.timeout)
        try:
            conn.connect()
        except OSError as exc:
            conn.close()
            raise self.unreachable(exc) from None
        sock = conn.sock
        sock.settimeout(timeout)
        host = f"[{self.host}]" if ":" in self.host else self.host
        headers = self._headers(accept="*/*", content_type=None)
        headers.pop("Accept")
        return sock, f"{host}:{self.port}", headers

    def unreachable(self, exc: BaseException) -> ServerUnavailable:
        return ServerUnavailable(f"Unable to connect to the server at {self.connection.server}: {_describe(exc)}")


class Stream:
    """An answer being read as it arrives; `lines()` until the server ends it or `close()` is called."""

    def __init__(self, conn: _Conn, answer: http.client.HTTPResponse) -> None:
        self._conn = conn
        self.answer = answer
        self._closed = threading.Event()

    def lines(self) -> Iterator[bytes]:
        """Each line of the body (a watch event, a log line), its newline kept; ends with the body."""
        try:
            while not self._closed.is_set():
                line = self.answer.readline()
                if not line:
                    return
                yield line
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            if self._closed.is_set():
                return
            raise

    def chunks(self, size: int = 65536) -> Iterator[bytes]:
        """The body in pieces as they arrive (followed logs)."""
        try:
            while not self._closed.is_set():
                data = self.answer.read1(size)
                if not data:
                    return
                yield data
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            if self._closed.is_set():
                return
            raise

    def stop_when(self, stop: threading.Event | None, deadline: float | None) -> None:
        """Close this stream when `stop` is set or `deadline` (time.monotonic) passes: a thread waits for it."""
        if stop is None and deadline is None:
            return

        def wait() -> None:
            import time

            while not self._closed.is_set():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                if stop is not None:
                    if stop.wait(0.1 if left is None else min(0.1, left)):
                        break
                else:
                    self._closed.wait(left)
            self.stop()

        threading.Thread(target=wait, name="kctl-rest-stream-stop", daemon=True).start()

    def stop(self) -> None:
        """End the stream from any thread: the socket is shut down, so a read blocked on it returns."""
        self._closed.set()
        sock = self._conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """End the stream and release its connection (by the thread that reads it, once it no longer does)."""
        self.stop()
        with contextlib.suppress(OSError):
            self._conn.close()


def path_segment(value: str) -> str:
    """A name as one URL path segment."""
    return quote(value, safe="")


def _describe(exc: BaseException) -> str:
    """What went wrong connecting, in a person's words."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"the server's certificate is not trusted ({exc.verify_message or exc.reason})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc})"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without an answer"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "no answer in time"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__


def _ssl_context(conn: Connection) -> ssl.SSLContext:
    """The TLS context of a Connection: its CA, its client certificate, or none of them when insecure."""
    try:
        context = ssl.create_default_context(
            cafile=conn.ca_file, cadata=conn.ca_data.decode("ascii", "replace") if conn.ca_data else None)
    except (OSError, ssl.SSLError) as exc:
        raise KubeconfigError(f"certificate-authority of {conn.source or 'the flags'}: cannot load it: "
                              f"{getattr(exc, 'strerror', None) or getattr(exc, 'reason', None) or exc}") from None
    if conn.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if conn.cert_file or conn.cert_data:
        _load_client_cert(context, conn)
    return context


def _load_client_cert(context: ssl.SSLContext, conn: Connection) -> None:
    """Load the client certificate and key; data goes through 0600 files in a 0700 folder, removed at once."""
    with tempfile.TemporaryDirectory(prefix="kctl-tls-") as folder:
        cert_file, key_file = conn.cert_file, conn.key_file
        if conn.cert_data is not None:
            cert_file = _private_file(folder, "client.crt", conn.cert_data)
        if conn.key_data is not None:
            key_file = _private_file(folder, "client.key", conn.key_data)
        try:
            context.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as exc:
            why = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or type(exc).__name__
            raise KubeconfigError(f"client-certificate/client-key of {conn.source or 'the flags'}: cannot load "
                                  f"them: {why}") from None


def _private_file(folder: str, name: str, data: bytes) -> str:
    path = os.path.join(folder, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


__all__ = ["MAX_IDLE", "Response", "Stream", "Transport", "path_segment"]
