"""Run inside a private network namespace (the "host"): two pod namespaces on a bridge reach their Service.

Called by test_nftables_live.py as `unshare -n python bridge_probe.py CASE.json`. Makes a
bridge 10.244.1.1/24 and two "pods" (each a child process in its own network namespace,
joined by a veth whose bridge port is in hairpin mode, as the pod network must set it):
each answers TCP on :8080 with its own address and the address it saw the client come
from. Loads the rendered rules and connects from pod 1 to the Service's
ClusterIP: it must reach itself (hairpin) and the other pod on the same bridge (the reply
crosses the bridge, so conntrack on the bridged path must undo the DNAT). Prints JSON.
The child processes are ended by their PIDs; the namespaces go with them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

PODS = {"p1": "10.244.1.2", "p2": "10.244.1.3"}

SERVER = """
import socket, time
while True:
    try:
        listener = socket.create_server(("{ip}", 8080))
        break
    except OSError:
        time.sleep(0.05)
while True:
    conn, peer = listener.accept()
    with conn:
        conn.sendall(("{ip} " + peer[0]).encode())
"""

CLIENT = """
import json, socket
seen = []
for _ in range(30):
    try:
        with socket.create_connection(("10.96.0.20", 80), timeout=3) as conn:
            seen.append(conn.recv(64).decode())
    except OSError as exc:
        seen.append("error: " + str(exc))
print(json.dumps(seen))
"""


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=30)


def main(case_file: str) -> None:
    from kctl.agent.proxy import render

    case = json.loads(open(case_file).read())
    sh("ip", "link", "set", "lo", "up")
    sh("sysctl", "-qw", "net.ipv4.ip_forward=1")
    sh("ip", "link", "add", "br0", "type", "bridge")
    sh("ip", "addr", "add", "10.244.1.1/24", "dev", "br0")
    sh("ip", "link", "set", "br0", "up")
    children: dict[str, subprocess.Popen] = {}
    try:
        for name, ip in PODS.items():
            child = subprocess.Popen(["unshare", "-n", sys.executable, "-c", SERVER.format(ip=ip)])
            children[name] = child
            pid = str(child.pid)
            time.sleep(0.1)  # unshare has made the namespace by the time python starts
            sh("ip", "link", "add", f"veth-{name}", "type", "veth", "peer", "name", f"eth-{name}")
            sh("ip", "link", "set", f"eth-{name}", "netns", pid)
            sh("ip", "link", "set", f"veth-{name}", "master", "br0", "up")
            sh("ip", "link", "set", f"veth-{name}", "type", "bridge_slave", "hairpin", "on")
            for args in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", f"{ip}/24", "dev", f"eth-{name}"],
                         ["ip", "link", "set", f"eth-{name}", "up"],
                         ["ip", "route", "add", "default", "via", "10.244.1.1"]):
                sh("nsenter", "-t", pid, "-n", *args)
        subprocess.run(["nft", "-f", "-"], input=render(case["services"], case["slices"], node="h1",
                                                       node_addresses=["10.77.0.11"], cluster_cidr="10.244.0.0/16"),
                       check=True, capture_output=True, text=True, timeout=60)
        done = subprocess.run(["nsenter", "-t", str(children["p1"].pid), "-n", sys.executable, "-c", CLIENT],
                              capture_output=True, text=True, timeout=120)
        print(json.dumps({"answers": json.loads(done.stdout or "[]"), "stderr": done.stderr}))
    finally:
        for child in children.values():
            child.kill()
            child.wait(timeout=10)


if __name__ == "__main__":
    main(sys.argv[1])
