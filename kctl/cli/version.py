"""What `kctl version` prints: kctl's version, the Kubernetes API its schemas follow, and the store.

Called by the `version` command (kctl.cli.reference) and by kctl.cli.main's path that answers
`kctl version` without importing Click or Typer (the same function, so the output is the same).
Imports nothing heavy: only the API it is given is asked anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kctl import __version__

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

#: the Kubernetes minor version whose schemas kctl validates against (schemas/)
KUBERNETES_API = "1.37"


def print_version(api: API, *, output: str | None = None) -> None:
    """Print the version lines, or with `output="json"` one JSON document (any other output: the lines)."""
    info = {"clientVersion": {"gitVersion": f"v{__version__}"},
            "kubernetesAPI": KUBERNETES_API,
            "store": {"path": api.where, "revision": api.revision()}}
    if output == "json":
        import json

        print(json.dumps(info, indent=2))
        return
    print(f"Client Version: v{__version__}")
    print(f"Kubernetes API: {KUBERNETES_API} (schemas)")
    print(f"Store: {api.where} (revision {api.revision()})")


__all__ = ["KUBERNETES_API", "print_version"]
