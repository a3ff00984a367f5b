"""A UDP answer leaves from the address the question was sent to (kctl.dns.server, IP_PKTINFO).

kube-proxy DNATs 10.96.0.10:53 to the daemon host's advertised address; a reply from another
of the host's addresses is not mapped back by conntrack and the pod never sees it. Run in a
private network namespace (`unshare -n`, root) where loopback also has 10.2.0.1: the client
sends from 127.0.0.1 to 10.2.0.1 on a connected socket, which drops replies from elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="needs root and unshare for a private network namespace")

PROBE = """
import socket, subprocess
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["ip", "addr", "add", "10.2.0.1/32", "dev", "lo"], check=True)
from dnslib import DNSRecord
from kctl.dns.server import ClusterDNS

class View:
    def service(self, namespace, name):
        if (namespace, name) == ("demo", "web"):
            return {"spec": {"clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20"], "type": "ClusterIP"}}
    def endpoint_slices(self, namespace, service):
        return []

dns = ClusterDNS(View(), address="0.0.0.0", port=0, upstreams=[])
dns.start()
client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
client.bind(("127.0.0.1", 0))
client.connect(("10.2.0.1", dns.port))
client.settimeout(3)
client.send(DNSRecord.question("web.demo.svc.cluster.local", "A").pack())
reply = DNSRecord.parse(client.recv(4096))
print(reply.rr[0].rdata)
dns.close()
"""


def test_udp_reply_comes_from_the_address_asked():
    """A question sent to 10.2.0.1 is answered from 10.2.0.1, not from the route's source 127.0.0.1."""
    out = subprocess.run(["unshare", "-n", sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "10.96.0.20"
