"""`kctl config kubeconfig`: print a kubeconfig with which kubectl (and client libraries) reach kctl's HTTPS API.

The certificates come from the store's PKI (kctl.kubeapi.pki, `<store>.pki/`, made here when no daemon
made it yet): the cluster CA, and a client certificate it signs. Without --user the admin's
(CN kctl-admin, O system:masters); with --user NAME [--group G ...] a new certificate for that user
(CN = user, O = groups, as kube-apiserver reads them; RBAC decides what the user may do). The server
is https://127.0.0.1:6443 (`kctl daemon --listen`'s default) unless --server names another. The PKI
is on the control host: with a global --server the command refuses (run it there).
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kctl.cli import connect

#: this module's commands; kctl.cli.root mounts them (root.COMMANDS)
app = typer.Typer()
config_app = typer.Typer(name="config", help="kubeconfig files for kubectl and client libraries "
                                             "(docs/security.md).", no_args_is_help=True)
app.add_typer(config_app)


def _fail(message: str) -> typer.Exit:
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(1)


@config_app.command("kubeconfig")
def kubeconfig(
    server: Annotated[str, typer.Option(
        "--server", help="The HTTPS API's URL the kubeconfig names.")] = "https://127.0.0.1:6443",
    user: Annotated[Optional[str], typer.Option(
        "--user", help="Make a client certificate for this user (CN); default: the admin, kctl-admin.")] = None,
    group: Annotated[Optional[list[str]], typer.Option(
        "--group", help="A group (O) of --user's certificate; repeat for more.")] = None,
    days: Annotated[Optional[int], typer.Option(
        "--days", help="How long a new client certificate is valid (default 365).")] = None,
    context_name: Annotated[str, typer.Option(
        "--context-name", help="The name of the kubeconfig's cluster and context.")] = "kctl",
) -> None:
    """Print a kubeconfig (the CA and a client certificate signed by it) for kctl's HTTPS API."""
    from urllib.parse import urlsplit

    from kctl.kubeapi.pki import ADMIN_GROUPS, ADMIN_USER, CERT_DAYS, PKI, PKIError

    if connect.current().server_url:
        raise _fail("the PKI is on the control host: run `kctl config kubeconfig` there")
    parts = urlsplit(server)
    if parts.scheme != "https" or not parts.hostname:
        raise _fail(f'--server "{server}": must be an https:// URL (as https://127.0.0.1:6443)')
    if group and not user:
        raise _fail("--group needs --user")
    if days is not None and days < 1:
        raise _fail(f"--days {days}: must be at least 1")
    if user is not None and not user.strip():
        raise _fail("--user must not be empty")
    store = connect.open_store()
    try:
        pki = PKI.for_store(store.path)
    finally:
        store.close()
    try:
        pki.ensure(sans=None)
        text = pki.kubeconfig(server_url=server, user=user or ADMIN_USER,
                              groups=tuple(group or ()) if user else ADMIN_GROUPS, context_name=context_name,
                              days=days or CERT_DAYS)
    except (PKIError, OSError) as exc:
        raise _fail(str(exc) if isinstance(exc, PKIError) else f"{pki.folder}: {exc.strerror or exc}") from None
    sys.stdout.write(text)


__all__ = ["app", "config_app"]
