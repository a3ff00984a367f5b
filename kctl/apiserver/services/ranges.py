"""The address ranges of a cluster: Service CIDR, NodePort range, cluster (pod) CIDR, and their flags' parsing.

Read by the Service allocators (kctl.apiserver.services.clusterip, .nodeport), the daemon's
flag checks (kctl.cli.daemon) and the node IPAM controller (kctl.controllers.nodeipam).
Each parser raises ValueError with one line a user can act on; the defaults are
Kubernetes' (kubeadm's for the two CIDRs).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

#: --service-cluster-ip-range's default (kubeadm's): the ClusterIPs of Services
DEFAULT_SERVICE_CIDR = "10.96.0.0/16"
#: --service-node-port-range's default
DEFAULT_NODE_PORT_RANGE = "30000-32767"
#: --cluster-cidr's default (flannel's): every Node's podCIDR is cut from it
DEFAULT_CLUSTER_CIDR = "10.244.0.0/16"
#: --node-cidr-mask-size's default: a /24 per Node (254 pod addresses)
DEFAULT_NODE_CIDR_MASK_SIZE = 24

#: the store's keys of the two networking.k8s.io/v1 kinds the ClusterIP allocator keeps
SERVICE_CIDR_KIND = "ServiceCIDR.networking.k8s.io"
IP_ADDRESS_KIND = "IPAddress.networking.k8s.io"
#: the ServiceCIDR made from --service-cluster-ip-range (kube-apiserver's name for it)
DEFAULT_SERVICE_CIDR_NAME = "kubernetes"

#: kube-apiserver refuses a Service range larger than this (a /12 for IPv4)
_MIN_SERVICE_PREFIX = 12
#: kube-controller-manager's cidrset: at most 2^16 node subnets in a cluster CIDR
_MAX_SUBNET_BITS = 16


@dataclass(frozen=True)
class PortRange:
    """An inclusive range of ports, `base` to `base + size - 1` (Kubernetes' net.PortRange)."""

    base: int
    size: int

    @property
    def last(self) -> int:
        return self.base + self.size - 1

    def __contains__(self, port: object) -> bool:
        return isinstance(port, int) and not isinstance(port, bool) and self.base <= port <= self.last

    def __str__(self) -> str:
        return f"{self.base}-{self.last}"


def parse_port_range(text: str) -> PortRange:
    """`30000-32767`, `30000+2767` or one port `30000` (as kube-apiserver's --service-node-port-range)."""
    value = text.strip()
    try:
        if "-" in value:
            low, high = (int(part) for part in value.split("-", 1))
        elif "+" in value:
            low, extra = (int(part) for part in value.split("+", 1))
            high = low + extra
        else:
            low = high = int(value)
    except ValueError:
        raise ValueError(f'"{text}" is not a port range (use BASE-LAST, e.g. {DEFAULT_NODE_PORT_RANGE})') from None
    if not 1 <= low <= high <= 65535:
        raise ValueError(f'"{text}" is not a port range within 1-65535 with its first port before its last')
    return PortRange(low, high - low + 1)


def parse_cidr(text: str, *, what: str) -> ipaddress.IPv4Network:
    """An IPv4 network in CIDR notation whose host bits are zero; `what` names the flag in the message."""
    value = text.strip()
    if "/" not in value:
        raise ValueError(f'{what} "{text}" is not a CIDR (ADDRESS/PREFIX-LENGTH, e.g. 10.244.0.0/16)')
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f'{what} "{text}" is not a CIDR ({exc})') from None
    if network.version != 4:
        raise ValueError(f'{what} "{text}": kctl has single-stack IPv4 clusters only')
    return network


def parse_service_cidr(text: str) -> ipaddress.IPv4Network:
    """--service-cluster-ip-range: an IPv4 CIDR of /12 or smaller, as kube-apiserver checks it."""
    network = parse_cidr(text, what="--service-cluster-ip-range")
    if network.prefixlen < _MIN_SERVICE_PREFIX:
        raise ValueError(f'--service-cluster-ip-range "{text}" is too large; for 32-bit addresses, '
                         f"the mask must be >= {_MIN_SERVICE_PREFIX}")
    if network.num_addresses < 4:
        raise ValueError(f'--service-cluster-ip-range "{text}" is too small: it must hold at least 2 addresses')
    return network


def check_cluster_cidr(cluster_cidr: str, mask_size: int) -> ipaddress.IPv4Network:
    """--cluster-cidr with --node-cidr-mask-size, as kube-controller-manager checks them together."""
    network = parse_cidr(cluster_cidr, what="--cluster-cidr")
    if not network.prefixlen <= mask_size <= 30:
        raise ValueError(f"--node-cidr-mask-size {mask_size} must be between the --cluster-cidr's prefix length "
                         f"({network.prefixlen}) and 30")
    if mask_size - network.prefixlen > _MAX_SUBNET_BITS:
        raise ValueError(f"--node-cidr-mask-size {mask_size} cuts {cluster_cidr} into more than "
                         f"{2 ** _MAX_SUBNET_BITS} node subnets: the difference of the masks must be <= "
                         f"{_MAX_SUBNET_BITS}")
    return network


def static_band(size: int, *, low: int, high: int, step: int) -> int:
    """How many of a range's first values are kept for requests (Kubernetes' calculateRangeOffset).

    Dynamic allocation takes from the rest first, so a well-known value asked for by
    name (10.96.0.10 for DNS, a chosen NodePort) is rarely taken already.
    """
    if size <= low:
        return 0
    return min(max(low, size // step), high)


__all__ = ["DEFAULT_CLUSTER_CIDR", "DEFAULT_NODE_CIDR_MASK_SIZE", "DEFAULT_NODE_PORT_RANGE", "DEFAULT_SERVICE_CIDR",
           "DEFAULT_SERVICE_CIDR_NAME", "IP_ADDRESS_KIND", "PortRange", "SERVICE_CIDR_KIND", "check_cluster_cidr",
           "parse_cidr", "parse_port_range", "parse_service_cidr", "static_band"]
