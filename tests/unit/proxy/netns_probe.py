"""Run inside a private network namespace (`unshare -n`): load rendered rules, connect through them.

Called by test_nftables_live.py as `unshare -n python netns_probe.py CASE.json`, CASE
holding render's arguments. Makes a veth interface holding two "pod" addresses and a
node address, starts one TCP server per pod address that answers with its own address,
adds an unrelated table, loads the rendered script twice, then syncs in place (render
with the current listing) once as is and once without the first Service, and prints
JSON: who answered each connection, which were refused, the tables and chains left.
The namespace, and everything in it, goes when this exits.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading

PODS = ("10.244.1.2", "10.244.1.3")


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=30)


def serve(ip: str, port: int) -> None:
    listener = socket.create_server((ip, port))

    def loop() -> None:
        while True:
            conn, _ = listener.accept()
            with conn:
                conn.sendall(ip.encode())

    threading.Thread(target=loop, daemon=True).start()


def ask(ip: str, port: int) -> str:
    """Who answers at ip:port: a pod address, 'refused', or 'timeout'."""
    try:
        with socket.create_connection((ip, port), timeout=3) as conn:
            return conn.recv(64).decode()
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return f"error: {exc}"


def load(text: str) -> None:
    subprocess.run(["nft", "-f", "-"], input=text, check=True, capture_output=True, text=True, timeout=60)


def listing() -> str:
    return subprocess.run(["nft", "list", "table", "ip", "kctl"], capture_output=True, text=True).stdout


def main(case_file: str) -> None:
    from kctl.agent.proxy import render

    case = json.loads(open(case_file).read())

    def rendered(services: list, current: str | None = None) -> str:
        return render(services, case["slices"], node=case["node"], node_addresses=case["addresses"],
                      cluster_cidr=case["cidr"], current=current)

    sh("ip", "link", "set", "lo", "up")
    sh("ip", "link", "add", "pods", "type", "veth", "peer", "name", "pods-peer")  # (no dummy module everywhere)
    sh("ip", "link", "set", "pods", "up")
    sh("ip", "link", "set", "pods-peer", "up")
    sh("ip", "addr", "add", "10.77.0.11/24", "dev", "pods")
    for ip in PODS:
        sh("ip", "addr", "add", f"{ip}/32", "dev", "pods")
        serve(ip, 8080)
    sh("ip", "route", "add", "10.96.0.0/16", "dev", "pods")
    sh("nft", "add", "table", "ip", "other")
    sh("nft", "add", "chain", "ip", "other", "keep")
    load(rendered(case["services"]))
    load(rendered(case["services"]))  # a second sync replaces the table without error
    result = {
        "clusterip": [ask("10.96.0.20", 80) for _ in range(40)],
        "nodeport": [ask("10.77.0.11", 30080) for _ in range(10)],
        "sticky": [ask("10.96.0.22", 80) for _ in range(20)],
        "empty": ask("10.96.0.21", 80),
        "empty-nodeport": ask("10.77.0.11", 30081),
        "undefined-port": ask("10.96.0.20", 81),
        "tables": subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout.split("\n"),
    }
    load(rendered(case["services"], listing()))  # in place: the affinity sets keep their clients
    result["sticky-after-in-place"] = [ask("10.96.0.22", 80) for _ in range(10)]
    load(rendered(case["services"][1:], listing()))  # the first Service is gone
    result["listing-without-first"] = listing()
    result["sticky-after-removal"] = ask("10.96.0.22", 80)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
