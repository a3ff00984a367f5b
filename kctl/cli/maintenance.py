"""`kctl init`, `backup`, `restore`, `vacuum` and `encryption rotate-key`: looking after the store.

Registered on the root app by kctl.cli.main; each command opens the store through
kctl.cli.connect (init opens a SQLite store itself: it is the command that creates a named
store and its folder). Every command works on both backends (SQLite and etcd://); a backup is
always a SQLite kctl store file, so either backend restores either backend's backups.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kctl.cli import connect

#: this module's commands; kctl.cli.main mounts them (main.COMMANDS)
app = typer.Typer()

encryption_app = typer.Typer(
    name="encryption", help="Secrets encrypted at rest: rotate the store's key (docs/security.md).",
    no_args_is_help=True, rich_markup_mode=None)
app.add_typer(encryption_app)


@app.command()
def init() -> None:
    """Create the store (folder 0700, file 0600) and its key file, unless they exist.

    The store is the global --store (or $KCTL_STORE, or the default). Commands other than
    init, apply, create, restore, daemon, sync and node add refuse a named store that does
    not exist, so a mistyped path is an error, not a new empty cluster.
    """
    import sys

    if connect.current().remote:
        print("error: kctl init makes a local store; it cannot be used with --server, --kubeconfig or --context",
              file=sys.stderr)
        raise typer.Exit(2)
    if connect.current().etcd:  # an etcd prefix needs no creating: opening it holds the default Namespace
        store = connect.open_store(creating=True)
        try:
            ensure_key = getattr(store, "ensure_key", None)
            if ensure_key is not None:
                ensure_key()
            print(f"store {store.where} ready (state {store.path}); key file {store.key_path}")
        finally:
            store.close()
        return
    from kctl.store.sqlite import Store

    path = connect.local_path()
    existed = path.exists() and path.stat().st_size > 0
    store = Store(path)  # not open_store: init also makes a missing folder
    try:
        store.ensure_key()
    finally:
        store.close()
    print(f"store {path} {'exists' if existed else 'created'}; key file {store.key_path}")


@app.command()
def backup(file: Annotated[str, typer.Argument(help="Where to write the copy (mode 0600).")]) -> None:
    """Write a consistent copy of the live store (safe while others write).

    Secrets stay encrypted in the copy; the key file stays beside the store, so keep a copy
    of it with your backups (docs/security.md).
    """
    rev = connect.api().backup(file)
    print(f"backed up revision {rev} to {file}")


@app.command()
def restore(file: Annotated[str, typer.Argument(help="A file written by `kctl backup`.")]) -> None:
    """Replace the store's content with a backup; watchers re-list.

    The backup's Secrets must open with the store's key file (one error line otherwise,
    and nothing changes).
    """
    import os

    from kctl.machinery.errors import ClientSideError

    if not os.path.isfile(file):  # the user's mistake, found before asking the store
        raise ClientSideError(f'the path "{file}" does not exist' if not os.path.exists(file)
                              else f'"{file}" is not a file written by `kctl backup`')
    head = connect.api().restore(file)
    print(f"restored {file}; store continues at revision {head}")


@app.command()
def vacuum() -> None:
    """Compact the change log and return free space to the disk (etcd: compact and defragment every member)."""
    server = connect.api()
    before, after = server.vacuum()
    if connect.current().etcd:  # no local file to measure: etcd's members hold the data
        print(f"vacuumed {server.where}: compacted and defragmented every member")
        return
    print(f"vacuumed {server.where}: {before} -> {after} bytes")


@encryption_app.command("rotate-key")
def rotate_key() -> None:
    """Add a new key, re-encrypt every stored Secret with it (objects and change log), drop the old key.

    Reads and writes keep working throughout, in this and other processes. Backups made
    before need the old key file to be restored (docs/security.md).
    """
    name, rows, key_file = connect.api().rotate_key()
    print(f"rotated to key {name}: re-encrypted {rows} stored Secret rows; {key_file} holds only {name}")
