"""kctl's kube-proxy: a host's Service rules, as one nftables table of kctl's own.

`render(services, slices, node=..., node_addresses=..., cluster_cidr=...)` (the pure
renderer in kctl.agent.proxy.nftables) turns Services and EndpointSlices into one
`nft -f` script that replaces the table `ip kctl` atomically and touches no other
table (pass `current=` the output of `nft list table ip kctl` to replace it in place,
keeping ClientIP affinity across syncs); kctl.agent.proxy.model reads the objects into the plain records it renders.
The node agent applies the script on its host (locally or over SSH). No I/O here.
"""

from __future__ import annotations

from kctl.agent.proxy.nftables import TABLE, render

__all__ = ["TABLE", "render"]
