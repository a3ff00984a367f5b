"""The `kctl` command: the root Typer app, global options, and the error edge.

Each command group lives in its own module and registers itself on `app`. Errors from
the API layer (kctl.api.errors) and from reading manifests become one line on stderr
and a distinct exit status; no traceback reaches a user (KCTL_DEBUG=1 shows one).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from kctl import __version__
from kctl.cli import connect

app = typer.Typer(
    name="kctl",
    help="kctl: Kubernetes-style Deployments, rolling updates and self-healing on Podman hosts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def root(
    store: Annotated[Optional[str], typer.Option(
        "--store", envvar="KCTL_STORE", help="SQLite store file (default: $XDG_DATA_HOME/kctl/kctl.db).")] = None,
    server: Annotated[Optional[str], typer.Option(
        "--server", envvar="KCTL_SERVER",
        help="Use the control plane at ssh://user@host[:port]/path/kctl.db instead of a local store.")] = None,
    identity: Annotated[Optional[str], typer.Option(
        "--identity", envvar="KCTL_SSH_IDENTITY", help="SSH private key for --server.")] = None,
) -> None:
    """kctl: Kubernetes-style Deployments, rolling updates and self-healing on Podman hosts."""
    connect.STORE_PATH = store
    connect.SERVER_URL, connect.IDENTITY = server or None, identity or None


def _register() -> None:
    from kctl.cli import apply, daemon, get, image, logs, maintenance, modify, reference  # noqa: F401  (registers commands)
    from kctl.cli import node, nodes, rollout, scale, serve, wait  # noqa: F401  (registers commands)
    from kctl.cli import sync  # noqa: F401  (registers commands)


EXIT_INTERNAL = 1
EXIT_INVALID = 6  # bad input, as the API's Invalid


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    from kctl.api.errors import APIError

    _register()
    try:
        app(args=argv, prog_name="kctl", standalone_mode=True)
    except APIError as exc:
        print(f"Error from server ({exc.reason}): {exc.message}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
    except Exception as exc:  # the edge: never a traceback for the user
        yamlio = sys.modules.get("kctl.cli.yamlio")  # only loaded when manifests were read
        if yamlio is not None and isinstance(exc, yamlio.ManifestError):
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(EXIT_INVALID)
        if os.environ.get("KCTL_DEBUG"):
            raise
        print(f"error: internal error: {type(exc).__name__}: {exc} (set KCTL_DEBUG=1 for a traceback)",
              file=sys.stderr)
        sys.exit(EXIT_INTERNAL)


__all__ = ["app", "main", "__version__"]
