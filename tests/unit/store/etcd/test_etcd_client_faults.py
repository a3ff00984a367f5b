"""The etcd client when a member hangs (a cut host, SIGSTOP) or quorum is lost: fast failover, fast quorum errors.

One 3-member cluster for the module (tests/conftest.py `etcd_cluster3`); every stopped member is SIGCONTed and
the cluster healthy again after each test, also on failure. Bounds are generous (a loaded 2-core machine): the
point is "a few seconds" instead of the 10 s request timeout each of these waited before.
"""

from __future__ import annotations

import base64
import http.server
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Iterator

import pytest

from kctl.store.contract import StoreUnavailable
from kctl.store.etcd import client as client_module
from kctl.store.etcd.address import EtcdAddress, parse_address
from kctl.store.etcd.client import EtcdClient, resend_is_harmless, socket_options

FAILOVER_BOUND = 6.0   # seconds: attempt (1.5) + status probe (1.0) + an election, on a loaded machine
CLI_BOUND = 9.0       # seconds for a whole `kctl` process (start-up included) on a loaded machine
REQUEST_TIMEOUT = 10.0  # the client's default: before the fix every case below waited at least this long


def b64(text: str) -> str:
    """base64 of a key or value, as the gateway wants it."""
    return base64.b64encode(text.encode()).decode()


@pytest.fixture
def cluster(etcd_cluster3: Any) -> Iterator[Any]:
    """The module's 3-member cluster; afterwards every member is running (SIGCONT) and healthy."""
    yield etcd_cluster3
    for member in etcd_cluster3.members:
        if member.pid is not None:
            try:
                os.kill(member.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    etcd_cluster3.wait_healthy(timeout=60)


@pytest.fixture
def make_client(cluster: Any) -> Iterator[Callable[..., EtcdClient]]:
    """A factory of EtcdClients on the cluster (closed afterwards)."""
    made: list[EtcdClient] = []

    def make(**options: Any) -> EtcdClient:
        made.append(EtcdClient(parse_address(cluster.address), tls=cluster.tls,
                               request_timeout=REQUEST_TIMEOUT, **options))
        return made[-1]

    yield make
    for client in made:
        client.close_all()


def stop(cluster: Any, *indexes: int) -> None:
    """SIGSTOP members: their sockets stay open but nothing answers (as a host whose link was cut)."""
    for index in indexes:
        os.kill(cluster.members[index].pid, signal.SIGSTOP)


def using(client: EtcdClient, index: int) -> None:
    """Make `index` the member the client asks first, with a kept-alive connection to it."""
    client._preferred = index
    client.call("/kv/range", {"key": b64("/e9/warm")})
    assert client._preferred == index


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """fn()'s result (or the exception it raised) and how long it took."""
    started = time.monotonic()
    try:
        result = fn()
    except StoreUnavailable as error:
        result = error
    return result, time.monotonic() - started


def test_a_read_on_a_hung_member_is_answered_by_another_soon(cluster, make_client):
    """A read through a client that last used a now-hung member answers from another within seconds, then at once."""
    client = make_client()
    key = b64(f"/e9/{secrets.token_hex(4)}")
    using(client, 0)
    stop(cluster, 0)
    answer, took = timed(lambda: client.call("/kv/range", {"key": key}))
    assert not isinstance(answer, StoreUnavailable), answer
    assert took < FAILOVER_BOUND and client._preferred != 0
    answer, took_again = timed(lambda: client.call("/kv/range", {"key": key}))
    assert not isinstance(answer, StoreUnavailable) and took_again < FAILOVER_BOUND / 2
    assert client._order()[-1] == 0  # the hung member is avoided: asked last


def test_a_txn_comparing_the_key_it_writes_is_resent_on_another_member(cluster, make_client):
    """With the asked member hung after the send, a txn whose compares forbid a second apply succeeds elsewhere."""
    client = make_client()
    key = b64(f"/e9/{secrets.token_hex(4)}")
    using(client, 0)
    stop(cluster, 0)
    txn = {"compare": [{"key": key, "result": "EQUAL", "target": "MOD", "mod_revision": "0"}],
           "success": [{"request_put": {"key": key, "value": b64("v1")}}]}
    answer, took = timed(lambda: client.call("/kv/txn", txn, write=True))
    assert not isinstance(answer, StoreUnavailable), answer
    assert answer.get("succeeded") and took < FAILOVER_BOUND


def test_a_blind_put_on_a_hung_member_reports_an_unknown_outcome_soon(cluster, make_client):
    """A plain put sent to a member that then hangs is not resent: StoreUnavailable naming it, outcome unknown."""
    client = make_client()
    using(client, 1)
    stop(cluster, 1)
    error, took = timed(lambda: client.call("/kv/put", {"key": b64("/e9/blind"), "value": b64("v")}, write=True))
    assert isinstance(error, StoreUnavailable), error
    assert "outcome is unknown" in error.message and cluster.members[1].client_url in error.message
    assert "quorum" not in error.message and took < FAILOVER_BOUND


def kctl_process(cluster: Any, state: Any, prefix: str, *argv: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run `python -m kctl ARGV` on the cluster's `prefix` (a process of its own, as a user would); its time."""
    env = {**os.environ, "KCTL_STORE": f"{cluster.address}{prefix}", "KCTL_ETCD_CAFILE": str(cluster.ca_file),
           "KCTL_ETCD_CERTFILE": str(cluster.client_cert_file), "KCTL_ETCD_KEYFILE": str(cluster.client_key_file),
           "KCTL_ETCD_STATE_DIR": str(state)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kctl", *argv], env=env, capture_output=True, text=True,
                          timeout=120)
    return done, time.monotonic() - started


def test_two_hung_members_fail_writes_reads_and_commands_with_the_quorum_message_soon(cluster, make_client,
                                                                                      tmp_path):
    """2 of 3 hung: a write, a read, `kctl get` and `kctl create` each fail within seconds with one quorum line."""
    prefix = f"/e9-{secrets.token_hex(4)}"
    done, _ = kctl_process(cluster, tmp_path, prefix, "create", "namespace", "before")
    assert done.returncode == 0, done.stderr
    client = make_client()
    using(client, 2)
    stop(cluster, 0, 1)
    for write, outcome in ((True, "outcome is unknown"), (False, "the read failed")):
        path, body = ("/kv/put", {"key": b64("/e9/q"), "value": b64("v")}) if write else ("/kv/range",
                                                                                           {"key": b64("/e9/q")})
        error, took = timed(lambda: client.call(path, body, write=write))
        assert isinstance(error, StoreUnavailable), error
        message = error.message
        assert message.startswith("etcd: the cluster has lost its quorum: 2 of 3 members do not answer"), message
        assert cluster.members[0].client_url in message and cluster.members[1].client_url in message
        assert outcome in message and took < FAILOVER_BOUND
    for argv in (("get", "namespaces"), ("create", "namespace", "during")):
        done, took = kctl_process(cluster, tmp_path, prefix, *argv)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "the cluster has lost its quorum: 2 of 3 members do not answer" in lines[0]
        assert took < CLI_BOUND, (argv, took)


# -- without etcd ---------------------------------------------------------------------------------


class _SlowStatusServer(http.server.ThreadingHTTPServer):
    """A fake member: answers /v3/maintenance/status at once and every other call after `delay` seconds."""

    daemon_threads = True

    def __init__(self, delay: float, *, busy: int = 0) -> None:
        self.delay = delay
        self.busy = busy  # the first `busy` calls answer "leader changed" (an election under way)
        self.calls: list[str] = []
        super().__init__(("127.0.0.1", 0), _SlowHandler)


class _SlowHandler(http.server.BaseHTTPRequestHandler):
    server: _SlowStatusServer

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        """Answer `{}` (status at once, anything else after the delay)."""
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, body = 200, b'{"header":{"revision":"7"},"succeeded":true}'
        if not self.path.endswith("/maintenance/status"):
            self.server.calls.append(self.path)
            time.sleep(self.server.delay)
            if len(self.server.calls) <= self.server.busy:
                status, body = 503, b'{"error":"etcdserver: leader changed","code":14}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def fake_member() -> Iterator[Callable[..., _SlowStatusServer]]:
    """A factory of fake members (_SlowStatusServer), each served on a thread and shut down afterwards."""
    servers: list[tuple[_SlowStatusServer, threading.Thread]] = []

    def make(delay: float, *, busy: int = 0) -> _SlowStatusServer:
        server = _SlowStatusServer(delay, busy=busy)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        servers.append((server, thread))
        return server

    yield make
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def slow_member(fake_member: Callable[..., _SlowStatusServer]) -> _SlowStatusServer:
    """A fake member answering calls after 1.2 s, its status at once (slow, not gone)."""
    return fake_member(1.2)


def test_a_read_during_an_election_is_asked_again_until_a_leader_answers(fake_member):
    """Members answering "leader changed" (an election) are asked again; the read succeeds once one leads."""
    members = [fake_member(0.0, busy=3), fake_member(0.0, busy=3)]
    client = EtcdClient(EtcdAddress(tuple(f"127.0.0.1:{m.server_address[1]}" for m in members)), request_timeout=10)
    try:
        answer = client.call("/kv/range", {"key": "YQ=="})
    finally:
        client.close_all()
    assert answer["header"]["revision"] == "7"
    assert sum(len(m.calls) for m in members) >= 4


@pytest.mark.parametrize("write", [True, False], ids=["write", "read"])
def test_a_slow_member_that_answers_its_status_is_waited_for_not_abandoned(slow_member, write):
    """A member slower than slow_after/attempt_timeout but alive: the call waits for it; a write is sent once."""
    port = slow_member.server_address[1]
    client = EtcdClient(EtcdAddress((f"127.0.0.1:{port}",)), request_timeout=10, attempt_timeout=0.5,
                        slow_after=0.5)
    try:
        answer = client.call("/kv/txn" if write else "/kv/range", {"key": "YQ=="}, write=write)
    finally:
        client.close_all()
    assert answer["header"]["revision"] == "7"
    assert len(slow_member.calls) == (1 if write else 2)  # a read is asked again (idempotent), a write never


@pytest.mark.parametrize("body, harmless", [
    ({"compare": [{"key": "k", "result": "EQUAL", "target": "MOD", "mod_revision": "5"}],
      "success": [{"request_put": {"key": "k", "value": "v"}}]}, True),
    ({"compare": [{"key": "k", "target": "MOD", "mod_revision": "0"}],  # EQUAL is the JSON default
      "success": [{"request_put": {"key": "k", "value": "v"}}]}, True),
    ({"compare": [{"key": "k", "result": "EQUAL", "target": "VERSION", "version": "3"}],
      "success": [{"request_put": {"key": "k", "value": "v"}}]}, True),
    ({"compare": [{"key": "k", "result": "EQUAL", "target": "MOD", "mod_revision": "5"}],
      "success": [{"request_delete_range": {"key": "k"}}]}, True),
    ({"compare": [{"key": "k", "result": "EQUAL", "target": "MOD", "mod_revision": "0"}],
      "success": [{"request_delete_range": {"key": "k"}}]}, False),
    ({"compare": [{"key": "other", "result": "EQUAL", "target": "MOD", "mod_revision": "5"}],
      "success": [{"request_put": {"key": "k", "value": "v"}}]}, False),
    ({"compare": [{"key": "k", "result": "LESS", "target": "MOD", "mod_revision": "9"}],
      "success": [{"request_put": {"key": "k", "value": "v"}}]}, False),
    ({"compare": [{"key": "k", "result": "EQUAL", "target": "VALUE", "value": "dg=="}],
      "success": [{"request_put": {"key": "k", "value": "v"}}]}, False),
    ({"compare": [{"key": "k", "result": "EQUAL", "target": "MOD", "mod_revision": "5"}],
      "success": [{"request_put": {"key": "k", "value": "v"}}],
      "failure": [{"request_put": {"key": "x", "value": "v"}}]}, False),
    ({"success": [{"request_put": {"key": "k", "value": "v"}}]}, False),
], ids=["mod-equal", "default-result", "version", "delete-compared", "delete-absent", "other-key", "less",
        "value", "failure-writes", "no-compare"])
def test_resend_is_harmless_only_when_a_written_key_is_compared(body, harmless):
    """A txn may be resent only when a key it writes is compared on mod_revision/version for equality."""
    assert resend_is_harmless(body) is harmless


def test_sockets_have_tcp_keepalive_with_a_short_idle_time():
    """Every connection the client makes sets SO_KEEPALIVE (and, on Linux, a short idle/interval/count)."""
    options = socket_options()
    assert (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1) in options
    if hasattr(socket, "TCP_KEEPIDLE"):
        assert (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, client_module.KEEPIDLE) in options
        assert client_module.KEEPIDLE * 1 + client_module.KEEPINTVL * client_module.KEEPCNT <= 30


def test_an_avoided_member_is_asked_last_until_it_answers_again():
    """avoid() orders a member last (keeping the others' order); an answer from it clears that."""
    client = EtcdClient(EtcdAddress(("a:1", "b:1", "c:1")))
    assert client._order() == [0, 1, 2]
    client.avoid("http://a:1")
    assert client._order() == [1, 2, 0]
    client._answered(0)
    assert client._order() == [0, 1, 2]


def test_a_probe_is_shared_only_with_threads_that_waited_before_it_began(monkeypatch):
    """probe(since) reuses a fresh probe begun after `since`; one begun before the wait is made again."""
    client = EtcdClient(EtcdAddress(("a:1", "b:1", "c:1")))
    calls: list[int] = []
    monkeypatch.setattr(client, "silent_members", lambda: calls.append(1) or ["http://c:1"])
    waited = time.monotonic()
    assert client.probe(since=waited) == ["http://c:1"]
    assert client.probe(since=waited) == ["http://c:1"] and len(calls) == 1
    time.sleep(0.01)
    assert client.probe(since=time.monotonic()) == ["http://c:1"] and len(calls) == 2


class _StreamMember:
    """A fake member on a raw socket: `silent` accepts and never answers; else it answers its status at once and
    a watch with headers and one line after `delay` seconds, and a second line once `go` is set."""

    def __init__(self, *, silent: bool, delay: float = 0.0) -> None:
        self.silent = silent
        self.delay = delay
        self.go = threading.Event()
        self.done = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(conn)
            if not self.silent:
                threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        def chunk(line: bytes) -> bytes:
            return b"%x\r\n%s\r\n" % (len(line), line)

        try:
            request = conn.recv(65536)  # the request (small enough for one read)
            if b"/maintenance/status" in request.split(b"\r\n", 1)[0]:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
                return
            time.sleep(self.delay)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                         + chunk(b'{"result":{"created":true}}\n'))
            if self.go.wait(30) and not self.done.is_set():
                conn.sendall(chunk(b'{"result":{"events":[]}}\n'))
        except OSError:
            pass

    def close(self) -> None:
        self.done.set()
        self.go.set()
        self.listener.close()
        for conn in self.accepted:
            conn.close()
        self.thread.join(timeout=10)


@pytest.fixture
def stream_member() -> Iterator[Callable[..., _StreamMember]]:
    """A factory of _StreamMembers, closed afterwards."""
    made: list[_StreamMember] = []

    def make(*, silent: bool, delay: float = 0.0) -> _StreamMember:
        made.append(_StreamMember(silent=silent, delay=delay))
        return made[-1]

    yield make
    for member in made:
        member.close()


def open_watch(client: EtcdClient) -> Any:
    """client.stream's response for a watch, or the exception it raised (run in a thread: never hangs the test)."""
    outcome: list[Any] = []
    session = client.new_session()

    def run() -> None:
        try:
            outcome.append(client.stream("/watch", {"create_request": {"key": "YQ=="}}, session=session))
        except Exception as error:  # noqa: BLE001 - the test looks at it
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert outcome, "opening the watch still waits for a member that never answers"
    return outcome[0]


def test_a_watch_is_not_held_by_a_member_that_accepts_and_never_answers(stream_member):
    """The watch's opening request times out on a silent member: StoreUnavailable naming it, the member avoided."""
    silent = stream_member(silent=True)
    client = EtcdClient(EtcdAddress((silent.endpoint,)), request_timeout=10, attempt_timeout=0.2)
    try:
        outcome = open_watch(client)
    finally:
        client.close_all()
    assert isinstance(outcome, StoreUnavailable), outcome
    assert "no member answers" in outcome.message and silent.endpoint in outcome.message
    assert client._order() == [0] and client._avoid_until


def test_a_watch_opens_on_the_next_member_and_then_outlives_the_header_timeout(stream_member):
    """Silent first member: the watch opens on the second; the open stream then waits past attempt_timeout."""
    silent, live = stream_member(silent=True), stream_member(silent=False)
    client = EtcdClient(EtcdAddress((silent.endpoint, live.endpoint)), request_timeout=10, attempt_timeout=0.2)
    try:
        response = open_watch(client)
        assert not isinstance(response, Exception), response
        lines = response.iter_lines(chunk_size=None)
        assert next(lines) == b'{"result":{"created":true}}'
        assert client._order() == [1, 0]  # the silent one is asked last now
        time.sleep(1.0)  # five times the header timeout with nothing on the stream
        live.go.set()
        assert next(lines) == b'{"result":{"events":[]}}'
        response.close()
    finally:
        client.close_all()


def test_a_watch_waits_for_a_slow_member_that_answers_its_status(stream_member):
    """Headers later than attempt_timeout from a member that answers its status: the watch opens on it."""
    slow = stream_member(silent=False, delay=0.8)
    client = EtcdClient(EtcdAddress((slow.endpoint,)), request_timeout=10, attempt_timeout=0.2)
    try:
        response = open_watch(client)
        assert not isinstance(response, Exception), response
        assert next(response.iter_lines(chunk_size=None)) == b'{"result":{"created":true}}'
        assert not client._avoid_until
        response.close()
    finally:
        client.close_all()
