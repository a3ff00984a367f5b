"""How a CLI command reaches the API: the store it opens, and the names it prints.

Every command module calls `api()` to get the APIServer for the `--store` chosen on the
command line (or $KCTL_STORE, or the default under the user's data dir).
"""

from __future__ import annotations

import sys
from functools import lru_cache

from kctl.api.resources import ResourceType

#: set by the root callback from --store
STORE_PATH: str | None = None
#: set by the root callback from --server / --identity: the control plane over SSH (kctl.api.remote)
SERVER_URL: str | None = None
IDENTITY: str | None = None


def warn(message: str) -> None:
    """Warnings from admission hooks and from kctl itself, as kubectl prints them."""
    print(f"Warning: {message}", file=sys.stderr)


@lru_cache(maxsize=1)
def api():
    """The APIServer over the selected store, or the control host's with --server (once per command)."""
    if SERVER_URL:
        from kctl.api.remote import RemoteAPIServer

        return RemoteAPIServer(SERVER_URL, identity=IDENTITY, warn=warn)
    from kctl.api.apiserver import APIServer
    from kctl.api.store import Store

    return APIServer(Store(STORE_PATH), warn=warn)


def ref(rt: ResourceType, name: str) -> str:
    """kubectl's `deployment.apps/web`, `pod/x`."""
    kind = rt.kind.lower()
    return f"{kind}.{rt.group}/{name}" if rt.group else f"{kind}/{name}"


def namespace_arg(namespace: str | None) -> str:
    return namespace or "default"


def targets(args: list[str]) -> list[tuple[ResourceType, list[str]]]:
    """kubectl's resource arguments: `TYPE[,TYPE] [NAME...]` or `TYPE/NAME...`, in order."""
    from kctl.api.errors import BadRequest

    server = api()
    if not args:
        raise BadRequest("You must specify the type of resource to get. Use \"kctl api-resources\" for a complete list")
    if any("/" in a for a in args):
        if not all("/" in a for a in args):
            raise BadRequest("there is no need to specify a resource type as a separate argument when passing "
                             "arguments in resource/name form")
        out: list[tuple[ResourceType, list[str]]] = []
        for a in args:
            kind, _, name = a.partition("/")
            rt = server.resource(kind)
            if out and out[-1][0] == rt:
                out[-1][1].append(name)
            else:
                out.append((rt, [name]))
        return out
    kinds = [k for k in args[0].split(",") if k]
    if kinds == ["all"]:
        kinds = ["pods", "services", "daemonsets", "deployments", "replicasets", "jobs", "cronjobs"]
    if len(kinds) > 1 and args[1:]:
        raise BadRequest("names cannot be given with several resource types; use TYPE/NAME")
    return [(server.resource(k), list(args[1:])) for k in kinds]
