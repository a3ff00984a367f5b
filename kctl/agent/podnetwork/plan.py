"""What the pod network should look like on one host, and the commands that get it there (pure).

kctl.agent.podnetwork.reconciler calls these with what the Node informer holds and what
the host shows; nothing here touches a host. The model is flannel's host-gw:

- the host's Podman bridge network `kctl` has the Node's podCIDR, its gateway the
  subnet's first address (`network_for`);
- every other Node with a podCIDR and an InternalIP gets a route `podCIDR via InternalIP
  proto 76` on this host (`wanted_routes`), and routes of proto 76 no one wants go
  (`route_commands`, from `ip -j route show proto 76`);
- the nft table `ip kctl-net` (`render_table`): pod-to-pod traffic inside the cluster CIDR
  keeps its source (a null SNAT at srcnat-10 binds the connection before netavark's
  masquerade at srcnat would), traffic from the pod CIDR to outside the cluster CIDR is
  masqueraded. Packets kube-proxy marked for masquerade (0x4000, kctl.agent.proxy) are left
  to its own postrouting chain (a pod reaching itself through its Service).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

NETWORK_NAME = "kctl"
TABLE = "kctl-net"
#: the routing protocol number kctl's routes carry (`ip route ... proto 76`): how kctl finds its own
ROUTE_PROTO = 76
#: kube-proxy's masquerade mark (kctl.agent.proxy.nftables.MASQUERADE_MARK)
MASQUERADE_MARK = 0x4000


@dataclass(frozen=True)
class NodeRoute:
    """Another Node's pods: its podCIDR, reached through its InternalIP."""

    node: str
    pod_cidr: str
    via: str


def network_for(pod_cidr: str) -> tuple[str, str]:
    """(subnet, gateway) of the host's pod network: the podCIDR and its first address."""
    network = ipaddress.ip_network(pod_cidr, strict=False)
    if network.version != 4 or network.num_addresses < 4:
        raise ValueError(f"podCIDR {pod_cidr!r} is not an IPv4 network of 4 addresses or more")
    return str(network), str(network.network_address + 1)


def _pod_cidr(node: dict) -> str:
    spec = node.get("spec") or {}
    cidr = spec.get("podCIDR") or next(iter(spec.get("podCIDRs") or ()), "")
    return str(cidr or "")


def pod_cidr_of(node: dict) -> str:
    """The Node's IPv4 podCIDR ("" when it has none, or not a valid one)."""
    cidr = _pod_cidr(node)
    try:
        return str(ipaddress.IPv4Network(cidr, strict=False)) if cidr else ""
    except ValueError:
        return ""


def internal_ip_of(node: dict) -> str:
    """The Node's InternalIP from its status ("" when it has none)."""
    for address in (node.get("status") or {}).get("addresses") or ():
        if address.get("type") == "InternalIP" and address.get("address"):
            return str(address["address"])
    return ""


def wanted_routes(nodes: list[dict], *, me: str, my_ip: str) -> dict[str, NodeRoute]:
    """podCIDR -> route for every other Node with a podCIDR and an InternalIP (not this host's own)."""
    routes: dict[str, NodeRoute] = {}
    for node in sorted(nodes, key=lambda n: (n.get("metadata") or {}).get("name", "")):
        name = (node.get("metadata") or {}).get("name", "")
        cidr, via = pod_cidr_of(node), internal_ip_of(node)
        if name == me or not cidr or not via or via == my_ip:
            continue
        routes.setdefault(cidr, NodeRoute(node=name, pod_cidr=cidr, via=via))
    return routes


def current_routes(ip_json: str) -> dict[str, str]:
    """dst -> gateway of the routes `ip -j route show proto 76` printed."""
    try:
        rows = json.loads(ip_json or "[]")
    except ValueError:
        return {}
    out: dict[str, str] = {}
    for row in rows if isinstance(rows, list) else ():
        if isinstance(row, dict) and row.get("dst"):
            dst = str(row["dst"])
            if "/" not in dst and dst != "default":
                dst += "/32"
            out[dst] = str(row.get("gateway") or "")
    return out


def route_commands(current: dict[str, str], wanted: dict[str, NodeRoute]) -> list[list[str]]:
    """The `ip route` commands that make the host's proto-76 routes `wanted`: replace, then delete."""
    commands = [["ip", "route", "replace", cidr, "via", route.via, "proto", str(ROUTE_PROTO)]
                for cidr, route in sorted(wanted.items()) if current.get(cidr) != route.via]
    commands += [["ip", "route", "del", cidr, "proto", str(ROUTE_PROTO)]
                 for cidr in sorted(current) if cidr not in wanted]
    return commands


def render_table(*, cluster_cidr: str, pod_cidr: str, table: str = TABLE,
                 masquerade_mark: int = MASQUERADE_MARK) -> str:
    """The nft script that replaces the table `ip <table>` at once (one `nft -f -`)."""
    cluster = str(ipaddress.IPv4Network(cluster_cidr, strict=False))
    pods = str(ipaddress.IPv4Network(pod_cidr, strict=False))
    mark = f"0x{masquerade_mark:x}"
    return "\n".join([
        f"table ip {table}",
        f"delete table ip {table}",
        f"table ip {table} {{",
        "\tchain postrouting {",
        "\t\ttype nat hook postrouting priority srcnat - 10; policy accept;",
        "\t\t# pod to pod (any host): no NAT, the other pod sees this pod's own address",
        f"\t\tip saddr {cluster} ip daddr {cluster} meta mark & {mark} == 0 snat ip to ip saddr",
        "\t\t# pod to outside the cluster CIDR: the host's address",
        f"\t\tip saddr {pods} ip daddr != {cluster} ip daddr != 224.0.0.0/4 masquerade",
        "\t}",
        "}",
        "",
    ])


def delete_table_script(table: str = TABLE) -> str:
    """The nft script that removes the table (nothing when it is not there)."""
    return f"table ip {table}\ndelete table ip {table}\n"


__all__ = ["MASQUERADE_MARK", "NETWORK_NAME", "ROUTE_PROTO", "TABLE", "NodeRoute", "current_routes",
           "delete_table_script", "internal_ip_of", "network_for", "pod_cidr_of", "render_table", "route_commands",
           "wanted_routes"]
