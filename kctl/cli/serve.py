"""`kctl serve --stdio`: the control host's end of `kctl --server ssh://...` (and of node mode).

The client's ssh runs this on the control host; it serves the API over the store
(`--store`, else the global --store/$KCTL_STORE, else the default), which must exist (or is
an etcd:// cluster, with the global --etcd-* options), on
stdin/stdout in the JSON-lines protocol of kctl.apiserver.wire until stdin ends. Not meant to be typed by hand, so
it is hidden from `kctl --help`; docs/node-mode.md describes it.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kctl.cli import connect

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()


@app.command(hidden=True)
def serve(
    stdio: Annotated[bool, typer.Option("--stdio", help="Serve on stdin/stdout (the only transport).")] = False,
    store: Annotated[Optional[str], typer.Option(
        "--store", help="SQLite store file or etcd://... (as the global --store).")] = None,
) -> None:
    """Serve the API on stdin/stdout for `kctl --server ssh://...`; ssh runs it, not a person.

    Reads one JSON request per line and writes one JSON response (or watch event) per line,
    until stdin ends. Log lines go to stderr.
    """
    if not stdio:
        print("error: kctl serve needs --stdio (it is started by `kctl --server ssh://...` through ssh)",
              file=sys.stderr)
        raise typer.Exit(2)
    import logging
    from dataclasses import replace

    from kctl.apiserver.serve import serve_stdio

    context = connect.current()
    if store:
        context = replace(context, store_path=store)
    options: dict = {}
    if context.etcd:  # an etcd cluster the control host reaches: its TLS files and state folder, as given here
        target = context.store_path or ""
        options = {"tls": connect.etcd_tls(context), "state_dir": context.etcd_state_dir}
    else:
        path = connect.local_path(context)
        if not path.exists():  # a typo in a --server URL must not start a new, empty cluster
            print(f"error: no kctl store at {path} on the control host (check the path in --server, or run "
                  "`kctl daemon` there first)", file=sys.stderr)
            raise typer.Exit(1)
        target = str(path)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="kctl serve: %(levelname)s %(message)s")
    serve_stdio(target, store_options=options)
