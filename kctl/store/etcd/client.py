"""A small client of etcd's gRPC JSON gateway (/v3/...), over `requests`.

Called by kctl.store.etcd (store, transaction, watch, compactor, backup). Decision (issue 17,
see docs/ha.md "store"): kctl talks to etcd 3.4's JSON gateway with its own ~300 lines on
`requests` (already a dependency, via podman-py) rather than a library: etcd3gw 2.7 hangs on a
watch of a compacted revision, lets REQUESTS_CA_BUNDLE replace its CA and has no compaction
call; python-etcd3 is unmaintained and no longer imports with today's protobuf.

- One `requests.Session` per thread, `trust_env = False` (no proxy, no CA bundle from the
  environment), the client certificate of EtcdTLS; https iff a CA or certificate is given.
  Sockets have TCP keepalive with a short idle time, so a connection to a host that was cut
  off is noticed (and a watch on it ends) within ~15 s instead of the kernel's two hours.
- Failover: a request goes to the member that answered last, then to the others; a member
  that did not answer in time is avoided for a while (ordered last) and its pooled
  connections are dropped (they may hang on a cut host).
- Slow requests (a cut host, lost quorum): a read gets `attempt_timeout` (1.5 s) per try; a
  write is sent by a worker thread while the caller waits, and after `slow_after` (1.5 s)
  the caller asks every member's /v3/maintenance/status at once (it answers without quorum):
  * a majority does not answer: fail at once, "the cluster has lost its quorum" (etcd itself
    would answer "request timed out" only after ~7 s);
  * the member asked does not answer but a majority does: a read is tried on the next member.
    A write that was sent may still apply, so it is resent only when a duplicate apply is
    impossible: a txn that compares the mod_revision (or version) of a key it writes — as
    every kctl commit does for every key it writes — fails its compares if the first send
    applied, so the resend answers "not succeeded", the store raises CommitConflict and
    `Store.transact` re-reads and sees the first send's result. Any other write fails with
    StoreUnavailable naming the member, "its outcome is unknown";
  * the member asked answers its status: it is slow, not gone; the caller keeps waiting
    (asking again every `slow_after`) up to request_timeout.
  A read that members answer with "no leader"/"request timed out" (an election under way) is
  asked of them again every BUSY_PAUSE until request_timeout.
  A write never reached a member (connection refused, still queued) is tried on the next.
- Errors: compacted -> Gone; too large -> RequestEntityTooLarge; no member answers, or etcd's
  own "request timed out" -> StoreUnavailable naming the members that do not answer (asked with
  /v3/maintenance/status), "the cluster has lost its quorum" when a majority does not, and for
  a write that its outcome is unknown. No request waits longer than request_timeout.
  Messages carry etcd's error text and member URLs, never a key's value.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import CancelledError, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

from kctl.machinery.errors import Gone, RequestEntityTooLarge
from kctl.store.contract import StoreError, StoreUnavailable
from kctl.store.etcd.address import EtcdAddress, EtcdTLS
from kctl.store.etcd.workers import DaemonWorkers

DEFAULT_TIMEOUT = 10.0
CONNECT_TIMEOUT = 3.0
#: a read's time on one member before the members are asked whether it is gone
ATTEMPT_TIMEOUT = 1.5
#: how long a write waits before the members are asked whether it can still be served
SLOW_AFTER = 1.5
#: how long a member may take to answer /v3/maintenance/status before it counts as silent
STATUS_TIMEOUT = 1.0
#: a probe younger than this answers for the next thread that asks (many threads time out at once)
PROBE_FRESH = 1.0
#: between rounds of a read every member answered with "no leader"/"request timed out" (an election)
BUSY_PAUSE = 0.25
#: how long a member that did not answer is ordered last
AVOID_FOR = 30.0
#: threads that send writes (each waits on one write at a time)
WRITE_WORKERS = 32
#: TCP keepalive: first probe after KEEPIDLE s idle, then every KEEPINTVL s, dead after KEEPCNT unanswered
KEEPIDLE, KEEPINTVL, KEEPCNT = 5, 2, 3
#: etcd's default --max-request-bytes (1.5 MiB) and --max-txn-ops
MAX_REQUEST_BYTES = 1536 * 1024
MAX_TXN_OPS = 128

#: texts of etcd errors that mean "no quorum / no leader right now"
_UNAVAILABLE = ("request timed out", "leader changed", "no leader", "timed out", "not capable",
                "server is unavailable", "too many requests", "raft", "unhealthy cluster")


def socket_options() -> list[tuple[int, int, int]]:
    """urllib3's default socket options plus TCP keepalive with a short idle time (where the OS has them)."""
    from urllib3.connection import HTTPConnection

    options = list(HTTPConnection.default_socket_options) + [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPIDLE", KEEPIDLE), ("TCP_KEEPINTVL", KEEPINTVL), ("TCP_KEEPCNT", KEEPCNT)):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return options


class _KeepAliveAdapter(HTTPAdapter):
    """An HTTPAdapter whose connections have TCP keepalive (see socket_options)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["socket_options"] = socket_options()
        super().init_poolmanager(*args, **kwargs)


class _Slow(Exception):
    """Internal: a member did not answer in time; `silent` is the probe's verdict, `sent` whether a write left."""

    def __init__(self, silent: list[str], *, sent: bool) -> None:
        super().__init__("slow")
        self.silent = silent
        self.sent = sent


class EtcdClient:
    """Calls on the members of one etcd cluster (see the module docstring)."""

    def __init__(self, address: EtcdAddress, *, tls: EtcdTLS | None = None,
                 request_timeout: float = DEFAULT_TIMEOUT, attempt_timeout: float = ATTEMPT_TIMEOUT,
                 slow_after: float = SLOW_AFTER) -> None:
        self.address = address
        self.tls = tls
        scheme = "https" if tls is not None and tls.enabled else "http"
        self.urls = tuple(f"{scheme}://{endpoint}" for endpoint in address.endpoints)
        self.request_timeout = request_timeout
        self.attempt_timeout = attempt_timeout
        self.slow_after = slow_after
        self._local = threading.local()
        self._preferred = 0
        self._avoid_until: dict[str, float] = {}
        self._sessions: list[requests.Session] = []
        self._lock = threading.Lock()
        self._writer: DaemonWorkers | None = None
        self._probe_lock = threading.Lock()
        self._probed: tuple[float, list[str]] | None = None
        self._probe_sessions: dict[str, requests.Session] = {}

    # -- sessions ------------------------------------------------------------------------

    def session(self) -> requests.Session:
        """This thread's session (made on first use)."""
        session = getattr(self._local, "session", None)
        if session is None:
            session = self.new_session()
            self._local.session = session
            with self._lock:
                self._sessions.append(session)
        return session

    def new_session(self) -> requests.Session:
        """A session of its own (a watch stream holds one while it reads)."""
        session = requests.Session()
        session.trust_env = False  # else REQUESTS_CA_BUNDLE silently replaces `verify`
        if self.tls is not None and self.tls.enabled:
            session.verify = self.tls.ca_file or True
            if self.tls.cert_file:
                session.cert = (self.tls.cert_file, self.tls.key_file) if self.tls.key_file else self.tls.cert_file
        adapter = _KeepAliveAdapter(pool_connections=len(self.urls), pool_maxsize=4, max_retries=0)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        return session

    def close(self) -> None:
        """Close this thread's session."""
        session = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None

    def close_all(self) -> None:
        """Close every thread's session and the write workers (the store is closed)."""
        with self._lock:
            sessions, self._sessions = self._sessions, []
            probes, self._probe_sessions = list(self._probe_sessions.values()), {}
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.shutdown()
        for session in sessions + probes:
            session.close()

    def _order(self) -> list[int]:
        """Member indexes to try: the one that answered last first, members avoided lately last."""
        first = self._preferred
        order = [(first + i) % len(self.urls) for i in range(len(self.urls))]
        now = time.monotonic()
        avoided = {url for url, until in list(self._avoid_until.items()) if until > now}
        return [i for i in order if self.urls[i] not in avoided] + [i for i in order if self.urls[i] in avoided]

    def avoid(self, url: str) -> None:
        """Order `url` last for AVOID_FOR seconds and drop every thread's pooled connections to it."""
        self._avoid_until[url] = time.monotonic() + AVOID_FOR
        parts = urlsplit(url)
        with self._lock:
            sessions = list(self._sessions)
        for session in sessions:
            for adapter in list(session.adapters.values()):
                pools = getattr(getattr(adapter, "poolmanager", None), "pools", None)
                if pools is None:
                    continue
                for key in list(pools.keys()):
                    if (getattr(key, "key_host", None), getattr(key, "key_port", None)) == (parts.hostname, parts.port):
                        try:
                            del pools[key]  # closes the pool's idle connections; busy ones close when returned
                        except KeyError:
                            pass

    def _answered(self, index: int) -> None:
        self._preferred = index
        self._avoid_until.pop(self.urls[index], None)

    # -- calls -----------------------------------------------------------------------------

    def call(self, path: str, body: dict, *, write: bool = False, url: str | None = None,
             timeout: float | None = None) -> dict:
        """POST /v3<path> with a JSON body; the decoded answer. See the module docstring for failover/errors."""
        data = json.dumps(body, separators=(",", ":")).encode()
        if len(data) > MAX_REQUEST_BYTES:
            raise RequestEntityTooLarge(f"etcd: the request is {len(data)} bytes, over etcd's request limit "
                                        f"(--max-request-bytes, {MAX_REQUEST_BYTES} bytes): write fewer or "
                                        "smaller objects at once")
        budget = self.request_timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        failures: dict[str, str] = {}
        unknown = False
        pinned = url is not None  # one given member (defragment): no probing, no failover
        order = [self.urls.index(url)] if url is not None else self._order()
        resend_safe = write and path == "/kv/txn" and resend_is_harmless(body)
        position = 0
        patient = False  # the member asked answers its status: wait for it up to the deadline
        busy: list[int] = []  # members that answered a read with "no leader"/"timed out": asked again
        round_started = time.monotonic()
        while True:
            if position >= len(order):
                if not busy or deadline - time.monotonic() < 2 * BUSY_PAUSE:
                    break
                silent = self.probe(since=round_started)
                if self._lost_quorum(silent):  # no election can end: say so now
                    raise self.unavailable(failures, write=False, unknown=False, silent=silent)
                time.sleep(BUSY_PAUSE)  # an election takes a second or two: ask the members that answer again
                order, busy, position, round_started = busy, [], 0, time.monotonic()
            index = order[position]
            base = self.urls[index]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                if pinned:
                    response = self._post(base, path, data, remaining)
                elif write:
                    response = self._write(base, path, data, deadline)
                else:
                    response = self._read(base, path, data, remaining, patient=patient)
            except _Slow as slow:
                if self._lost_quorum(slow.silent):
                    raise self.unavailable(failures | {base: "no answer"}, write=write,
                                           unknown=write and slow.sent, silent=slow.silent) from None
                if base not in slow.silent:
                    patient = True  # alive but slow: ask it again, waiting longer
                    continue
                self.avoid(base)
                failures[base] = f"no answer within {self.slow_after if write else self.attempt_timeout:g} s"
                if write and slow.sent and not resend_safe:
                    raise self.unavailable(failures, write=True, unknown=True, silent=slow.silent) from None
                position, patient = position + 1, False
                continue
            except requests.exceptions.SSLError as error:
                failures[base] = f"TLS: {_reason(error)}"
                position += 1
                continue
            except requests.exceptions.ConnectTimeout:
                failures[base] = "no answer"
                self.avoid(base)
                position += 1
                continue
            except requests.exceptions.Timeout:
                failures[base] = f"no answer within {budget:g} s"
                self.avoid(base)
                if write:
                    unknown = True
                    break
                position += 1
                continue
            except requests.exceptions.ConnectionError as error:
                failures[base] = _reason(error)
                self.avoid(base)
                if write and not _never_sent(error):
                    unknown = True
                    break
                position += 1
                continue
            if response.status_code == 200:
                self._answered(index)
                return response.json()
            message = _error_text(response)
            lowered = message.lower()
            if "compacted" in lowered:
                raise Gone(f"too old resource version: etcd: {message}")
            if "too large" in lowered:
                raise RequestEntityTooLarge(f"etcd: {message}: the transaction exceeds etcd's request limit "
                                            "(--max-request-bytes, 1.5 MiB by default): write fewer or smaller "
                                            "objects at once")
            if "too many operations" in lowered:
                raise StoreError(f"etcd: {message}: the transaction has more operations than etcd's "
                                 f"--max-txn-ops allows ({MAX_TXN_OPS} by default)")
            if "space exceeded" in lowered:
                raise StoreError(f"etcd: {message}: the cluster is out of space (--quota-backend-bytes): "
                                 "compact and defragment (`kctl vacuum`), then disarm the NOSPACE alarm")
            if response.status_code in (502, 503, 504) or any(text in lowered for text in _UNAVAILABLE):
                failures[base] = message
                if write:
                    unknown = True
                    break
                if not pinned:
                    busy.append(index)
                position, patient = position + 1, False
                continue
            raise StoreError(f"etcd {path}: {message}")
        raise self.unavailable(failures, write=write, unknown=unknown)

    def _post(self, base: str, path: str, data: bytes, read_timeout: float) -> requests.Response:
        """One POST on this thread's session."""
        return self.session().post(base + "/v3" + path, data=data, headers={"Content-Type": "application/json"},
                                   timeout=(min(CONNECT_TIMEOUT, read_timeout), read_timeout))

    def _read(self, base: str, path: str, data: bytes, remaining: float, *, patient: bool) -> requests.Response:
        """A read on one member: attempt_timeout (all that remains when `patient`), then _Slow with the probe."""
        limit = remaining if patient else min(self.attempt_timeout, remaining)
        started = time.monotonic()
        try:
            return self._post(base, path, data, limit)
        except requests.exceptions.Timeout:
            if limit >= remaining:
                raise
            raise _Slow(self.probe(since=started), sent=True) from None

    def _write(self, base: str, path: str, data: bytes, deadline: float) -> requests.Response:
        """A write sent by a worker while this thread waits; every slow_after without an answer: _Slow."""
        try:
            future = self._writers().submit(self._post, base, path, data, deadline - time.monotonic())
        except RuntimeError:  # no new threads (the interpreter is exiting): send it here
            return self._post(base, path, data, max(deadline - time.monotonic(), 0.001))
        while True:
            waiting_since = time.monotonic()
            wait = min(self.slow_after, deadline - waiting_since)
            try:
                return future.result(timeout=max(wait, 0.0))
            except FutureTimeout:
                pass
            except CancelledError:
                raise StoreError("etcd: the store was closed before this write was sent; nothing was written") \
                    from None
            if time.monotonic() >= deadline:
                if future.cancel():  # it waited for a free worker all along: never sent
                    raise requests.exceptions.ConnectTimeout("not sent in time") from None
                raise requests.exceptions.ReadTimeout("no answer") from None
            silent = self.probe(since=waiting_since)
            if base in silent or self._lost_quorum(silent):
                raise _Slow(silent, sent=not future.cancel()) from None

    def _writers(self) -> DaemonWorkers:
        with self._lock:
            if self._writer is None:
                self._writer = DaemonWorkers(WRITE_WORKERS, name="kctl-etcd-write")
            return self._writer

    def stream(self, path: str, body: dict, *, session: requests.Session) -> requests.Response:
        """Open a streaming POST (a watch) on the first member that answers; StoreUnavailable if none does.

        As a read: a member gets attempt_timeout to send the response's headers (etcd's gateway sends
        them with the watch's "created" message); then, if it answers its status (slow, not gone), the
        rest of request_timeout, else it is avoided and the next one asked. Once the headers came, the
        stream has no read timeout (a quiet watch stays open).
        """
        failures: dict[str, str] = {}
        deadline = time.monotonic() + self.request_timeout
        for index in self._order():
            base = self.urls[index]
            patient = False
            while True:
                started = time.monotonic()
                remaining = max(0.0, deadline - started)
                wait = remaining if patient else min(self.attempt_timeout, remaining)
                try:
                    # hasleader: etcd ends the stream when this member loses its leader (clientv3.WithRequireLeader)
                    response = session.post(base + "/v3" + path, json=body, stream=True,
                                            headers={"Grpc-Metadata-hasleader": "true"},
                                            timeout=(CONNECT_TIMEOUT, wait))
                except requests.exceptions.ReadTimeout:
                    if not patient and wait < remaining and base not in self.probe(since=started):
                        patient = True
                        continue
                    failures[base] = f"no answer within {wait:g} s"
                    self.avoid(base)
                    break
                except requests.exceptions.RequestException as error:
                    failures[base] = _reason(error)
                    break
                if response.status_code == 200:
                    self._answered(index)
                    _no_read_timeout(response)
                    return response
                failures[base] = _error_text(response)
                response.close()
                break
        raise self.unavailable(failures, write=False, unknown=False)

    # -- diagnosis ---------------------------------------------------------------------------

    def probe(self, *, since: float) -> list[str]:
        """silent_members(), shared: a probe begun after `since` and under PROBE_FRESH s ago is reused.

        Many threads timing out at once thus make one probe; a probe older than a thread's wait is not
        evidence about what it waited for.
        """
        with self._probe_lock:
            now = time.monotonic()
            if self._probed is not None and self._probed[0] >= since and now - self._probed[0] < PROBE_FRESH:
                return list(self._probed[1])
            silent = self.silent_members()
            self._probed = (now, silent)
            return list(silent)

    def _lost_quorum(self, silent: list[str]) -> bool:
        total = len(self.urls)
        return len(silent) > total // 2 if total > 1 else bool(silent)

    def _probe_session(self, url: str) -> requests.Session:
        with self._lock:
            session = self._probe_sessions.get(url)
            if session is None:
                session = self._probe_sessions[url] = self.new_session()
            return session

    def silent_members(self) -> list[str]:
        """The members (URLs) that do not answer /v3/maintenance/status within STATUS_TIMEOUT, asked at once."""
        def ask(url: str) -> bool:
            try:
                self._probe_session(url).post(url + "/v3/maintenance/status", data=b"{}",
                                              timeout=STATUS_TIMEOUT).raise_for_status()
                return True
            except requests.exceptions.RequestException:
                return False

        try:
            with ThreadPoolExecutor(max_workers=len(self.urls)) as pool:
                answers = list(pool.map(ask, self.urls))
        except RuntimeError:  # no new threads (the interpreter is exiting): ask one after another
            answers = [ask(url) for url in self.urls]
        return [url for url, ok in zip(self.urls, answers) if not ok]

    def unavailable(self, failures: dict[str, str], *, write: bool, unknown: bool,
                    silent: list[str] | None = None) -> StoreError:
        """The error for a request no member served (see the module docstring); `silent`: a probe already made."""
        if failures and all(reason.startswith("TLS:") for reason in failures.values()):
            first = next(iter(failures.items()))
            return StoreError(f"etcd: cannot connect to {first[0]} over TLS ({first[1][5:]}): check --etcd-cafile, "
                              "--etcd-certfile and --etcd-keyfile")
        if silent is None:
            silent = self.silent_members()
        total = len(self.urls)
        outcome = ("this write's outcome is unknown (it may still be applied): read before retrying" if unknown
                   else "nothing was written" if write else "the read failed: retry when the members answer")
        if total > 1 and len(silent) > total // 2:
            return StoreUnavailable(f"etcd: the cluster has lost its quorum: {len(silent)} of {total} members do "
                                    f"not answer ({', '.join(silent)}); {outcome}")
        if silent and len(silent) == total:
            return StoreUnavailable(f"etcd: no member answers ({', '.join(silent)}); {outcome}")
        detail = "; ".join(f"{url}: {reason}" for url, reason in failures.items()) or "no time left"
        lost = f" ({len(silent)} of {total} members do not answer: {', '.join(silent)})" if silent else ""
        return StoreUnavailable(f"etcd: the request failed{lost}: {detail}; {outcome}")


def _no_read_timeout(response: requests.Response) -> None:
    """Let a stream whose headers came wait for its body without end (the opening request's timeout was for them)."""
    sock = getattr(getattr(response.raw, "connection", None), "sock", None)
    if sock is not None:  # (None: the body has ended already; reading it says so)
        sock.settimeout(None)


def resend_is_harmless(body: dict) -> bool:
    """Whether a txn cannot apply twice: it writes a key whose mod_revision/version it compares for equality.

    After the first apply that key's mod_revision (and version) changed, so a second send fails its
    compares. Deleting a key compared with a nonzero value counts too (a deleted key reads 0). A txn
    that writes in its failure branch never counts.
    """
    if any(_op_key(op) for op in body.get("failure") or ()):
        return False
    puts = {_op_key(op) for op in body.get("success") or () if "request_put" in op}
    deletes = {_op_key(op) for op in body.get("success") or () if "request_delete_range" in op
               and not (op["request_delete_range"] or {}).get("range_end")}
    for compare in body.get("compare") or ():
        if compare.get("range_end") or compare.get("result", "EQUAL") != "EQUAL":
            continue
        target = compare.get("target", "VERSION")
        field = {"MOD": "mod_revision", "VERSION": "version"}.get(target)
        if field is None:
            continue
        value = str(compare.get(field, "0"))
        if compare.get("key") in puts or (compare.get("key") in deletes and value not in ("", "0")):
            return True
    return False


def _op_key(op: dict) -> str | None:
    """The key a txn op writes (None for a range)."""
    for name in ("request_put", "request_delete_range"):
        if name in op:
            return (op[name] or {}).get("key")
    return None


def _reason(error: BaseException) -> str:
    """A short reason for a connection failure (no tracebacks, no values)."""
    inner: Any = error.args[0] if error.args else error
    inner = getattr(inner, "reason", inner)
    text = str(inner)
    if "Connection refused" in text:
        return "connection refused"
    if "certificate" in text.lower() or "ssl" in text.lower() or "tls" in text.lower():
        tail = text.split("] ")[-1] if "] " in text else text
        return tail.split(" (_ssl")[0][:160]
    return type(inner).__name__ + (f": {text[:160]}" if text else "")


def _never_sent(error: BaseException) -> bool:
    """Whether a connection error happened before the request was sent (refused, no route, DNS, pool closed)."""
    from urllib3.exceptions import ClosedPoolError, NewConnectionError

    inner: Any = error.args[0] if error.args else None
    return (isinstance(getattr(inner, "reason", None), NewConnectionError)
            or isinstance(inner, (NewConnectionError, ClosedPoolError)))


def _error_text(response: requests.Response) -> str:
    """etcd's error message of a failed gateway call."""
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text.strip()[:200]}"
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict):  # a watch stream's error object
            return str(inner.get("message") or inner)
        return str(body.get("message") or inner or body)[:300]
    return str(body)[:300]
