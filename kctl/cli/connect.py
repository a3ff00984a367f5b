"""How a CLI command reaches the API: the store it opens, and the names it prints.

The root callback (kctl.cli.main.root) puts a frozen `CLIContext` (--store, --server,
--identity, --kubeconfig, --context and the TLS flags) on Click's `ctx.obj`; every command module
reads it through `current()` and calls `api()` to get the API for it: the APIServer over the
chosen store (or $KCTL_STORE, or the default under the user's data dir), the control host's over
SSH with --server ssh://..., or a Kubernetes REST API over HTTPS (kctl.apiserver.rest) with
--server https://..., --kubeconfig, --context or $KCTL_KUBECONFIG. $KUBECONFIG alone never
selects HTTPS: the local store stays the default, so a user whose $KUBECONFIG names a real
cluster does not see kctl talk to it unasked; once HTTPS is selected (--context without
--kubeconfig), $KUBECONFIG and ~/.kube/config are read as kubectl reads them.
The API is made once per command and kept in the Click context's `meta`, so this module
holds no state of its own. The default store is created on first use; an explicitly named
one must exist unless the command writes (`open_store`). --store (and $KCTL_STORE) may also
name an etcd cluster, `etcd://host:2379[,host:2379...][/prefix]`, reached with the
--etcd-cafile/--etcd-certfile/--etcd-keyfile TLS files; its local companion files (key file,
PKI, audit log, known_hosts) live under its state path (--etcd-state-dir; kctl.store.open
chooses the backend and the paths).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kctl.machinery.resources import ResourceType

if TYPE_CHECKING:
    from pathlib import Path

    from kctl.apiserver.contract import API
    from kctl.machinery.errors import APIError
    from kctl.store.contract import Store
    from kctl.store.etcd.address import EtcdTLS


@dataclass(frozen=True)
class CLIContext:
    """The global options of one command line: what every command connects to."""

    #: --store / $KCTL_STORE: the SQLite store file (None: the default one) or an etcd://host:port[,...][/prefix]
    store_path: str | None = None
    #: --server / $KCTL_SERVER: the control plane at ssh://user@host[:port]/path (kctl.apiserver.remote)
    server_url: str | None = None
    #: --identity / $KCTL_SSH_IDENTITY: the SSH private key for --server
    identity: str | None = None
    #: --kubeconfig / $KCTL_KUBECONFIG: kubectl's kubeconfig file(s) for a REST API over HTTPS
    kubeconfig: str | None = None
    #: --context: the kubeconfig context (from --kubeconfig, else $KUBECONFIG or ~/.kube/config)
    context: str | None = None
    #: --certificate-authority, --client-certificate, --client-key, --token, --insecure-skip-tls-verify
    certificate_authority: str | None = None
    client_certificate: str | None = None
    client_key: str | None = None
    token: str | None = None
    insecure_skip_tls_verify: bool = False
    #: --etcd-cafile, --etcd-certfile, --etcd-keyfile ($KCTL_ETCD_CAFILE...): TLS to an etcd:// store
    etcd_cafile: str | None = None
    etcd_certfile: str | None = None
    etcd_keyfile: str | None = None
    #: --etcd-state-dir / $KCTL_ETCD_STATE_DIR: the folder of an etcd store's local files (None: per cluster)
    etcd_state_dir: str | None = None
    #: seconds between an etcd store's compactions in this process (`kctl daemon --etcd-compaction-interval`;
    #: None or 0: none, as for every short-lived command)
    etcd_compaction_interval: float | None = None

    @property
    def etcd(self) -> bool:
        """Whether --store names an etcd cluster (etcd://...), not a SQLite file."""
        from kctl.store.open import is_etcd

        return not self.remote and is_etcd(self.store_path)

    @property
    def https(self) -> bool:
        """Whether commands reach a Kubernetes REST API over HTTPS (kctl.apiserver.rest), not a store or SSH."""
        if self.server_url:
            return self.server_url.split("://", 1)[0].lower() in ("https", "http")
        return bool(self.kubeconfig or self.context)

    @property
    def remote(self) -> bool:
        """Whether the store is elsewhere (over SSH or HTTPS): local-only commands refuse to run."""
        return bool(self.server_url) or self.https


#: the key of the command's API in Click's ctx.meta (shared by every context of one command line)
_API_KEY = "kctl.apiserver"


def current() -> CLIContext:
    """The running command's CLIContext (the defaults when called outside a command, as a library)."""
    import click

    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if isinstance(ctx.obj, CLIContext):
            return ctx.obj
        ctx = ctx.parent
    return CLIContext()


def use(context: CLIContext) -> None:
    """Make `context` the running command's CLIContext (the daemon's own --store/--server); forgets its API."""
    import click

    ctx = click.get_current_context()
    ctx.obj = context
    ctx.meta.pop(_API_KEY, None)


def warn(message: str) -> None:
    """Warnings from admission hooks and from kctl itself, as kubectl prints them."""
    print(f"Warning: {message}", file=sys.stderr)


def api() -> API:
    """The APIServer over the selected store, or the control host's with --server (once per command)."""
    import click

    ctx = click.get_current_context(silent=True)
    if ctx is None:  # called as a library, outside a command: a new one each time
        return _connect(current())
    if _API_KEY not in ctx.meta:
        ctx.meta[_API_KEY] = _connect(current())
    return ctx.meta[_API_KEY]


def _connect(context: CLIContext, *, creating: bool | None = None) -> API:
    """A new API client for `context` (`creating`: as `open_store`)."""
    if context.https:
        from kctl.apiserver.rest.client import RESTAPIClient

        return RESTAPIClient(rest_connection(context), warn=warn)
    if context.server_url:
        if context.kubeconfig or context.context:
            from kctl.machinery.errors import ClientSideError

            raise ClientSideError("--server ssh://... cannot be used with --kubeconfig or --context "
                                  "(they select a Kubernetes API over HTTPS)")
        from kctl.apiserver.remote import RemoteAPIServer

        return RemoteAPIServer(context.server_url, identity=context.identity, warn=warn)
    from kctl.apiserver.server import APIServer

    return APIServer(open_store(context.store_path, creating=creating, context=context), warn=warn)


def rest_connection(context: CLIContext):
    """The kctl.apiserver.rest.kubeconfig.Connection the line selects (KubeconfigError: one line)."""
    from kctl.apiserver.rest import kubeconfig

    overrides = kubeconfig.Overrides(
        context=context.context, server=context.server_url, certificate_authority=context.certificate_authority,
        client_certificate=context.client_certificate, client_key=context.client_key, token=context.token,
        insecure_skip_tls_verify=context.insecure_skip_tls_verify)
    if context.kubeconfig or context.context:
        return kubeconfig.load(context.kubeconfig, overrides)
    return kubeconfig.resolve(kubeconfig.Merged(), overrides)


def connect(context: CLIContext, *, creating: bool = False) -> API:
    """A new API client for `context`, outside any Click command (kctl.cli.main's path without Click).

    `creating`: whether this command may create an explicitly named store that does not exist yet.
    """
    return _connect(context, creating=creating)


def error_line(exc: APIError) -> str:
    """kubectl's line for an error: `error: ...` if found on the client, else `Error from server (Reason): ...`."""
    from kctl.machinery.errors import ClientSideError

    if isinstance(exc, ClientSideError):
        return f"error: {exc.message}"
    return f"Error from server ({exc.reason}): {exc.message}"


#: commands that may create a store that an explicit --store/KCTL_STORE names (its folder must exist)
CREATING_COMMANDS = frozenset({("apply",), ("create",), ("daemon",), ("restore",), ("init",), ("sync",),
                               ("sync", "run"), ("node", "add")})


def open_store(store_path: str | None = None, *, creating: bool | None = None,
               context: CLIContext | None = None) -> Store:
    """The store at `store_path` (default: this command's --store), SQLite or etcd (kctl.store.open): the
    default one is created on first use; an explicit SQLite one (--store/KCTL_STORE) must have an existing
    folder, and only writing commands create its file (`creating`; None: ask whether the running Click
    command is one). The etcd TLS files, state folder and compaction interval come from `context` (default:
    this command's).

    A mistyped path, a bad etcd:// address or an etcd cluster that does not answer is one clear error
    line and exit status 1, not a new empty store that answers "No resources found" nor a traceback.
    """
    from kctl.machinery.errors import ClientSideError
    from kctl.store import open as opening
    from kctl.store.contract import StoreError

    context = context or current()
    store_path = store_path or context.store_path
    writes = _creates_store() if creating is None else creating
    try:
        if not opening.is_etcd(store_path):
            return opening.open_store(store_path or None, creating=writes)
        options = {"compaction_interval": context.etcd_compaction_interval or None}
        return opening.open_store(store_path, tls=etcd_tls(context), state_dir=context.etcd_state_dir, **options)
    except (ClientSideError, StoreError) as exc:
        _no_store(exc.message)
        raise  # not reached: _no_store exits


def etcd_tls(context: CLIContext) -> EtcdTLS | None:
    """The TLS files of an etcd:// store (None: plain http); ClientSideError naming the flag when one is
    missing or a certificate comes without its key."""
    from kctl.machinery.errors import ClientSideError

    given = {"--etcd-cafile": context.etcd_cafile, "--etcd-certfile": context.etcd_certfile,
             "--etcd-keyfile": context.etcd_keyfile}
    if not any(given.values()):
        return None
    for flag, path in given.items():
        if path and not os.path.isfile(os.path.expanduser(path)):
            raise ClientSideError(f"{flag} {path}: no such file")
    if bool(context.etcd_certfile) != bool(context.etcd_keyfile):
        raise ClientSideError("--etcd-certfile and --etcd-keyfile go together (a client certificate and its key)")
    from kctl.store.etcd.address import EtcdTLS

    def expand(path: str | None) -> str | None:
        return os.path.expanduser(path) if path else None

    return EtcdTLS(ca_file=expand(context.etcd_cafile), cert_file=expand(context.etcd_certfile),
                   key_file=expand(context.etcd_keyfile))


def local_path(context: CLIContext | None = None) -> Path:
    """The local anchor of the command's store, without opening it: the SQLite file (the default store's
    when none is named), or an etcd store's state path; known_hosts, the audit log and the PKI live beside it."""
    from kctl.machinery.errors import ClientSideError
    from kctl.store.open import local_path as anchor

    context = context or current()
    try:
        return anchor(context.store_path, state_dir=context.etcd_state_dir)
    except ClientSideError as exc:  # a bad etcd:// address: one line
        _no_store(exc.message)
        raise  # not reached: _no_store exits


def _creates_store() -> bool:
    """Whether the running command is one that writes a new store (apply, create, daemon...)."""
    import click

    ctx = click.get_current_context(silent=True)
    if ctx is None:  # called as a library, outside a command
        return True
    names: list[str] = []
    while ctx.parent is not None:  # the sub-command names below the root, outermost first
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    words = tuple(names)
    return words[:1] in CREATING_COMMANDS or words[:2] in CREATING_COMMANDS


def _no_store(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(1)


def ref(rt: ResourceType, name: str) -> str:
    """kubectl's `deployment.apps/web`, `pod/x`."""
    kind = rt.kind.lower()
    return f"{kind}.{rt.group}/{name}" if rt.group else f"{kind}/{name}"


def namespace_arg(namespace: str | None) -> str:
    """The namespace of a command: -n, else the kubeconfig context's over HTTPS (as kubectl), else "default"."""
    if namespace:
        return namespace
    if current().https:
        return getattr(api(), "default_namespace", None) or "default"
    return "default"


def targets(args: list[str]) -> list[tuple[ResourceType, list[str]]]:
    """kubectl's resource arguments: `TYPE[,TYPE] [NAME...]` or `TYPE/NAME...`, in order."""
    from kctl.machinery.errors import ClientSideError

    server = api()
    if not args:
        raise ClientSideError("You must specify the type of resource to get. "
                              "Use \"kctl api-resources\" for a complete list")
    if any("/" in a for a in args):
        if not all("/" in a for a in args):
            raise ClientSideError("there is no need to specify a resource type as a separate argument when passing "
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
        raise ClientSideError("names cannot be given with several resource types; use TYPE/NAME")
    return [(server.resource(k), list(args[1:])) for k in kinds]
