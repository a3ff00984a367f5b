"""The root Typer app of `kctl`, its global options, and the Click tree built from the command modules.

Each command group lives in its own module with its own Typer app; `COMMANDS` names the module
of every command and `command(verb=...)` mounts only the invoked command's module on the root
(all of them for `--help`, completion or an unknown verb). No command module imports this one.
The root callback puts the global options (the store, SQLite or etcd:// with its TLS files, or a
server) on Click's `ctx.obj` as a frozen `kctl.cli.connect.CLIContext`; `command` gives every
command its Examples (kctl.cli.examples) and completers (kctl.cli.completion). Called by
kctl.cli.main (the entry point, which imports this module, and so Click and Typer, only for a
line it does not answer without them) and by tests that invoke `app` itself. Its annotations, as
kctl.cli.get's, are evaluated once when it loads (no `from __future__ import annotations`): Typer
would evaluate strings again on each read.
"""

from typing import Annotated, Optional

import click
import typer

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
    ctx: typer.Context,
    store: Annotated[Optional[str], typer.Option(
        "--store", envvar="KCTL_STORE",
        help="SQLite store file (default: $XDG_DATA_HOME/kctl/kctl.db), or an etcd cluster: "
             "etcd://host:2379[,host:2379...][/prefix] (prefix default /registry).")] = None,
    etcd_cafile: Annotated[Optional[str], typer.Option(
        "--etcd-cafile", envvar="KCTL_ETCD_CAFILE",
        help="CA certificate file that signed the etcd members' certificates (TLS to an etcd:// store).")] = None,
    etcd_certfile: Annotated[Optional[str], typer.Option(
        "--etcd-certfile", envvar="KCTL_ETCD_CERTFILE",
        help="Client certificate file for an etcd:// store (with --etcd-keyfile).")] = None,
    etcd_keyfile: Annotated[Optional[str], typer.Option(
        "--etcd-keyfile", envvar="KCTL_ETCD_KEYFILE", help="Client key file for an etcd:// store.")] = None,
    etcd_state_dir: Annotated[Optional[str], typer.Option(
        "--etcd-state-dir", envvar="KCTL_ETCD_STATE_DIR",
        help="Folder of an etcd:// store's local files: Secrets' key file, PKI, audit log (default: "
             "$XDG_DATA_HOME/kctl/etcd/<hash of endpoints and prefix>).")] = None,
    server: Annotated[Optional[str], typer.Option(
        "--server", "-s", envvar="KCTL_SERVER",
        help="Use the control plane at ssh://user@host[:port]/path/kctl.db, or the Kubernetes API at "
             "https://host:port, instead of a local store.")] = None,
    identity: Annotated[Optional[str], typer.Option(
        "--identity", envvar="KCTL_SSH_IDENTITY", help="SSH private key for --server ssh://....")] = None,
    kubeconfig: Annotated[Optional[str], typer.Option(
        "--kubeconfig", envvar="KCTL_KUBECONFIG",
        help="Use the Kubernetes API over HTTPS of this kubeconfig file's current context (kubectl's format). "
             "$KUBECONFIG alone does not: the local store stays the default.")] = None,
    context: Annotated[Optional[str], typer.Option(
        "--context", help="The kubeconfig context to use (from --kubeconfig, else $KUBECONFIG or "
                          "~/.kube/config); selects the Kubernetes API over HTTPS.")] = None,
    certificate_authority: Annotated[Optional[str], typer.Option(
        "--certificate-authority", help="CA certificate file for the HTTPS API (over the kubeconfig's).")] = None,
    client_certificate: Annotated[Optional[str], typer.Option(
        "--client-certificate", help="Client certificate file for the HTTPS API.")] = None,
    client_key: Annotated[Optional[str], typer.Option(
        "--client-key", help="Client key file for the HTTPS API.")] = None,
    token: Annotated[Optional[str], typer.Option(
        "--token", help="Bearer token for the HTTPS API.")] = None,
    insecure_skip_tls_verify: Annotated[bool, typer.Option(
        "--insecure-skip-tls-verify",
        help="Do not check the HTTPS API's certificate (insecure; only when asked).")] = False,
) -> None:
    """kctl: Kubernetes-style Deployments, rolling updates and self-healing on Podman hosts."""
    ctx.obj = connect.CLIContext(store_path=store or None, server_url=server or None, identity=identity or None,
                                 kubeconfig=kubeconfig or None, context=context or None,
                                 certificate_authority=certificate_authority or None,
                                 client_certificate=client_certificate or None, client_key=client_key or None,
                                 token=token or None, insecure_skip_tls_verify=insecure_skip_tls_verify,
                                 etcd_cafile=etcd_cafile or None, etcd_certfile=etcd_certfile or None,
                                 etcd_keyfile=etcd_keyfile or None, etcd_state_dir=etcd_state_dir or None)


#: every command and command group -> the module whose `app` (a typer.Typer) defines it, in `--help` order
COMMANDS: dict[str, str] = {
    "apply": "kctl.cli.apply", "create": "kctl.cli.apply", "diff": "kctl.cli.apply",
    "daemon": "kctl.cli.daemon",
    "get": "kctl.cli.get", "describe": "kctl.cli.get",
    "image": "kctl.cli.image",
    "logs": "kctl.cli.logs", "exec": "kctl.cli.logs",
    "init": "kctl.cli.maintenance", "backup": "kctl.cli.maintenance", "restore": "kctl.cli.maintenance",
    "vacuum": "kctl.cli.maintenance", "encryption": "kctl.cli.maintenance",
    "delete": "kctl.cli.modify", "patch": "kctl.cli.modify", "label": "kctl.cli.modify",
    "annotate": "kctl.cli.modify", "edit": "kctl.cli.modify",
    "expose": "kctl.cli.expose",
    "autoscale": "kctl.cli.autoscale",
    "port-forward": "kctl.cli.portforward",
    "explain": "kctl.cli.reference", "api-resources": "kctl.cli.reference", "version": "kctl.cli.reference",
    "completion": "kctl.cli.reference",
    "node": "kctl.cli.node",
    "cordon": "kctl.cli.nodes", "uncordon": "kctl.cli.nodes", "drain": "kctl.cli.nodes",
    "rollout": "kctl.cli.rollout",
    "scale": "kctl.cli.scale", "set": "kctl.cli.scale",
    "top": "kctl.cli.top",
    "serve": "kctl.cli.serve",
    "wait": "kctl.cli.wait",
    "sync": "kctl.cli.sync",
    "audit": "kctl.cli.audit",
    "config": "kctl.cli.config",
    "auth": "kctl.cli.auth",
}


def _module_app(module: str) -> typer.Typer:
    """The Typer app of one command module (imported on first use)."""
    import importlib

    sub = importlib.import_module(module).app
    assert isinstance(sub, typer.Typer), module
    return sub


def _mount(target: typer.Typer, modules: list[str], *, only: str | None = None) -> None:
    """Put the commands and groups of `modules`' apps on `target` (only the one named `only`, if given)."""
    import typer.main

    for module in modules:
        sub = _module_app(module)
        for info in sub.registered_commands:
            name = info.name or typer.main.get_command_name(info.callback.__name__ if info.callback else "")
            if only is None or name == only:
                target.registered_commands.append(info)
        for group in sub.registered_groups:
            if only is None or typer.main.solve_typer_info_defaults(group).name == only:
                target.registered_groups.append(group)


def register() -> None:
    """Mount every command on `app` (once): for `--help`, completion, and tests that invoke `app` itself."""
    if not app.registered_commands and not app.registered_groups:
        _mount(app, list(dict.fromkeys(COMMANDS.values())))


def command(*, verb: str | None = None) -> click.Group:
    """The Click tree of every command, with its Examples and shell completers attached.

    With `verb` (the command named on the line) the root holds only that command or group: Typer
    then resolves the parameters of one command, not of every one (a third of a `kctl get`'s
    start-up). An unknown verb builds every command, for Click's "No such command" and hints.
    """
    import typer.main

    from kctl.cli import completion, examples

    root = typer.main.get_command(_only(verb) if verb else _all())
    assert isinstance(root, click.Group)
    examples.attach(root)
    completion.attach(root)
    return root


def _all() -> typer.Typer:
    """`app` with every command mounted."""
    register()
    return app


def _only(verb: str) -> typer.Typer:
    """A copy of `app` that holds only the command or group named `verb` (every command if none is)."""
    import copy

    module = COMMANDS.get(verb)
    if module is None:
        return _all()
    one = copy.copy(app)
    one.registered_commands, one.registered_groups = [], []
    _mount(one, [module], only=verb)
    return one


__all__ = ["COMMANDS", "app", "command", "register", "root"]
