"""`kctl apply -f DIR --watch`: apply, then apply again whenever the files change.

Called by kctl.cli.apply when `--watch` is given. The file watcher (watchfiles) is armed
before the first round, so no change made while a round runs is missed. Each round
prints a header (`--- round 2 (3 files changed) ---`), then what `kctl apply` prints,
with the same code (kctl.cli.apply.apply_documents, which also prunes the apply-set with
--prune). A round is atomic: a file that does not parse, or an object the API refuses,
prints its error line and writes nothing of that round; watching goes on. Ctrl-C ends
it with status 0.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from kctl.applyset import ParentRef

__all__ = ["watch_apply"]

#: how long the watcher waits in one call before it checks for Ctrl-C again (ms)
_WAKE_MS = 250


def watch_apply(files: list[str], *, recursive: bool, namespace: str | None, parent: "ParentRef | None",
                selector: str | None, debounce: str) -> int:
    """Apply `files` once and then on every change, until interrupted; the exit status.

    `parent`: the apply-set to prune (kctl.applyset), None without --prune.
    """
    import watchfiles

    from kctl.manifests.sources import MANIFEST_SUFFIXES

    delay_ms = _debounce_ms(debounce)
    if not files:
        raise typer.BadParameter("must specify one of -f or --filename", param_hint="'-f'")
    targets = []
    for name in files:
        if name == "-" or name.startswith(("http://", "https://")):
            raise typer.BadParameter(f"{name}: --watch needs local files or directories",
                                     param_hint="'--watch'")
        path = Path(name).absolute()
        if not path.exists():
            raise typer.BadParameter(f"{name}: no such file or directory", param_hint="'-f'")
        targets.append((path, path.is_dir()))
    # -R watches each folder recursively (and a file by itself); otherwise folders' direct
    # children, and a file through its folder (so editors that replace the file are seen).
    roots = sorted({str(path if recursive or is_dir else path.parent) for path, is_dir in targets})
    default = watchfiles.DefaultFilter()

    def relevant(change, name: str) -> bool:
        if not default(change, name):
            return False
        path = Path(name)
        for target, is_dir in targets:
            if not is_dir:
                if path == target:
                    return True
            elif path.name.endswith(MANIFEST_SUFFIXES) and target in path.parents \
                    and (recursive or path.parent == target):
                return True
        return False

    changes = watchfiles.watch(*roots, watch_filter=relevant, debounce=delay_ms, step=min(50, delay_ms),
                               rust_timeout=_WAKE_MS, yield_on_timeout=True, recursive=recursive)
    try:
        next(changes)  # arms the watcher (returns after _WAKE_MS, or sooner with changes)
        _round(1, 0, files, recursive, namespace, parent, selector)
        print(f"watching {len(files)} path{'s' if len(files) != 1 else ''} for changes (Ctrl-C to stop)",
              file=sys.stderr, flush=True)
        number = 1
        for batch in changes:
            changed = {name for _, name in batch}
            if changed:
                number += 1
                _round(number, len(changed), files, recursive, namespace, parent, selector)
    except KeyboardInterrupt:
        pass
    finally:
        changes.close()
    return 0


def _debounce_ms(text: str) -> int:
    from kctl.cli.durations import parse_timeout

    if text.strip().startswith("-"):
        raise typer.BadParameter(f"{text}: must not be negative", param_hint="'--debounce'")
    return max(1, round(parse_timeout(text, option="--debounce") * 1000))


def _round(number: int, changed: int, files: list[str], recursive: bool, namespace: str | None,
           parent: "ParentRef | None", selector: str | None) -> None:
    """One apply of every file, atomic, with its header; errors printed, never raised."""
    from kctl.machinery.errors import APIError
    from kctl.cli.apply import apply_documents, read_documents
    from kctl.manifests.errors import ManifestError

    header = f"--- round {number}"
    if changed:
        header += f" ({changed} file{'s' if changed != 1 else ''} changed)"
    print(header + " ---", flush=True)
    try:
        docs = read_documents(files, recursive)
        apply_documents(docs, namespace=namespace, atomic=True, selector=selector, parent=parent)
    except ManifestError as error:
        print(f"error: {error}", file=sys.stderr)
    except APIError as error:
        from kctl.cli.connect import error_line

        print(error_line(error), file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
