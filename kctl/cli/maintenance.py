"""`kctl backup`, `restore` and `vacuum`: looking after the store file."""

from __future__ import annotations

from typing import Annotated

import typer

from kctl.cli import connect
from kctl.cli.main import app


@app.command()
def backup(file: Annotated[str, typer.Argument(help="Where to write the copy (mode 0600).")]) -> None:
    """Write a consistent copy of the live store (safe while others write)."""
    rev = connect.api().store.backup(file)
    print(f"backed up revision {rev} to {file}")


@app.command()
def restore(file: Annotated[str, typer.Argument(help="A file written by `kctl backup`.")]) -> None:
    """Replace the store's content with a backup; watchers re-list."""
    head = connect.api().store.restore(file)
    print(f"restored {file}; store continues at revision {head}")


@app.command()
def vacuum() -> None:
    """Compact the change log and return free space to the disk."""
    import os

    store = connect.api().store
    before = os.path.getsize(store.path)
    store.vacuum()
    after = os.path.getsize(store.path)
    print(f"vacuumed {store.path}: {before} -> {after} bytes")
