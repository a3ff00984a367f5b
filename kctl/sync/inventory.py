"""What a GitSource owns: its label on every object it applies, and the inventory in its status.

kctl.sync.reconcile labels each applied object `kctl.io/sync-source: <namespace>.<name>`
(`source_label_value`) and records every object of the applied revision in
`status.inventory` (`Entry`: apiVersion, kind, namespace, name, uid and the
resourceVersion seen right after the apply). The next revision prunes the entries it no
longer holds (`prune_candidates`), but only objects that still carry this source's label
and the recorded uid (`still_owned`): an object re-created by someone else, or relabelled,
is never deleted. `unchanged_since_apply` is the no-change fast path's check (one list per
kind). Objects annotated `kctl.io/sync: disabled` are left alone (`sync_disabled`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.machinery.resources import ResourceType

#: label on every object a source applied: "<namespace>.<name>" of the GitSource
SOURCE_LABEL = "kctl.io/sync-source"
#: annotation: the source revision (BRANCH@COMMIT) that last changed the object
REVISION_ANNOTATION = "kctl.io/sync-revision"
#: annotation set out of band: "disabled" makes every source leave the object alone
SYNC_ANNOTATION = "kctl.io/sync"
SYNC_DISABLED = "disabled"
#: finalizer of a GitSource with prune: true (its objects are pruned when it is deleted)
PRUNE_FINALIZER = "kctl.io/sync-prune"

_LABEL_MAX = 63
_HASH_CHARS = 10

#: (group/kind as the store keys it, namespace or "", name)
ObjectKey = tuple[str, str, str]


def source_label_value(namespace: str, name: str) -> str:
    """`namespace.name`, or, past a label value's 63 characters, a prefix of it plus a hash of all of it."""
    full = f"{namespace}.{name}"
    if len(full) <= _LABEL_MAX:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:_HASH_CHARS]
    prefix = full[:_LABEL_MAX - _HASH_CHARS - 1].rstrip("-.")
    return f"{prefix}-{digest}"


def group_kind_of(api_version: str, kind: str) -> str:
    """The store's key of a kind from apiVersion and kind: `Deployment.apps`, `ConfigMap`."""
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    return f"{kind}.{group}" if group else kind


@dataclass(frozen=True)
class Entry:
    """One object of the applied revision, as status.inventory records it."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""

    @property
    def key(self) -> ObjectKey:
        return group_kind_of(self.api_version, self.kind), self.namespace, self.name

    def to_status(self) -> dict:
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        if self.resource_version:
            out["resourceVersion"] = self.resource_version
        return out

    @classmethod
    def from_status(cls, item: dict) -> "Entry":
        return cls(api_version=str(item.get("apiVersion") or ""), kind=str(item.get("kind") or ""),
                   namespace=str(item.get("namespace") or ""), name=str(item.get("name") or ""),
                   uid=str(item.get("uid") or ""), resource_version=str(item.get("resourceVersion") or ""))

    @classmethod
    def of(cls, obj: dict) -> "Entry":
        """The entry of a stored object (its uid and resourceVersion as they are now)."""
        meta = obj.get("metadata") or {}
        return cls(api_version=str(obj.get("apiVersion") or ""), kind=str(obj.get("kind") or ""),
                   namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
                   uid=str(meta.get("uid") or ""), resource_version=str(meta.get("resourceVersion") or ""))


def inventory_of(source: dict) -> list[Entry]:
    """The entries in a GitSource's status.inventory (malformed items skipped)."""
    items = (source.get("status") or {}).get("inventory") or ()
    return [Entry.from_status(item) for item in items if isinstance(item, dict) and item.get("name")]


def key_of_object(rt: "ResourceType", obj: dict) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return rt.group_kind, str(meta.get("namespace") or "") if rt.namespaced else "", str(meta.get("name") or "")


def labels_of(obj: dict | None) -> dict:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def annotations_of(obj: dict | None) -> dict:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def owner_of(obj: dict | None) -> str | None:
    """The sync-source label of a live object (None: no source applied it)."""
    value = labels_of(obj).get(SOURCE_LABEL)
    return value if isinstance(value, str) and value else None


def sync_disabled(obj: dict | None) -> bool:
    """The object is annotated `kctl.io/sync: disabled`: no source writes or prunes it."""
    return annotations_of(obj).get(SYNC_ANNOTATION) == SYNC_DISABLED


def still_owned(entry: Entry, live: dict | None, label: str) -> bool:
    """The live object is the one recorded (same uid) and still carries this source's label."""
    if live is None or owner_of(live) != label:
        return False
    uid = (live.get("metadata") or {}).get("uid")
    return not entry.uid or uid == entry.uid


def prune_candidates(inventory: Iterable[Entry], kept: set[ObjectKey]) -> list[Entry]:
    """The inventory's entries the new revision no longer holds, in inventory order."""
    return [entry for entry in inventory if entry.key not in kept]


def prune_share_exceeded(pruned: int, inventory: int, max_percent: int) -> bool:
    """Whether pruning `pruned` of `inventory` objects is more than `max_percent` percent of them."""
    if pruned <= 0 or inventory <= 0:
        return False
    return pruned * 100 > max_percent * inventory


def unchanged_since_apply(api: API, inventory: list[Entry]) -> bool:
    """Every inventory object still exists with the resourceVersion recorded after the apply.

    One list per kind (one namespace when all its entries share one), so a no-change
    re-sync of 500 objects costs a handful of queries.
    """
    by_kind: dict[tuple[str, str], list[Entry]] = {}
    for entry in inventory:
        if not entry.resource_version:
            return False
        by_kind.setdefault((entry.api_version, entry.kind), []).append(entry)
    for (api_version, kind), entries in by_kind.items():
        try:
            rt = api.resource_for({"apiVersion": api_version, "kind": kind})
        except Exception:  # the kind is gone (its CRD deleted): not unchanged
            return False
        namespaces = {e.namespace for e in entries}
        namespace = next(iter(namespaces)) if rt.namespaced and len(namespaces) == 1 else None
        items, _ = api.list(rt, namespace=namespace)
        versions = {(o["metadata"].get("namespace") or "", o["metadata"]["name"]):
                    o["metadata"].get("resourceVersion") for o in items}
        if any(versions.get((e.namespace, e.name)) != e.resource_version for e in entries):
            return False
    return True


__all__ = ["Entry", "ObjectKey", "PRUNE_FINALIZER", "REVISION_ANNOTATION", "SOURCE_LABEL", "SYNC_ANNOTATION",
           "SYNC_DISABLED", "annotations_of", "group_kind_of", "inventory_of", "key_of_object", "labels_of",
           "owner_of", "prune_candidates", "prune_share_exceeded", "source_label_value", "still_owned",
           "sync_disabled", "unchanged_since_apply"]
