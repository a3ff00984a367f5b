"""Shell completion for bash, zsh, fish and PowerShell: the scripts and the answers. Called by kctl.cli.main.

`kctl completion SHELL` prints Click's script for the shell (`script`); the script runs
`kctl` again with `_KCTL_COMPLETE=SHELL_complete` and the words typed so far, and `respond`
answers with Click's protocol. `attach` gives the Click tree its completers: resource types
(the API's registry, CustomResourceDefinitions included), names of the type already typed
(from the local store, in the `-n` namespace), namespaces, node names, `-o` formats and files.

A completer never fails: whatever goes wrong (no store yet, a store busy or unreadable) it
offers nothing. Names come from a local store (or the etcd:// cluster named by --store) only; with
`--server` only kinds are offered.
"""

from __future__ import annotations

import os
from typing import Callable

import click
from click.shell_completion import (
    BashComplete,
    CompletionItem,
    FishComplete,
    PowerShellComplete,
    ShellComplete,
    ZshComplete,
)

SHELLS = ("bash", "zsh", "fish", "powershell")
#: the environment variable of Click's shell completion protocol (kctl completion SHELL)
COMPLETE_VAR = "_KCTL_COMPLETE"

#: kubectl's -o values
OUTPUT_FORMATS = ("json", "yaml", "wide", "name", "jsonpath=", "custom-columns=", "go-template=")

Completer = Callable[[click.Context, click.Parameter, str], list[CompletionItem]]


class _Normalised:
    """Mixin: the words typed so far pass through kctl.cli.argv first, as a real command line does."""

    def get_completion_args(self) -> tuple[list[str], str]:
        from kctl.cli.argv import normalise

        args, incomplete = super().get_completion_args()  # type: ignore[misc]
        return normalise(self.cli, args), incomplete  # type: ignore[attr-defined]


class _Bash(_Normalised, BashComplete):
    pass


class _Zsh(_Normalised, ZshComplete):
    pass


class _Fish(_Normalised, FishComplete):
    pass


class _PowerShell(_Normalised, PowerShellComplete):
    pass


_CLASSES: dict[str, type[ShellComplete]] = {"bash": _Bash, "zsh": _Zsh, "fish": _Fish, "powershell": _PowerShell}


def script(root: click.Command, shell: str, *, complete_var: str) -> str:
    """The completion script `kctl completion SHELL` prints (ValueError for an unknown shell)."""
    cls = _CLASSES.get(shell)
    if cls is None:
        raise ValueError(f'unsupported shell type "{shell}"')
    return cls(root, {}, "kctl", complete_var).source()


def respond(root: click.Command, instruction: str, *, complete_var: str) -> int:
    """Answer the script's request (`bash_complete`, `zsh_source`...): print the completions, return the exit status."""
    shell, _, action = instruction.partition("_")
    cls = _CLASSES.get(shell)
    if cls is None or action not in ("complete", "source"):
        click.echo(f'error: unsupported completion request "{instruction}"', err=True)
        return 1
    comp = cls(root, {}, "kctl", complete_var)
    try:
        click.echo(comp.source() if action == "source" else comp.complete())
    except Exception:  # a completion never shows a traceback in the middle of a command line
        if os.environ.get("KCTL_DEBUG"):
            raise
        return 1
    return 0


# --- completers --------------------------------------------------------------------------

#: seconds a completer waits for an etcd:// store before it offers nothing
COMPLETION_ETCD_TIMEOUT = 2.0


def _api(ctx: click.Context):
    """The API over the store named on the line (or $KCTL_STORE, or the default); None if none exists yet."""
    params = ctx.find_root().params
    if params.get("server") or params.get("kubeconfig") or params.get("context"):
        return None  # a remote API: no names from a local store that is not the one in use
    from kctl.apiserver.server import APIServer
    from kctl.store.open import is_etcd, local_path, open_store

    address = params.get("store") or os.environ.get("KCTL_STORE") or None
    if is_etcd(address):  # the cluster named on the line, briefly: an etcd that does not answer offers nothing
        from kctl.cli.connect import CLIContext, etcd_tls

        context = CLIContext(store_path=address, etcd_cafile=params.get("etcd_cafile"),
                             etcd_certfile=params.get("etcd_certfile"), etcd_keyfile=params.get("etcd_keyfile"),
                             etcd_state_dir=params.get("etcd_state_dir"))
        store = open_store(address, tls=etcd_tls(context), state_dir=context.etcd_state_dir,
                           request_timeout=COMPLETION_ETCD_TIMEOUT)
        return APIServer(store, warn=lambda message: None)
    path = local_path(address)
    if not os.path.isfile(path):
        return None  # completing must not create a store
    return APIServer(open_store(path, creating=False), warn=lambda message: None)


def _registry(ctx: click.Context):
    """The kinds the store serves (CustomResourceDefinitions' included), or the built-in ones."""
    server = _api(ctx)
    if server is not None:
        try:
            return server.registry
        finally:
            server.close()
    from kctl.machinery.resources import builtin_registry

    return builtin_registry()


def _names(ctx: click.Context, kind: str, incomplete: str, *, prefix: str = "") -> list[CompletionItem]:
    """Names of objects of `kind` (in the line's -n namespace) that start with `incomplete`."""
    server = _api(ctx)
    if server is None:
        return []
    try:
        rt = server.resource(kind)
        namespace = ctx.params.get("namespace") or "default"
        items, _ = server.list(rt, namespace=namespace if rt.namespaced else None)
    finally:
        server.close()
    names = sorted(o["metadata"]["name"] for o in items)
    return [CompletionItem(prefix + n) for n in names if (prefix + n).startswith(incomplete)]


def _types(ctx: click.Context, incomplete: str) -> list[CompletionItem]:
    plurals = sorted({rt.plural for rt in _registry(ctx)})
    return [CompletionItem(p) for p in plurals if p.startswith(incomplete)]


def complete_resources(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """kubectl's `TYPE [NAME...]` and `TYPE/NAME`: types first, then names of that type."""
    typed = [a for a in (ctx.params.get(param.name or "") or []) if a]
    if "/" in incomplete:
        kind, _, _ = incomplete.partition("/")
        return _names(ctx, kind, incomplete, prefix=f"{kind}/")
    if not typed:
        return _types(ctx, incomplete)
    first = typed[0]
    if "/" in first or "," in first:
        return []
    return _names(ctx, first, incomplete)


def _kind_names(kind: str) -> Completer:
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        return _names(ctx, kind, incomplete)

    return complete


def complete_output(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(f) for f in OUTPUT_FORMATS if f.startswith(incomplete)]


def complete_files(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(incomplete, type="file")]


def complete_shells(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(s) for s in SHELLS if s.startswith(incomplete)]


def _safe(completer: Completer) -> Completer:
    """A completer that offers nothing instead of failing."""
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        try:
            return completer(ctx, param, incomplete)
        except Exception:
            if os.environ.get("KCTL_DEBUG"):
                raise
            return []

    return complete


#: (command path or "*", parameter name) -> completer; the path wins over "*"
COMPLETERS: dict[tuple[str, str], Completer] = {
    ("*", "resources"): complete_resources,
    ("*", "namespace"): _kind_names("namespaces"),
    ("*", "output"): complete_output,
    ("*", "filename"): complete_files,
    ("*", "nodes"): _kind_names("nodes"),
    ("*", "pod"): _kind_names("pods"),
    ("completion", "shell"): complete_shells,
    ("node trust", "name"): _kind_names("nodes"),
    ("node remove", "name"): _kind_names("nodes"),
    ("image push", "node"): _kind_names("nodes"),
    ("sync status", "name"): _kind_names("gitsources"),
    ("sync delete", "name"): _kind_names("gitsources"),
    ("set image", "args"): complete_resources,
}


def attach(root: click.Group) -> None:
    """Set the completers of COMPLETERS on the parameters of every command in the tree."""
    from kctl.cli.examples import walk

    for path, command in walk(root):
        for param in command.params:
            completer = COMPLETERS.get((path, param.name or "")) or COMPLETERS.get(("*", param.name or ""))
            if completer is not None:
                param._custom_shell_complete = _safe(completer)  # what Click's shell_complete= sets


__all__ = ["COMPLETERS", "SHELLS", "attach", "complete_resources", "respond", "script"]
