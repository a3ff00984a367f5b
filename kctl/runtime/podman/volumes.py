"""Named volumes on Podman (emptyDir and PersistentVolumes of the node agent), by label.

A part of PodmanRuntime (kctl.runtime.podman.runtime).
"""

from __future__ import annotations

import json

from kctl.runtime.podman.connection import ServiceCalls
from kctl.runtime.podman.errors import calling
from kctl.runtime.podman.specgen import label_filters, labels_match, with_managed_label


class Volumes(ServiceCalls):
    """The volume calls of PodmanRuntime."""

    def list_volumes(self, labels: dict[str, str]) -> list[str]:
        with calling("list volumes"):
            volumes = self._get("/volumes/json", params=label_filters(labels)) or []
        return [volume["Name"] for volume in volumes if labels_match(volume.get("Labels"), labels)]

    def create_volume(self, name: str, labels: dict[str, str]) -> None:
        """Create a named volume; one that exists already is left as it is."""
        with calling(f"create volume {name}"):
            response = self._api().post("/volumes/create", data=json.dumps(
                {"Name": name, "Label": with_managed_label(labels)}),
                headers={"Content-Type": "application/json"})
            if response.status_code >= 400 and "already exists" in response.text:
                return
            response.raise_for_status()

    def remove_volume(self, name: str) -> None:
        """Remove a named volume (force: also from stopped containers); missing is fine."""
        with calling(f"remove volume {name}"):
            self._delete(f"/volumes/{name}", params={"force": True})


__all__ = ["Volumes"]
