"""Whether kctl removed a host: its Node is gone from the store.

When a node agent stops, the parts that changed the host itself (the pod network,
kctl.agent.podnetwork, and kube-proxy's table, kctl.agent.proxy.sync) ask `node_removed`:
a host kctl removed (`kctl node remove`) gets what kctl made there taken away; a daemon
that merely stops leaves the host as it is, as Kubernetes' node components do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl.machinery.errors import NotFound

if TYPE_CHECKING:
    from kctl.apiserver.contract import API


def node_removed(api: API, name: str) -> bool:
    """Whether the Node is gone from the store; False when the store cannot be read (the host is left as it is)."""
    try:
        api.get(api.resource("nodes"), name)
    except NotFound:
        return True
    except Exception:  # noqa: BLE001 - the store cannot be read: not "removed"
        return False
    return False


__all__ = ["node_removed"]
