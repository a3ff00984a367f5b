"""kubectl's kubeconfig files: which server to reach over HTTPS, with which credentials, in which namespace.

kctl.cli.connect calls `load(...)` when a command line asks for the Kubernetes REST API
(`--kubeconfig`, `--context`, $KCTL_KUBECONFIG, or `--server https://...`); the result, a frozen
`Connection`, is what kctl.apiserver.rest.transport needs to open TLS connections.

The format and the merging are kubectl's (k8s.io/client-go/tools/clientcmd):
- a file holds `clusters`, `users` and `contexts` (lists of {name, cluster|user|context}) and
  `current-context`;
- several files (a $KUBECONFIG-style list, split on os.pathsep) merge as kubectl merges them:
  the first file that defines a name (or sets current-context) wins; missing files in a list
  are skipped, an explicitly named file must exist;
- relative paths in a file (certificate-authority, client-certificate, client-key, tokenFile)
  are relative to the folder of that file;
- `*-data` fields are base64; `insecure-skip-tls-verify: true` is honoured only when the file
  (or a flag) says so explicitly; `tls-server-name` names the certificate's host when it is not
  the URL's.
What kctl does not support (exec credential plugins, auth-provider, username/password) is one
clear error, never a silent anonymous request. No error or log line carries a token or key.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, field
from pathlib import Path

from kctl.machinery.errors import ClientSideError

#: where kubectl looks when neither --kubeconfig nor $KUBECONFIG names a file
DEFAULT_PATH = "~/.kube/config"


class KubeconfigError(ClientSideError):
    """A kubeconfig that cannot be used: its file, the field, and what is wrong (never a secret value)."""


@dataclass(frozen=True)
class Overrides:
    """What flags set over the kubeconfig (kubectl's --server, --certificate-authority, ...)."""

    context: str | None = None
    server: str | None = None
    certificate_authority: str | None = None
    client_certificate: str | None = None
    client_key: str | None = None
    token: str | None = None
    insecure_skip_tls_verify: bool = False


@dataclass(frozen=True)
class Connection:
    """Everything a client needs to reach one API server: URL, trust, credentials, default namespace."""

    server: str
    namespace: str = "default"
    context: str = ""
    user: str = ""  # the kubeconfig's name for the credentials (not the authenticated user)
    source: str = ""  # the file(s) it came from, for messages
    ca_file: str | None = None
    ca_data: bytes | None = field(default=None, repr=False)
    insecure: bool = False
    tls_server_name: str | None = None
    cert_file: str | None = None
    cert_data: bytes | None = field(default=None, repr=False)
    key_file: str | None = None
    key_data: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)


@dataclass
class Merged:
    """Several kubeconfig files merged as kubectl merges them (first definition wins)."""

    clusters: dict[str, tuple[dict, Path]] = field(default_factory=dict)
    users: dict[str, tuple[dict, Path]] = field(default_factory=dict)
    contexts: dict[str, tuple[dict, Path]] = field(default_factory=dict)
    current_context: str = ""
    files: list[Path] = field(default_factory=list)

    @property
    def source(self) -> str:
        return os.pathsep.join(str(p) for p in self.files) or "(no kubeconfig)"


def paths_for(explicit: str | None, *, environ: dict[str, str] | None = None) -> tuple[list[Path], bool]:
    """The files to read and whether they were named explicitly (then each must exist).

    `explicit`: --kubeconfig or $KCTL_KUBECONFIG (a path, or a list split on os.pathsep).
    Otherwise $KUBECONFIG (a list; missing files skipped), else ~/.kube/config.
    """
    env = os.environ if environ is None else environ
    if explicit:
        return [Path(p).expanduser() for p in explicit.split(os.pathsep) if p], True
    listed = env.get("KUBECONFIG", "")
    if listed:
        return [Path(p).expanduser() for p in listed.split(os.pathsep) if p], False
    return [Path(DEFAULT_PATH).expanduser()], False


def _parse(path: Path) -> dict:
    """One file's content as a mapping (an empty file is an empty config)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {path}: cannot read it: {exc.strerror or exc}") from None
    if not text.strip():
        return {}
    from kctl.manifests.errors import ManifestError
    from kctl.manifests.yamlio import load_documents  # kctl's YAML reader: fast for the shapes kubeconfigs have

    try:
        documents = load_documents(text, source=str(path))
    except ManifestError as exc:
        where = f" (line {exc.line})" if getattr(exc, "line", None) else ""
        raise KubeconfigError(f"kubeconfig {path}: not valid YAML{where}: {exc.message}") from None
    if not documents:
        return {}
    data = documents[0][2]
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KubeconfigError(f"kubeconfig {path}: must be a mapping with clusters, users and contexts")
    return data


def _entries(data: dict, key: str, inner: str, path: Path) -> list[tuple[str, dict]]:
    """The named entries of one list (clusters -> cluster, ...), checked."""
    items = data.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise KubeconfigError(f"kubeconfig {path}: {key} must be a list")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise KubeconfigError(f"kubeconfig {path}: {key}[{i}].name must be a non-empty string")
        body = item.get(inner)
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise KubeconfigError(f"kubeconfig {path}: {key}[{i}].{inner} must be a mapping")
        out.append((item["name"], body))
    return out


def merge(paths: list[Path], *, explicit: bool) -> Merged:
    """Read and merge the files in order: the first definition of a name, and the first current-context, win."""
    merged = Merged()
    for path in paths:
        if not path.exists():
            if explicit:
                raise KubeconfigError(f"kubeconfig {path}: no such file")
            continue
        data = _parse(path)
        merged.files.append(path)
        for key, inner, table in (("clusters", "cluster", merged.clusters), ("users", "user", merged.users),
                                  ("contexts", "context", merged.contexts)):
            for name, body in _entries(data, key, inner, path):
                table.setdefault(name, (body, path))
        current = data.get("current-context")
        if current and not merged.current_context:
            if not isinstance(current, str):
                raise KubeconfigError(f"kubeconfig {path}: current-context must be a string")
            merged.current_context = current
    return merged


def load(explicit: str | None = None, overrides: Overrides | None = None, *,
         environ: dict[str, str] | None = None) -> Connection:
    """The Connection a command line selects: kubeconfig files merged, a context chosen, flags over both."""
    overrides = overrides or Overrides()
    paths, named = paths_for(explicit, environ=environ)
    merged = merge(paths, explicit=named)
    return resolve(merged, overrides)


def resolve(merged: Merged, overrides: Overrides) -> Connection:
    """The chosen context's cluster and user, with the flags over them."""
    where = merged.source
    name = overrides.context or merged.current_context
    context: dict = {}
    if name:
        if name not in merged.contexts:
            raise KubeconfigError(f'kubeconfig {where}: context "{name}" does not exist')
        context = merged.contexts[name][0]
    elif not overrides.server:
        raise KubeconfigError(f"kubeconfig {where}: no current-context is set: use --context NAME"
                              if merged.files else "no kubeconfig found: use --kubeconfig PATH or --server URL")
    cluster, cluster_file = _named(merged.clusters, context.get("cluster"), "cluster", name, where)
    user, user_file = _named(merged.users, context.get("user"), "user", name, where)
    namespace = context.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise KubeconfigError(f'kubeconfig {where}: contexts "{name}": namespace must be a string')
    server = overrides.server or cluster.get("server")
    if not server:
        raise KubeconfigError(f'kubeconfig {where}: cluster "{context.get("cluster", "")}" has no server')
    c_where = f'kubeconfig {cluster_file}: clusters "{context.get("cluster")}"' if cluster_file else "flags"
    check_server_url(server, where="--server" if overrides.server else c_where)
    u_where = f'kubeconfig {user_file}: users "{context.get("user")}"' if user_file else "flags"
    for unsupported in ("exec", "auth-provider", "username", "password"):
        if user.get(unsupported):
            raise KubeconfigError(f"{u_where}: {unsupported} credentials are not supported by kctl "
                                  "(use a client certificate or a token)")
    insecure = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise KubeconfigError(f"{c_where}: insecure-skip-tls-verify must be true or false")
    ca_file, ca_data = _file_or_data(cluster, "certificate-authority", cluster_file, c_where)
    cert_file, cert_data = _file_or_data(user, "client-certificate", user_file, u_where)
    key_file, key_data = _file_or_data(user, "client-key", user_file, u_where)
    token = user.get("token") or None
    if token is not None and not isinstance(token, str):
        raise KubeconfigError(f"{u_where}: token must be a string")
    token_file = user.get("tokenFile")
    if token is None and token_file:
        path = _relative(str(token_file), user_file)
        try:
            token = Path(path).read_text().strip() or None
        except OSError as exc:
            raise KubeconfigError(f"{u_where}: tokenFile {path}: {exc.strerror or exc}") from None
    if overrides.certificate_authority:
        ca_file, ca_data = overrides.certificate_authority, None
    if overrides.client_certificate:
        cert_file, cert_data = overrides.client_certificate, None
    if overrides.client_key:
        key_file, key_data = overrides.client_key, None
    if overrides.token:
        token = overrides.token
    if overrides.insecure_skip_tls_verify:
        insecure = True
    if (cert_file or cert_data) and not (key_file or key_data):
        raise KubeconfigError(f"{u_where}: client-certificate is given without client-key")
    if (key_file or key_data) and not (cert_file or cert_data):
        raise KubeconfigError(f"{u_where}: client-key is given without client-certificate")
    tls_name = cluster.get("tls-server-name") or None
    return Connection(server=server.rstrip("/"), namespace=namespace, context=name or "",
                      user=str(context.get("user") or ""), source=where, ca_file=ca_file, ca_data=ca_data,
                      insecure=insecure, tls_server_name=tls_name, cert_file=cert_file, cert_data=cert_data,
                      key_file=key_file, key_data=key_data, token=token)


def check_server_url(server: str, *, where: str = "--server") -> None:
    """An https:// URL with a host (kctl speaks the REST API over TLS only); KubeconfigError if not."""
    from urllib.parse import urlsplit

    parts = urlsplit(server)
    if parts.scheme != "https" or not parts.hostname:
        raise KubeconfigError(f"{where}: server {server!r} is not an https://host[:port] URL")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise KubeconfigError(f"{where}: server {server!r}: the port is not a number from 0 to 65535") from None


def _named(table: dict[str, tuple[dict, Path]], name: object, what: str, context: str,
           where: str) -> tuple[dict, Path | None]:
    """The entry a context names; an empty one when the context names none (flags may fill it)."""
    if not name:
        return {}, None
    if name not in table:
        raise KubeconfigError(f'kubeconfig {where}: context "{context}" names {what} "{name}", which does not exist')
    body, path = table[name]
    return body, path


def _relative(value: str, base: Path | None) -> str:
    path = Path(value).expanduser()
    if not path.is_absolute() and base is not None:
        path = base.parent / path
    return str(path)


def _file_or_data(entry: dict, key: str, base: Path | None, where: str) -> tuple[str | None, bytes | None]:
    """A `key` (a file, relative to the kubeconfig's folder) or `key-data` (base64) of an entry."""
    data = entry.get(f"{key}-data")
    if data:
        if not isinstance(data, str):
            raise KubeconfigError(f"{where}: {key}-data must be a base64 string")
        try:
            return None, base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise KubeconfigError(f"{where}: {key}-data is not valid base64") from None
    value = entry.get(key)
    if value:
        if not isinstance(value, str):
            raise KubeconfigError(f"{where}: {key} must be a file path")
        return _relative(value, base), None
    return None, None


__all__ = ["Connection", "DEFAULT_PATH", "KubeconfigError", "Merged", "Overrides", "check_server_url", "load",
           "merge", "paths_for", "resolve"]
