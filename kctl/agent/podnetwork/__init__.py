"""kctl's network plugin (its CNI, flannel's host-gw model): every pod gets an address every pod can reach.

A NodeAgent (kctl.agent.agent) runs one `PodNetwork` (kctl.agent.podnetwork.reconciler) for
its host: the Podman bridge network `kctl` with the Node's podCIDR, IP forwarding, a route
to every other Node's podCIDR via its InternalIP, and the nft table `ip kctl-net` (no NAT
between pods, masquerade out of the cluster CIDR). `plan` holds the pure parts: what the
host should have and the commands that get it there. docs/networking.md, "The pod network".
"""

from kctl.agent.podnetwork.plan import NETWORK_NAME, ROUTE_PROTO, TABLE
from kctl.agent.podnetwork.reconciler import PodNetwork

__all__ = ["NETWORK_NAME", "ROUTE_PROTO", "TABLE", "PodNetwork"]
