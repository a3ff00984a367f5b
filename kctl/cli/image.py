"""`kctl image ls|push`: which hosts hold which images, and copying an image to nodes without a registry.

`ls` reads the images each Node reports (status.images, written by its agent's heartbeat).
`push` copies an image from the control host's Podman (the socket `kctl daemon` uses,
kctl.daemon.localpodman.local_sockets, or `--source URL`) to nodes' Podman, reached as the agent
reaches it (kctl.runtime.connect.runtime_for_node: a unix socket or an SSH tunnel), by
streaming a docker-archive from one to the other (kctl.agent.images.copy_image). The
node agents do the same by themselves when a pod's image is missing (docs/agent.md).
"""

from __future__ import annotations

import sys
import time
from typing import Annotated, Optional

import typer

from kctl.cli import connect

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

image_app = typer.Typer(name="image", help="List the images nodes hold; copy an image to nodes (no registry needed).",
                        no_args_is_help=True, rich_markup_mode=None,
                        context_settings={"help_option_names": ["-h", "--help"]})
app.add_typer(image_app)

URL_SCHEMES = ("unix://", "ssh://")


def _fail(message: str, *, code: int = 1) -> typer.Exit:
    from kctl.cli.wait import fail

    return fail(message, code=code)


def human_size(size: int) -> str:
    """Bytes as Podman prints an image size: decimal units, 3 significant digits (2.13 MB)."""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1000
    return f"{value:.3g} GB"


def image_rows(nodes: list[dict]) -> list[dict]:
    """One entry per image name the nodes report: {name, sizeBytes, nodes}, sorted by name."""
    found: dict[str, dict] = {}
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        for image in (node.get("status") or {}).get("images") or ():
            for name in image.get("names") or ():
                entry = found.setdefault(str(name), {"name": str(name), "sizeBytes": 0, "nodes": []})
                entry["sizeBytes"] = max(entry["sizeBytes"], int(image.get("sizeBytes") or 0))
                entry["nodes"].append(node["metadata"]["name"])
    return [found[name] for name in sorted(found)]


@image_app.command("ls")
def ls(
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="json or yaml (default: a table).")] = None,
) -> None:
    """List the images the nodes hold (from each Node's status.images), with the nodes holding each."""
    if output not in (None, "json", "yaml"):
        raise _fail(f'unable to match a printer suitable for the output format "{output}", allowed formats are: '
                    "json,yaml")
    api = connect.api()
    rows = image_rows(api.list(api.resource("nodes"))[0])
    if output is not None:
        from kctl.manifests import writer

        sys.stdout.write(writer.dump_json(rows) if output == "json" else writer.dump_yaml(rows))
        return
    if not rows:
        print("No images found.", file=sys.stderr)
        return
    from kctl.output.printers import align_columns

    align_columns([["IMAGE", "SIZE", "NODES"]] + [[r["name"], human_size(r["sizeBytes"]), ",".join(r["nodes"])]
                                            for r in rows], sys.stdout)


# -- push ------------------------------------------------------------------------------------------

def open_source(url: Optional[str]):
    """The control host's Podman: `url`, else the first local socket that answers (as `kctl daemon`)."""
    from kctl.agent.images import LocalPodman
    from kctl.daemon.localpodman import local_sockets

    urls = [url] if url else [f"unix://{path}" for path in local_sockets()]
    runtime = LocalPodman(urls)()
    if runtime is None:
        raise _fail(f"no Podman answers on {' or '.join(urls)}; give the control host's with --source URL")
    return runtime


def node_runtime(node: dict):
    """The Runtime of a Node's Podman, as its agent reaches it."""
    from kctl.runtime.connect import runtime_for_node

    return runtime_for_node(node)


def _close(runtime) -> None:
    close = getattr(runtime, "close", None)
    if callable(close):
        close()


def _push_one(source, image: str, node: dict) -> tuple[bool, str]:
    """(ok, what happened) for one node."""
    from kctl.agent.images import copy_image, same_service
    from kctl.runtime.interface import RuntimeError_

    target = None
    try:
        target = node_runtime(node)
        if same_service(source, target) or target.image_present(image):
            return True, "already present"
        started = time.monotonic()
        _, size = copy_image(source, target, image)
        if not target.image_present(image):
            return False, f"failed: loaded, but {image} is not there"
        return True, f"copied {image} ({human_size(size)} in {time.monotonic() - started:.1f}s)"
    except RuntimeError_ as error:
        return False, f"failed: {error}"
    finally:
        if target is not None:
            _close(target)


@image_app.command("push")
def push(
    image: Annotated[str, typer.Argument(help="Image on the control host, e.g. localhost/app:1.")],
    node: Annotated[Optional[list[str]], typer.Option("--node", help="A node to copy to (repeatable).")] = None,
    all_nodes: Annotated[bool, typer.Option("--all", help="Copy to every node.")] = False,
    source: Annotated[Optional[str], typer.Option(
        "--source", help="Podman API URL holding the image (default: the local socket `kctl daemon` uses).")] = None,
) -> None:
    """Copy an image from the control host's Podman to nodes' Podman, over their unix socket or SSH.

    Prints one line per node (copied, already present, failed); exits 1 if any failed.
    """
    from kctl.runtime.interface import RuntimeError_

    if bool(node) == all_nodes:
        raise _fail("give --node NAME (repeatable) or --all")
    if source is not None and not source.startswith(URL_SCHEMES):
        raise _fail(f"--source {source!r} is not a unix:// or ssh:// URL")
    api = connect.api()
    rt = api.resource("nodes")
    targets = sorted(api.list(rt)[0], key=lambda n: n["metadata"]["name"]) if all_nodes else \
        [api.get(rt, name) for name in dict.fromkeys(node or ())]
    if not targets:
        raise _fail("no nodes to copy to")
    runtime = open_source(source)
    try:
        try:
            present = runtime.image_present(image)
        except RuntimeError_ as error:
            raise _fail(f"control host ({getattr(runtime, 'base_url', source)}): {error}") from None
        if not present:
            raise _fail(f"image {image} not found on the control host ({getattr(runtime, 'base_url', source)})")
        failed = 0
        for target in targets:
            ok, message = _push_one(runtime, image, target)
            failed += not ok
            print(f"node/{target['metadata']['name']} {message}", flush=True)
    finally:
        _close(runtime)
    if failed:
        raise _fail(f"{image} could not be copied to {failed} of {len(targets)} node(s)")
