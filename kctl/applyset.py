"""Apply-sets: what `kctl apply --prune` applied before, so that it prunes nothing else.

Called by kctl.cli.apply (and kctl.cli.watch_apply) when `--prune` is given. It follows
kubectl's ApplySet design (KEP-3659) and goes one step further:

- The set has a *parent*: a Secret (or ConfigMap) in the namespace of the apply (`-n`, else
  `default`), labelled `applyset.kubernetes.io/id: applyset-<hash>-v1` and annotated with
  `applyset.kubernetes.io/tooling: kctl/v<version>`, `.../contains-group-kinds` and
  `.../additional-namespaces`, exactly as kubectl writes them.
- Every member carries the label `applyset.kubernetes.io/part-of: <id>` (`label_members`).
- kctl also records each member's apiVersion, kind, namespace, name and uid in the parent
  (data key `kctl-inventory.json`; the Entry of kctl.sync.inventory). A prune candidate must
  be in that record, still carry the part-of label of this set and still have the recorded
  uid (`prune_plan`): an object that this set never applied, or that someone re-created, is
  never pruned, nor is a Namespace that was not a member.

The parent's name is `--applyset=[secrets/|configmaps/]NAME`, or, for the old
`--prune --all` / `--prune -l` forms, derived from the `-f` paths (`default_parent_name`): the
same folder applied again is the same set.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kctl import __version__
from kctl.sync.inventory import Entry, ObjectKey, group_kind_of
from kctl.sync.order import kind_rank

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.machinery.resources import ResourceType

__all__ = ["ADDITIONAL_NAMESPACES_ANNOTATION", "CONTAINS_GROUP_KINDS_ANNOTATION", "ID_LABEL", "INVENTORY_KEY",
           "PART_OF_LABEL", "TOOLING", "TOOLING_ANNOTATION", "ApplySet", "ApplySetError", "ParentRef",
           "default_parent_name", "label_members", "load", "parse_parent", "planned_entries",
           "prune_plan", "record", "remaining_members"]

ID_LABEL = "applyset.kubernetes.io/id"
PART_OF_LABEL = "applyset.kubernetes.io/part-of"
TOOLING_ANNOTATION = "applyset.kubernetes.io/tooling"
CONTAINS_GROUP_KINDS_ANNOTATION = "applyset.kubernetes.io/contains-group-kinds"
ADDITIONAL_NAMESPACES_ANNOTATION = "applyset.kubernetes.io/additional-namespaces"
#: the parent's data key holding kctl's record of the members (JSON list of inventory entries)
INVENTORY_KEY = "kctl-inventory.json"
TOOLING = f"kctl/v{__version__}"

#: `--applyset` kinds a parent may be, as kubectl allows (its custom-resource parents aside)
_PARENT_KINDS = {"secret": "Secret", "secrets": "Secret", "configmap": "ConfigMap", "configmaps": "ConfigMap",
                 "cm": "ConfigMap"}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_DEFAULT_PREFIX = "kctl-apply-"


class ApplySetError(Exception):
    """The apply-set cannot be used as asked (a bad --applyset, a parent of another tool...)."""


@dataclass(frozen=True)
class ParentRef:
    """Which object is an apply-set's parent: kind (Secret or ConfigMap), namespace and name."""

    kind: str
    namespace: str
    name: str

    @property
    def id(self) -> str:
        """KEP-3659's id: `applyset-` + base64url(sha256(name.namespace.kind.group)) + `-v1`."""
        digest = hashlib.sha256(f"{self.name}.{self.namespace}.{self.kind}.".encode()).digest()
        return f"applyset-{base64.urlsafe_b64encode(digest).decode().rstrip('=')}-v1"

    def ref(self) -> str:
        return f"{self.kind.lower()}/{self.name}"


@dataclass
class ApplySet:
    """An apply-set as stored: its parent (None before first use) and the recorded members."""

    parent: ParentRef
    live: dict | None = None
    inventory: list[Entry] = field(default_factory=list)


def parse_parent(value: str, *, namespace: str) -> ParentRef:
    """`NAME`, `secrets/NAME` or `configmaps/NAME` (kubectl's --applyset forms) in `namespace`."""
    kind_part, slash, name = value.rpartition("/")
    if not slash:
        kind = "Secret"
    else:
        kind = _PARENT_KINDS.get(kind_part.lower(), "")
        if not kind:
            raise ApplySetError(f"--applyset={value}: the parent must be a Secret or a ConfigMap "
                                "(NAME, secrets/NAME or configmaps/NAME)")
    if not _NAME.match(name):
        raise ApplySetError(f"--applyset={value}: {name!r} is not a valid object name "
                            "(lowercase letters, digits, '-' and '.')")
    return ParentRef(kind=kind, namespace=namespace, name=name)


def default_parent_name(sources: list[str]) -> str:
    """The parent's name for `--prune` without `--applyset`: from the -f paths (absolute, sorted).

    The same files or folders applied again give the same name; `-` (stdin) has no name.
    """
    if not sources or "-" in sources:
        raise ApplySetError("--prune with -f - (stdin) needs --applyset=NAME: kctl cannot tell which "
                            "earlier apply the objects belong to")
    paths = sorted({s if s.startswith(("http://", "https://")) else os.path.abspath(s) for s in sources})
    digest = hashlib.sha256("\n".join(paths).encode()).hexdigest()[:10]
    base = os.path.basename(paths[0].rstrip("/")) or "root"
    base = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-")[:40].strip("-") or "files"
    return f"{_DEFAULT_PREFIX}{base}-{digest}"


def load(api: API, parent: ParentRef) -> ApplySet:
    """The apply-set of `parent` as stored; raises ApplySetError if that object is not one of kctl's."""
    from kctl.machinery.errors import NotFound

    rt = api.resource(parent.kind.lower())
    try:
        live = api.get(rt, parent.name, namespace=parent.namespace)
    except NotFound:
        return ApplySet(parent=parent)
    meta = live.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    where = f"{parent.ref()} in namespace {parent.namespace}"
    if labels.get(ID_LABEL) != parent.id:
        raise ApplySetError(f"{where} exists and is not the parent of this apply-set (it lacks the label "
                            f"{ID_LABEL}={parent.id}); choose another --applyset name")
    tooling = str(annotations.get(TOOLING_ANNOTATION) or "")
    if tooling and not tooling.startswith("kctl/"):
        raise ApplySetError(f"{where} is managed by {tooling}, not by kctl; kctl will not change its members")
    if meta.get("deletionTimestamp"):
        raise ApplySetError(f"{where} is being deleted")
    return ApplySet(parent=parent, live=live, inventory=_read_inventory(parent, live))


def _read_inventory(parent: ParentRef, live: dict) -> list[Entry]:
    raw = (live.get("data") or {}).get(INVENTORY_KEY)
    if not raw:
        return []
    try:
        text = base64.b64decode(raw).decode() if parent.kind == "Secret" else raw
        items = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        raise ApplySetError(f"{parent.ref()} in namespace {parent.namespace}: data.{INVENTORY_KEY} "
                            "is not kctl's inventory (not JSON)") from None
    if not isinstance(items, list):
        raise ApplySetError(f"{parent.ref()} in namespace {parent.namespace}: data.{INVENTORY_KEY} "
                            "is not a list")
    return [Entry.from_status(i) for i in items if isinstance(i, dict) and i.get("name") and i.get("kind")]


def label_members(objs: list[dict], set_id: str) -> list[dict]:
    """Copies of `objs` labelled `part-of: set_id`; a manifest naming another set is an error."""
    out = []
    for obj in objs:
        meta = dict(obj.get("metadata") or {})
        labels = dict(meta.get("labels") or {})
        given = labels.get(PART_OF_LABEL)
        if given is not None and given != set_id:
            raise ApplySetError(f'{obj.get("kind")} "{meta.get("name")}": metadata.labels.{PART_OF_LABEL} is '
                                f"set by kctl apply --prune ({set_id}); remove it from the manifest")
        labels[PART_OF_LABEL] = set_id
        meta["labels"] = labels
        out.append({**obj, "metadata": meta})
    return out


def planned_entries(api: API, objs: list[dict], namespace: str | None) -> list[Entry]:
    """Inventory entries (no uid yet) for the objects about to be applied; unknown kinds skipped."""
    from kctl.machinery.errors import APIError

    out = []
    for obj in objs:
        meta = obj.get("metadata") or {}
        try:
            rt = api.resource_for(obj)
        except APIError:
            continue
        ns = (meta.get("namespace") or namespace or "default") if rt.namespaced else ""
        out.append(Entry(api_version=str(obj.get("apiVersion") or ""), kind=str(obj.get("kind") or ""),
                         namespace=str(ns), name=str(meta.get("name") or "")))
    return out


def _live_members(api: API, entries: list[Entry], set_id: str) -> dict[ObjectKey, tuple["ResourceType", dict]]:
    """The live objects of `entries` that still carry this set's part-of label, by key.

    One labelled list per kind and namespace (not one read per member), so a set of
    hundreds of objects costs a handful of queries, also over `--server ssh://`.
    """
    from kctl.machinery.errors import APIError
    from kctl.machinery.selectors import parse_label_selector

    selector = parse_label_selector(f"{PART_OF_LABEL}={set_id}")
    groups: dict[tuple[str, str, str], set[str]] = {}
    for entry in entries:
        groups.setdefault((entry.api_version, entry.kind, entry.namespace), set()).add(entry.name)
    found: dict[ObjectKey, tuple[ResourceType, dict]] = {}
    for (api_version, kind, namespace), names in groups.items():
        try:
            rt = api.resource_for({"apiVersion": api_version, "kind": kind})
            items, _ = api.list(rt, namespace=(namespace or "default") if rt.namespaced else None,
                                label_selector=selector)
        except APIError:  # the kind is gone (its CRD deleted)
            continue
        for obj in items:
            meta = obj.get("metadata") or {}
            if meta.get("name") in names:
                found[(rt.group_kind, str(meta.get("namespace") or "") if rt.namespaced else "",
                       str(meta["name"]))] = (rt, obj)
    return found


def _same_object(entry: Entry, live: dict) -> bool:
    """The live object is the one recorded: same uid (entries recorded before their apply have none)."""
    return not entry.uid or (live.get("metadata") or {}).get("uid") == entry.uid


def prune_plan(api: API, applyset: ApplySet, kept: set[ObjectKey], *,
               label_selector: Any = None) -> list[tuple["ResourceType", dict]]:
    """The recorded members that the manifests no longer hold, as (kind, live object), in prune order.

    Each must still exist, carry this set's part-of label, have the recorded uid (when one was
    recorded), match `label_selector` and not be deleting already. The Namespace that holds
    the parent is never pruned (the record would go with it). Workloads come before what
    they use and Namespaces last (the reverse of kctl.sync.order's apply order).
    """
    candidates = [e for e in applyset.inventory
                  if e.key not in kept and e.key != ("Namespace", "", applyset.parent.namespace)]
    live = _live_members(api, candidates, applyset.parent.id)
    plan = []
    for entry in candidates:
        rt, obj = live.get(entry.key, (None, None))
        if obj is None or not _same_object(entry, obj):
            continue
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        if label_selector is not None and not label_selector.matches(meta.get("labels") or {}):
            continue
        plan.append((rt, obj))
    plan.sort(key=lambda pair: -kind_rank(str(pair[1].get("apiVersion") or ""), str(pair[1].get("kind") or "")))
    return plan


def remaining_members(api: API, applyset: ApplySet, applied: list[dict], *,
                      pruned: set[ObjectKey]) -> list[Entry]:
    """The set's members after an apply: the objects just applied, and the recorded ones not
    pruned that still exist, still carry the part-of label and are still the same object."""
    entries = [Entry.of(obj) for obj in applied]
    others = [e for e in applyset.inventory if e.key not in pruned]
    live = _live_members(api, others, applyset.parent.id)
    for entry in others:
        _, obj = live.get(entry.key, (None, None))
        if obj is not None and _same_object(entry, obj):
            entries.append(Entry.of(obj))
    return entries


def record(api: API, applyset: ApplySet, entries: list[Entry]) -> ApplySet:
    """Write the parent with `entries` as its members (created on first use); the stored set.

    The annotations say what kubectl's would: the member kinds and their namespaces other
    than the parent's. A Conflict (another apply of the same set in between) propagates.
    """
    parent = applyset.parent
    unique: dict[ObjectKey, Entry] = {}
    for entry in entries:
        unique.setdefault(entry.key, entry)
    members = sorted(unique.values(), key=lambda e: (group_kind_of(e.api_version, e.kind), e.namespace, e.name))
    kinds = sorted({group_kind_of(e.api_version, e.kind) for e in members})
    namespaces = sorted({e.namespace for e in members if e.namespace and e.namespace != parent.namespace})
    text = json.dumps([e.to_status() for e in members], separators=(",", ":"), sort_keys=True)
    live = applyset.live or {}
    meta = dict(live.get("metadata") or {})
    meta.update(name=parent.name, namespace=parent.namespace)
    meta["labels"] = {**(meta.get("labels") or {}), ID_LABEL: parent.id}
    annotations = {**(meta.get("annotations") or {}), TOOLING_ANNOTATION: TOOLING,
                   CONTAINS_GROUP_KINDS_ANNOTATION: ",".join(kinds)}
    if namespaces:
        annotations[ADDITIONAL_NAMESPACES_ANNOTATION] = ",".join(namespaces)
    else:
        annotations.pop(ADDITIONAL_NAMESPACES_ANNOTATION, None)
    meta["annotations"] = annotations
    data = dict(live.get("data") or {})
    data[INVENTORY_KEY] = base64.b64encode(text.encode()).decode() if parent.kind == "Secret" else text
    obj = {**live, "apiVersion": "v1", "kind": parent.kind, "metadata": meta, "data": data}
    if parent.kind == "Secret":
        obj.setdefault("type", "Opaque")
    stored = api.update(obj) if applyset.live is not None else api.create(obj)
    return ApplySet(parent=parent, live=stored, inventory=members)
