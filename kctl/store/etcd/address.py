"""Where an etcd store lives: `etcd://host:2379[,host2:2379...][/prefix]` and the client's TLS files.

Called by kctl.store.open (the --store option), kctl.testing.etcdcluster and EtcdStore. The
prefix is the key prefix every key of the store lives under (default `/registry`, as
kube-apiserver's --etcd-prefix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SCHEME = "etcd://"
DEFAULT_PREFIX = "/registry"
DEFAULT_PORT = 2379

_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$")
_PREFIX_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class EtcdAddress:
    """The members a client may talk to (host:port each) and the key prefix of the store."""

    endpoints: tuple[str, ...]
    prefix: str = DEFAULT_PREFIX

    def __str__(self) -> str:
        return SCHEME + ",".join(self.endpoints) + self.prefix


@dataclass(frozen=True)
class EtcdTLS:
    """The client's TLS files: CA to verify members, certificate and key to prove itself.

    TLS (https) is used iff ca_file or cert_file is given.
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.ca_file or self.cert_file)


def is_etcd_address(text: str) -> bool:
    """Whether a --store value names an etcd store."""
    return text.startswith(SCHEME)


def _endpoint(text: str, address: str) -> str:
    host, sep, port = text.rpartition(":") if not text.endswith("]") else (text, "", "")
    if not sep:
        host, port = text, str(DEFAULT_PORT)
    if not host or not _HOST.match(host):
        raise ValueError(f"{address}: {text!r} is not host:port (e.g. etcd://10.0.0.1:2379)")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{address}: {text!r} has no valid port (1-65535)")
    return f"{host}:{int(port)}"


def parse_address(text: str) -> EtcdAddress:
    """`etcd://h1:2379,h2:2379/prefix` -> EtcdAddress; ValueError with one line naming what is wrong."""
    if not is_etcd_address(text):
        raise ValueError(f"{text}: an etcd address starts with {SCHEME} (e.g. etcd://10.0.0.1:2379/registry)")
    rest = text[len(SCHEME):]
    hosts, slash, prefix = rest.partition("/")
    if not hosts:
        raise ValueError(f"{text}: no etcd member given (e.g. etcd://10.0.0.1:2379)")
    endpoints = tuple(_endpoint(item, text) for item in hosts.split(","))
    if len(set(endpoints)) != len(endpoints):
        raise ValueError(f"{text}: a member is listed twice")
    prefix = prefix.rstrip("/")
    if not slash or not prefix:
        return EtcdAddress(endpoints, DEFAULT_PREFIX)
    if not all(_PREFIX_SEGMENT.match(seg) for seg in prefix.split("/")):
        raise ValueError(f"{text}: the key prefix {'/' + prefix!r} may hold only letters, digits, '.', '_', '-' "
                         "and '/' between segments")
    return EtcdAddress(endpoints, "/" + prefix)
