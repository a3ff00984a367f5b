"""The names a node may list an image under (status.images), for matching a pod's image to them.

Shared by the scheduler's ImageLocality plugin (kctl/scheduler/plugins/image_locality.py),
which favours nodes that hold a pod's images, and the node agents' image copier
(kctl/agent/images.py), which copies an image to a node that lacks it.
"""

from __future__ import annotations


def normalized_image_names(image: str) -> tuple[str, ...]:
    """The names a node may list the image under: as written, with ":latest", with docker.io/library/,
    and, for a name without a registry, with localhost/ (Podman resolves a short name to a local
    localhost/ image first: busybox:demo runs localhost/busybox:demo, a deviation from Kubernetes)."""
    name = image
    last = name.rsplit("/", 1)[-1]
    if "@" not in name and ":" not in last:
        name += ":latest"
    names = [image, name]
    first = name.split("/", 1)[0]
    if "/" not in name:
        names += [f"docker.io/library/{name}", f"localhost/{name}"]
    elif "." not in first and ":" not in first and first != "localhost":
        names += [f"docker.io/{name}", f"localhost/{name}"]
    return tuple(dict.fromkeys(names))


__all__ = ["normalized_image_names"]
