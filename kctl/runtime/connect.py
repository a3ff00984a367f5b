"""Which Podman a Node names, and the Runtime that reaches it.

The daemon (kctl.agent) calls runtime_for_node(node) once per Node object. A Node names
its Podman in annotations:

  kctl.io/podman-url        unix:///run/podman/podman.sock, or
                            ssh://user@host[:port]/run/podman/podman.sock
                            (default: unix://DEFAULT_SOCKET, the service kctl starts itself)
  kctl.io/ssh-identity      private key file for ssh:// (optional)
  kctl.io/ssh-known-hosts   known_hosts file for ssh:// (optional; host keys are always
                            checked, against ssh's usual files when this is absent)
"""

from __future__ import annotations

from typing import Any

from kctl.runtime.interface import Runtime, RuntimeError_
from kctl.runtime.podman import PodmanRuntime

DEFAULT_SOCKET = "/run/kctl/podman.sock"
ANNOTATION_PODMAN_URL = "kctl.io/podman-url"
ANNOTATION_SSH_IDENTITY = "kctl.io/ssh-identity"
ANNOTATION_SSH_KNOWN_HOSTS = "kctl.io/ssh-known-hosts"
URL_SCHEMES = ("unix://", "ssh://")


def podman_url(node: dict[str, Any]) -> str:
    """The Podman URL a Node object names (its annotation, else the local default socket)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    url = str(annotations.get(ANNOTATION_PODMAN_URL) or f"unix://{DEFAULT_SOCKET}")
    if not url.startswith(URL_SCHEMES):
        name = (node.get("metadata") or {}).get("name", "?")
        raise RuntimeError_(f"node {name}: {ANNOTATION_PODMAN_URL} {url!r} is not unix:// or ssh://")
    return url


def runtime_for_node(node: dict[str, Any], *, timeout: float = 30) -> Runtime:
    """A PodmanRuntime for the Podman the Node object names."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return PodmanRuntime(podman_url(node),
                         identity=annotations.get(ANNOTATION_SSH_IDENTITY) or None,
                         known_hosts=annotations.get(ANNOTATION_SSH_KNOWN_HOSTS) or None,
                         timeout=timeout)
