"""The etcd store's key layout and value encoding.

Objects live where kube-apiserver puts them: `<prefix>/<resource>/<namespace>/<name>`, and
`<prefix>/<resource>/<name>` for cluster-scoped ones. <resource> is the kind's plural
(`pods`, `deployments`); a plural two built-in kinds share, and kctl's own groups, take the
group too (`pods.metrics.k8s.io`, `gitsources.kctl.io`); a kind the built-in table does not
know (a custom resource) is written as its group_kind (`Widget.example.com`, which no plural
can be: kinds start upper-case). kctl's own keys are under `<prefix>/.kctl/`: the head (put by
every write transaction: its mod_revision is the store's revision), one marker per kind (put
by every write of that kind: guards list reads), the uid and owner indexes, the compaction
horizon and the compactor's key.

Values are the object's JSON without metadata.resourceVersion (that is the key's
mod_revision, as in Kubernetes); Secrets are sealed by kctl.store.encryption first.
Called by kctl.store.etcd.store, transaction, watch and backup.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from orjson import loads as _fast_loads

from kctl.machinery import compactjson
from kctl.store.contract import ENCRYPTED_KINDS

KCTL = ".kctl"
_dumps = compactjson.text
FAST_DECODE_LIMIT = 64 << 10
SEALED = b"k8s:enc:aesgcm:v1:"  # kctl.store.encryption.PREFIX, without importing the crypto module


def _segments() -> tuple[dict[str, str], dict[str, str]]:
    from kctl.machinery.resources import BUILTIN, KCTL_GROUP, METRICS_GROUP

    plurals: dict[str, int] = {}
    for rt in BUILTIN:
        plurals[rt.plural] = plurals.get(rt.plural, 0) + 1
    forward: dict[str, str] = {}
    for rt in BUILTIN:
        own = rt.group in (KCTL_GROUP, METRICS_GROUP) or plurals[rt.plural] > 1
        forward[rt.group_kind] = rt.group_resource if own and rt.group else rt.plural
    if len(set(forward.values())) != len(forward):  # pragma: no cover - a table error
        raise AssertionError("two kinds share one etcd key segment")
    return forward, {seg: kind for kind, seg in forward.items()}


_FORWARD, _BACKWARD = _segments()


def segment(kind: str) -> str:
    """The <resource> segment of a kind's keys."""
    return _FORWARD.get(kind) or kind


def kind_of(seg: str) -> str:
    """The kind a <resource> segment holds (the inverse of segment)."""
    return _BACKWARD.get(seg) or seg


class Layout:
    """The keys of one store (one prefix), as str; the gateway wants them base64 (b64)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.root = prefix + "/"
        self.own = f"{prefix}/{KCTL}/"
        self.head = self.own + "head"
        self.compacted = self.own + "compacted"
        self.compactor = self.own + "compact_rev_key"
        self.epoch = self.own + "epoch"

    @property
    def objects_from(self) -> str:
        """Where object keys begin: right after kctl's own keys (`.kctl/` sorts before every resource)."""
        return self.prefix + "/" + KCTL + "0"  # "0" follows "/"

    def object(self, kind: str, namespace: str, name: str) -> str:
        if namespace:
            return f"{self.root}{segment(kind)}/{namespace}/{name}"
        return f"{self.root}{segment(kind)}/{name}"

    def kind_prefix(self, kind: str, namespace: str | None = None) -> str:
        base = f"{self.root}{segment(kind)}/"
        return base + f"{namespace}/" if namespace else base

    def marker(self, kind: str) -> str:
        return f"{self.own}kinds/{segment(kind)}"

    def uid(self, uid: str) -> str:
        return f"{self.own}uids/{uid}"

    def owners(self, owner_uid: str) -> str:
        return f"{self.own}owners/{owner_uid}/"

    def owner(self, owner_uid: str, kind: str, namespace: str, name: str) -> str:
        return f"{self.owners(owner_uid)}{segment(kind)}/{namespace}/{name}"

    def parse(self, key: str) -> tuple[str, str, str] | None:
        """(kind, namespace, name) of an object key; None for kctl's own keys and foreign ones."""
        if not key.startswith(self.root) or key.startswith(self.own):
            return None
        parts = key[len(self.root):].split("/")
        if len(parts) == 3:
            return kind_of(parts[0]), parts[1], parts[2]
        if len(parts) == 2:
            return kind_of(parts[0]), "", parts[1]
        return None


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def range_end(prefix: str) -> str:
    """The base64 range end that covers every key starting with prefix."""
    raw = bytearray(prefix.encode())
    raw[-1] += 1
    return b64(bytes(raw))


def loads(text: str | bytes) -> Any:
    """A stored JSON value decoded (orjson when small and acceptable, else json)."""
    if len(text) <= FAST_DECODE_LIMIT:
        try:
            return _fast_loads(text)
        except ValueError:
            pass
    return json.loads(text)


def dumps(obj: dict) -> bytes:
    """An object's stored JSON: compact, without metadata.resourceVersion."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
    return compactjson.encode(obj)


def is_sealed_kind(kind: str) -> bool:
    return kind in ENCRYPTED_KINDS
