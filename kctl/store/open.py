"""Choosing the store backend from an address: a SQLite file path, or `etcd://host:2379[,host:2379...][/prefix]`.

The composition points that build a Store call `open_store` and nothing else: the CLI's
kctl.cli.connect (every command, the daemon, completion, the maintenance commands),
kctl.apiserver.serve (`kctl serve --stdio`) and kctl.kubeapi.pki (the PKI beside the store).
`local_path` gives a store's local anchor without opening it (the SQLite file; for etcd the
state path that holds the key file, the PKI, the audit log, known_hosts and the leader lock
files), for the commands that only read those files.

SQLite keeps its rules: the default store (no address) is created on first use; an explicit
path must lie in an existing folder, and its file is created only when `creating`. An etcd
store is always "there" (a prefix needs no creating); its state path defaults to
`$XDG_DATA_HOME/kctl/etcd/<12 hex of sha256(sorted endpoints, prefix)>/kctl`, so every
command naming the same cluster and prefix finds the same key file; `state_dir` (the CLI's
--etcd-state-dir, $KCTL_ETCD_STATE_DIR) puts it at `<state_dir>/kctl` instead. The etcd
backend (kctl.store.etcd) is imported only when an etcd:// address is opened, so a command
on SQLite never loads it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kctl.store.contract import Store
    from kctl.store.etcd.address import EtcdAddress, EtcdTLS

#: the scheme that selects the etcd backend
ETCD_SCHEME = "etcd://"
#: the environment variable of the etcd state folder (the CLI's --etcd-state-dir reads it too)
STATE_DIR_ENV = "KCTL_ETCD_STATE_DIR"
#: the name of the state path's anchor inside the state folder (`<anchor>.keys`, `<anchor>.pki/`, ...)
ANCHOR = "kctl"


def is_etcd(address: str | os.PathLike | None) -> bool:
    """Whether `address` names an etcd cluster (etcd://...), not a SQLite file."""
    return isinstance(address, str) and address.strip().lower().startswith(ETCD_SCHEME)


def parse_etcd(address: str) -> EtcdAddress:
    """The parsed etcd:// address; ClientSideError with one line naming --store when it is not usable."""
    from kctl.machinery.errors import ClientSideError
    from kctl.store.etcd.address import parse_address

    text = address.strip()
    try:
        return parse_address(text)
    except ValueError as exc:
        message = str(exc)  # the parser's line names the address itself, usually first
        raise ClientSideError(f"--store {message}" if message.startswith(f"{text}: ")
                              else f"--store {text}: {message}") from None


def etcd_state_path(address: str | EtcdAddress, *, state_dir: str | os.PathLike | None = None) -> Path:
    """The local anchor of the etcd store at `address`: `<state_dir>/kctl`, or by default
    `$XDG_DATA_HOME/kctl/etcd/<12 hex of sha256 of the sorted endpoints and the prefix>/kctl`."""
    if isinstance(address, str):
        address = parse_etcd(address)
    chosen = state_dir or os.environ.get(STATE_DIR_ENV)
    if chosen:
        return Path(chosen).expanduser() / ANCHOR
    digest = hashlib.sha256("\n".join([*sorted(address.endpoints), address.prefix]).encode()).hexdigest()[:12]
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "kctl" / "etcd" / digest / ANCHOR


def local_path(address: str | os.PathLike | None, *, state_dir: str | os.PathLike | None = None) -> Path:
    """The store's local anchor, without opening it: the SQLite file (None: the default store's), or the
    etcd store's state path (see `etcd_state_path`)."""
    address = _or_environment(address)
    if is_etcd(address):
        return etcd_state_path(str(address), state_dir=state_dir)
    if address is None:
        from kctl.store.sqlite import default_path

        return default_path()
    return Path(address).expanduser()


def _or_environment(address: str | os.PathLike | None) -> str | os.PathLike | None:
    """`address`; else an etcd:// $KCTL_STORE (library callers too select etcd by it); else None (SQLite's
    default_path reads a path in $KCTL_STORE itself)."""
    if address is not None and os.fspath(address):
        return address
    environment = os.environ.get("KCTL_STORE")
    return environment if is_etcd(environment) else None


def open_store(address: str | os.PathLike | None, *, creating: bool | None = None, tls: EtcdTLS | None = None,
               state_dir: str | os.PathLike | None = None, **options: Any) -> Store:
    """The store at `address`: a SQLite file (None: the default one, created on first use) or an etcd cluster.

    creating: whether an explicit SQLite path that does not exist yet may be created (None: yes, as a
    library caller expects; the CLI passes whether its command writes). tls and state_dir apply to etcd
    only; options go to the backend's constructor (SQLite: history, page_bytes...; etcd: compaction_interval,
    request_timeout...). A bad address or a missing SQLite store is one ClientSideError line; an etcd
    cluster that does not answer is the backend's StoreUnavailable, naming the members it could not reach.
    """
    from kctl.machinery.errors import ClientSideError

    address = _or_environment(address)
    if is_etcd(address):
        parsed = parse_etcd(str(address))
        from kctl.store.etcd.store import EtcdStore

        return EtcdStore(parsed, state_path=etcd_state_path(parsed, state_dir=state_dir), tls=tls, **options)
    from kctl.store.sqlite import Store

    if address is None:
        return Store(None, **options)
    path = Path(address).expanduser()
    if not path.parent.is_dir():
        raise ClientSideError(f"no store at {path}: folder {path.parent} does not exist (check --store/KCTL_STORE; "
                              f"`kctl --store {path} init` creates it)")
    if not path.exists() and creating is False:
        raise ClientSideError(f"no store at {path} (check --store/KCTL_STORE; `kctl --store {path} init` or a first "
                              "`kctl apply` creates it)")
    return Store(path, **options)


__all__ = ["ANCHOR", "ETCD_SCHEME", "STATE_DIR_ENV", "etcd_state_path", "is_etcd", "local_path", "open_store",
           "parse_etcd"]
