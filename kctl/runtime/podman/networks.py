"""Podman networks (the pod network's bridge, kctl.agent.podnetwork), through the libpod REST API.

A part of PodmanRuntime (kctl.runtime.podman.runtime): `ensure_network` makes a bridge
network with one subnet and gateway (`/networks/create`), `network_subnet` reads a
network's first subnet (`/networks/{name}/json`), `remove_network` removes one
(`DELETE /networks/{name}`; a missing one is fine). Podman keeps the definitions in its
network config folder (`/etc/containers/networks`, or `--network-config-dir`).
"""

from __future__ import annotations

from kctl.runtime.interface import NotFoundInRuntime, RuntimeError_
from kctl.runtime.podman.connection import ServiceCalls
from kctl.runtime.podman.errors import calling
from kctl.runtime.podman.specgen import with_managed_label


class Networks(ServiceCalls):
    """The network calls of PodmanRuntime."""

    def ensure_network(self, name: str, *, subnet: str, gateway: str, labels: dict[str, str]) -> None:
        """Make the bridge network `name` with that subnet, unless one with that subnet exists.

        A network of that name with another subnet raises RuntimeError_ (the caller decides
        whether to remove it).
        """
        current = self.network_subnet(name)
        if current == subnet:
            return
        if current is not None:
            raise RuntimeError_(f"network {name} exists with subnet {current}, not {subnet}")
        body = {"name": name, "driver": "bridge", "subnets": [{"subnet": subnet, "gateway": gateway}],
                "labels": with_managed_label(labels)}
        with calling(f"create network {name}"):
            response = self._api().post("/networks/create", data=_json(body),
                                        headers={"Content-Type": "application/json"})
            if response.status_code == 409:  # made meanwhile (another agent): look again
                if self.network_subnet(name) == subnet:
                    return
            response.raise_for_status()

    def network_subnet(self, name: str) -> str | None:
        """The network's (first) subnet; None when there is no such network."""
        try:
            with calling(f"inspect network {name}"):
                network = self._get(f"/networks/{name}/json") or {}
        except NotFoundInRuntime:
            return None
        subnets = network.get("subnets") or []
        return str(subnets[0].get("subnet", "")) if subnets else ""

    def remove_network(self, name: str) -> None:
        """Remove the network (not forced: Podman refuses while containers use it); a missing one is fine."""
        with calling(f"remove network {name}"):
            self._delete(f"/networks/{name}")


def _json(body: dict) -> str:
    import json

    return json.dumps(body)


__all__ = ["Networks"]
