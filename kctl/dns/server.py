"""The cluster DNS server: the zone's answers over UDP and TCP, every other name forwarded upstream.

`ClusterDNS(view, address=..., port=...)` serves kctl.dns.records' answers for the cluster
zone (authoritative, with the zone's SOA in the authority section of a negative answer, so
resolvers cache NXDOMAIN as briefly as the records) and forwards other questions to the
host's resolvers (`upstreams`, by default the nameservers of /etc/resolv.conf), over the
protocol the question came in on; SERVFAIL when no upstream answers. Built on dnslib's
socketserver-based DNSServer, one thread per request. `allow` (a source address -> bool)
keeps it from being an open resolver: a question from any other source gets REFUSED.
kctl.daemon.clusterdns runs one over the daemon's shared informers (docs/networking.md).
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
from typing import Callable, Iterable

from kctl.dns.records import TTL, ClusterView, answer, in_zone

log = logging.getLogger("kctl.dns")

DEFAULT_ZONE = "cluster.local"
RESOLV_CONF = "/etc/resolv.conf"
#: seconds one upstream may take before the next is asked
UPSTREAM_TIMEOUT = 2.0
#: how often each serving loop looks whether close() was called (socketserver's default, 0.5 s, per loop
#: made every daemon stop wait up to a second)
SERVE_POLL_SECONDS = 0.1


def host_nameservers(path: str = RESOLV_CONF) -> list[tuple[str, int]]:
    """The `nameserver` lines of a resolv.conf as (address, 53); empty if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    servers = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            servers.append((parts[1], 53))
    return servers


class ClusterResolver:
    """dnslib's resolver interface: `resolve(request, handler) -> reply`."""

    def __init__(self, view: ClusterView, *, zone: str = DEFAULT_ZONE,
                 upstreams: Iterable[tuple[str, int]] = (), timeout: float = UPSTREAM_TIMEOUT,
                 allow: Callable[[str], bool] | None = None) -> None:
        self.view = view
        self.allow = allow
        self.zone = zone.rstrip(".").lower()
        self.upstreams = list(upstreams)
        self.timeout = timeout

    def resolve(self, request, handler):  # dnslib types; imported lazily
        from dnslib import QTYPE, RCODE

        question = request.q
        qname = str(question.qname)
        if self.allow is not None and not self._allowed(handler):
            reply = request.reply()
            reply.header.aa = 0
            reply.header.rcode = RCODE.REFUSED
            return reply
        if in_zone(qname, self.zone):
            reply = request.reply()
            try:
                result = answer(qname, QTYPE.get(question.qtype, str(question.qtype)), self.view, zone=self.zone)
            except Exception:  # a bug here must not take the server down; the client gets SERVFAIL
                log.exception("cluster DNS answer for %s failed", qname)
                reply.header.rcode = RCODE.SERVFAIL
                return reply
            reply.header.rcode = getattr(RCODE, result.rcode)
            for record in result.records:
                reply.add_answer(_rr(record))
            if not result.records:
                reply.add_auth(self._soa())
            return reply
        return self._forward(request, tcp=getattr(handler, "protocol", "udp") == "tcp")

    def _allowed(self, handler) -> bool:
        address = getattr(handler, "client_address", None)
        source = str(address[0]) if address else ""
        try:
            return bool(self.allow(source))  # type: ignore[misc]
        except Exception:  # a broken policy refuses rather than serves
            log.exception("cluster DNS: source check of %s failed", source)
            return False

    def _forward(self, request, *, tcp: bool):
        from dnslib import RCODE, DNSRecord

        for host, port in self.upstreams:
            try:
                data = request.send(host, port, tcp=tcp, timeout=self.timeout)
                return DNSRecord.parse(data)
            except (OSError, socket.timeout, ValueError) as exc:  # dnslib raises DNSError (a ValueError)
                log.debug("upstream %s:%s did not answer %s: %s", host, port, request.q.qname, exc)
        reply = request.reply()
        reply.header.ra = 1
        reply.header.rcode = RCODE.SERVFAIL
        return reply

    def _soa(self):
        from dnslib import QTYPE, RR, SOA

        zone = self.zone + "."
        return RR(zone, QTYPE.SOA, ttl=TTL,
                  rdata=SOA(f"ns.dns.{zone}", f"hostmaster.{zone}", (1, 7200, 1800, 86400, TTL)))


def _rr(record):
    from dnslib import AAAA, CNAME, QTYPE, RR, SRV, TXT, A

    if record.rtype == "A":
        rdata = A(record.data)
    elif record.rtype == "AAAA":
        rdata = AAAA(record.data)
    elif record.rtype == "CNAME":
        rdata = CNAME(record.data)
    elif record.rtype == "TXT":
        rdata = TXT(record.data)
    elif record.rtype == "SRV":
        priority, weight, port, target = record.data
        rdata = SRV(priority=priority, weight=weight, port=port, target=target)
    else:
        raise ValueError(f"no record type {record.rtype}")
    return RR(record.name, getattr(QTYPE, record.rtype), ttl=record.ttl, rdata=rdata)


class _QuietLogger:
    """dnslib's logger interface: requests are not logged (a resolver asks many times a second)."""

    def __getattr__(self, name: str):
        if name.startswith("log_"):
            return self._error if name == "log_error" else (lambda *args: None)
        raise AttributeError(name)

    @staticmethod
    def _error(handler, exc) -> None:
        log.debug("cluster DNS: bad request from %s: %s", handler.client_address, exc)


#: Linux's IP_PKTINFO (socket.IP_PKTINFO where Python defines it)
_IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)


class _ReplyFrom:
    """The UDP socket as a handler sees it, replying from the address the question was sent to.

    A server bound to 0.0.0.0 otherwise replies from the address the route to the client picks:
    a pod on this host's bridge asks 10.96.0.10, kube-proxy's DNAT sends it to this host's
    advertised address, and a reply from the bridge's own address is not one conntrack can
    map back, so the pod never sees it. Sending with IP_PKTINFO set to the question's
    destination address keeps the reply on the connection (as unbound's interface-automatic).
    """

    def __init__(self, sock: socket.socket, destination: bytes | None) -> None:
        self._sock, self._destination = sock, destination

    def sendto(self, data: bytes, address) -> int:
        if self._destination is None:
            return self._sock.sendto(data, address)
        import struct

        info = struct.pack("I4s4s", 0, self._destination, b"\0\0\0\0")
        return self._sock.sendmsg([data], [(socket.IPPROTO_IP, _IP_PKTINFO, info)], 0, address)


def _udp_server_class():
    """dnslib's UDP server, receiving each question with its destination address (IPv4, IP_PKTINFO)."""
    import struct

    from dnslib.server import UDPServer

    class PktinfoUDPServer(UDPServer):
        def server_bind(self) -> None:
            if self.address_family == socket.AF_INET:
                self.socket.setsockopt(socket.IPPROTO_IP, _IP_PKTINFO, 1)
            super().server_bind()

        def get_request(self):
            if self.address_family != socket.AF_INET:
                return super().get_request()
            data, ancillary, _flags, client = self.socket.recvmsg(self.max_packet_size, socket.CMSG_SPACE(12))
            destination = None
            for level, kind, value in ancillary:
                if level == socket.IPPROTO_IP and kind == _IP_PKTINFO and len(value) >= 12:
                    destination = struct.unpack("I4s4s", value[:12])[2]
            return (data, _ReplyFrom(self.socket, destination)), client

    return PktinfoUDPServer


#: how many UDP ports (port 0) are tried before one whose number is free for TCP too
PORT_PAIR_ATTEMPTS = 20


class ClusterDNS:
    """A UDP and a TCP server on one address and port, answering through a ClusterResolver."""

    def __init__(self, view: ClusterView, *, address: str = "127.0.0.1", port: int = 53,
                 zone: str = DEFAULT_ZONE, upstreams: Iterable[tuple[str, int]] | None = None,
                 allow: Callable[[str], bool] | None = None) -> None:
        from dnslib.server import DNSServer

        own = {(address, port)}
        chosen = host_nameservers() if upstreams is None else list(upstreams)
        self.resolver = ClusterResolver(view, zone=zone, upstreams=[u for u in chosen if u not in own], allow=allow)
        logger = _QuietLogger()
        self.address = address
        # port 0: the TCP server takes the port the UDP one was given; another process may hold that port for
        # TCP, so a free pair is looked for a few times (a port asked for explicitly is tried once)
        for attempt in range(1 if port else PORT_PAIR_ATTEMPTS):
            self._udp = DNSServer(self.resolver, address=address, port=port, logger=logger,
                                  server=_udp_server_class())
            self.port = self._udp.server.server_address[1]
            try:
                self._tcp = DNSServer(self.resolver, address=address, port=self.port, tcp=True, logger=logger)
                break
            except OSError as exc:
                self._udp.server.server_close()
                if port or exc.errno != errno.EADDRINUSE or attempt == PORT_PAIR_ATTEMPTS - 1:
                    raise
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Serve in two daemon threads until close()."""
        for server, proto in ((self._udp, "udp"), (self._tcp, "tcp")):
            thread = threading.Thread(target=server.server.serve_forever, kwargs={"poll_interval": SERVE_POLL_SECONDS},
                                      name=f"kctl-dns-{proto}", daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("cluster DNS serving %s on %s:%d (udp, tcp)", self.resolver.zone, self.address, self.port)

    def close(self) -> None:
        """Stop both servers and release the port."""
        for server in (self._udp, self._tcp):
            if self._threads:
                server.server.shutdown()
            server.server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()
