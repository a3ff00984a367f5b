"""Run inside a private network namespace (`unshare -n`): a Proxier loads its rules with the real `nft`.

Called by test_sync_live.py as `unshare -n python sync_probe.py`. Makes a veth interface
holding two "pod" addresses (each with a TCP server answering its own address) and the
node address, adds an unrelated table, then drives a `Proxier` (kctl.agent.proxy.sync)
whose runtime runs commands on this host through kctl.runtime.hostexec, over fake sources
holding Services and EndpointSlices the probe changes step by step; prints JSON: the
table after each step, who answered the ClusterIP, how many loads each sync made. The
namespace, and everything in it, goes when this exits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from netns_probe import ask, serve, sh  # noqa: E402
from proxy_cases import ep, eps, svc  # noqa: E402

PODS = ("10.244.1.2", "10.244.1.3")


class Cache:
    """What a Proxier reads of an informer: list() and get()."""

    def __init__(self, items: list[dict]) -> None:
        self.items = items

    def list(self) -> list[dict]:
        return list(self.items)

    def get(self, namespace: str, name: str) -> dict | None:
        return next((o for o in self.items if o["metadata"]["name"] == name), None)


class Sources:
    """Fake ProxySources: the probe sets the Services and EndpointSlices."""

    def __init__(self) -> None:
        self.services, self.slices = Cache([]), Cache([])
        self.nodes = Cache([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "h1"},
                             "status": {"addresses": [{"type": "InternalIP", "address": "10.77.0.11"}]}}])

    def cluster_cidr(self) -> str:
        return "10.244.0.0/16"


class LocalHost:
    """A runtime whose host is this namespace (kctl.runtime.hostexec, as PodmanRuntime does for unix://)."""

    def run_on_host(self, argv, *, stdin=None, timeout=30.0):
        from kctl.runtime.hostexec import run_on_host

        return run_on_host("unix:///run/podman/podman.sock", argv, stdin=stdin, timeout=timeout)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def table() -> str:
    return subprocess.run(["nft", "list", "table", "ip", "kctl"], capture_output=True, text=True).stdout


def main() -> None:
    from kctl.agent.proxy.sync import Proxier

    sh("ip", "link", "set", "lo", "up")
    sh("ip", "link", "add", "pods", "type", "veth", "peer", "name", "pods-peer")
    sh("ip", "link", "set", "pods", "up")
    sh("ip", "link", "set", "pods-peer", "up")
    sh("ip", "addr", "add", "10.77.0.11/24", "dev", "pods")
    for ip in PODS:
        sh("ip", "addr", "add", f"{ip}/32", "dev", "pods")
        serve(ip, 8080)
    sh("ip", "route", "add", "10.96.0.0/16", "dev", "pods")
    sh("nft", "add", "table", "ip", "other")
    sh("nft", "add", "chain", "ip", "other", "keep")
    sources, clock = Sources(), Clock()
    proxier = Proxier(None, "h1", LocalHost(), sources=sources, clock=clock)
    result: dict = {}
    sources.services.items = [svc("web"), svc("old", cluster_ip="10.96.0.30")]
    sources.slices.items = [eps("web", [ep(PODS[0], "h1")]), eps("old", [ep(PODS[1], "h1")])]
    result["first"] = proxier.sync()
    result["first-table"] = table()
    result["first-answers"] = sorted({ask("10.96.0.20", 80) for _ in range(10)})
    result["unchanged"] = proxier.sync()
    result["loads-after-unchanged"] = proxier.applies
    sources.services.items = [svc("web")]
    sources.slices.items = [eps("web", [ep(PODS[1], "h1")])]
    result["second"] = proxier.sync()
    result["second-table"] = table()
    result["second-answers"] = sorted({ask("10.96.0.20", 80) for _ in range(10)})
    result["old-answers"] = ask("10.96.0.30", 80)
    sh("nft", "delete", "table", "ip", "kctl")  # the host rebooted: the table is gone
    clock.now += 31  # the resync is due
    result["resync"] = proxier.sync()
    result["resync-table"] = table()
    result["loads"] = proxier.applies
    sh("nft", "delete", "table", "ip", "kctl")  # deleted by hand, then a change before the next resync
    sources.slices.items = [eps("web", [ep(PODS[0], "h1")])]
    result["after-hand-delete"] = proxier.sync()
    result["after-hand-delete-answers"] = sorted({ask("10.96.0.20", 80) for _ in range(10)})
    result["tables"] = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout.splitlines()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
