"""Field managers: who owns which fields of an object (metadata.managedFields) and server-side apply.

The HTTPS API (kctl.kubeapi) names the manager of each write with `managing(name)` around the
API call (the `fieldManager` query parameter, else the client's user agent as Kubernetes derives it);
without one, `default_manager()` names it from kctl's own user agent (kctl.apiserver.audit):
`kctl-<command>` for the CLI (`kctl-create`, `kctl-edit`, `kctl-scale`; `kctl apply`, which applies
on the client side as kubectl does, is `kctl-client-side-apply`), `kctl-daemon` for the daemon's
controllers, scheduler and node agents.

The API server (kctl.apiserver.server) calls, inside a write's prepare step, after admission:
- `record(rt, live, new, subresource=...)` on every create and update: the writer's Update entry
  gets the fields it added or changed, every manager loses the fields it removed (and other
  managers the fields this writer changed), as Kubernetes' field manager does. As in Kubernetes,
  an update of an object that has no managedFields (made before kctl tracked them, or cleared with
  `managedFields: [{}]`) is not tracked until its first server-side apply; a client may send
  managedFields of its own in an update (kubectl's migration from client-side apply does).
  Creates are tracked when their manager is explicit (`managing`: every write of the HTTPS API,
  server-side apply); kctl's own creates (CLI over SQLite or SSH, the daemon) start untracked, so
  their bulk writes cost nothing (docs/managed-fields.md); every later write of a tracked object,
  kctl's own included, is recorded.
- `apply(rt, live, config, manager=..., force=...)` for server-side apply: the object to store
  with its managedFields, or ApplyConflict naming each field another manager owns with another
  value (structured-merge-diff's Apply: merge, prune what this manager applied before and nobody
  applies now, conflicts, ownership). The manager `kubectl` also takes over fields kubectl's
  client-side apply set (the last-applied annotation) as kube-apiserver allows it, and keeps that
  annotation up to date.

Entries are Kubernetes' ManagedFieldsEntry: {manager, operation Update|Apply, apiVersion, time,
fieldsType FieldsV1, fieldsV1, subresource}; Apply entries first, then by time; at most 10 Update
entries (the oldest are merged into `ancient-changes`).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from kctl.machinery import managedfields as mf
from kctl.machinery.errors import BadRequest, FieldError

if TYPE_CHECKING:
    from kctl.machinery.resources import ResourceType

_manager: contextvars.ContextVar[str | None] = contextvars.ContextVar("kctl_field_manager", default=None)

#: the manager kubectl's `apply --server-side` uses by default (it may take over client-side apply's fields)
KUBECTL = "kubectl"
BEFORE_FIRST_APPLY = "before-first-apply"
ANCIENT_CHANGES = "ancient-changes"
MAX_UPDATE_MANAGERS = 10
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: fields nobody owns: the server sets them (Kubernetes' StripMeta)
_STRIPPED = frozenset({("f:apiVersion",), ("f:kind",), ("f:metadata",)} | {
    ("f:metadata", "f:" + name) for name in ("name", "namespace", "creationTimestamp", "selfLink", "uid",
                                             "clusterName", "generation", "managedFields", "resourceVersion")})
_AGENT = re.compile(r"^kctl/\S+ \(([^)]*)\)")


@contextlib.contextmanager
def managing(name: str | None) -> Iterator[None]:
    """Writes made inside this block are by field manager `name` (None: the default manager)."""
    token = _manager.set(name)
    try:
        yield
    finally:
        _manager.reset(token)


def current_manager() -> str | None:
    """The field manager of a `managing` block around this call, or None."""
    return _manager.get()


def default_manager(agent: str | None = None) -> str:
    """The manager of a write with no explicit one, from the user agent (kctl's own, or Kubernetes' rule)."""
    if agent is None:
        from kctl.apiserver import audit

        agent = audit.user_agent()
    match = _AGENT.match(agent)
    if match is None:
        return agent.split("/", 1)[0].strip() or "unknown"  # Kubernetes: the user agent up to its first '/'
    words = match.group(1).split("/", 1)[0].split()
    command = words[0] if words else ""
    if command == "apply":
        return "kctl-client-side-apply"
    return f"kctl-{command}" if command and re.fullmatch(r"[A-Za-z0-9._-]+", command) else "kctl"


def manager_of_write() -> str:
    """The manager of the write being made: a `managing` block's, else the default one."""
    return current_manager() or default_manager()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Entry:
    """One manager's fields (a ManagedFieldsEntry, its fieldsV1 decoded)."""

    manager: str
    operation: str  # Update | Apply
    api_version: str
    fields: set = field(default_factory=set)
    time: str | None = None
    subresource: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Who this is, as Kubernetes tells managers apart (an applier's apiVersion does not count)."""
        return (self.manager, self.operation, "" if self.operation == "Apply" else self.api_version,
                self.subresource)

    def described(self) -> str:
        """The manager as a conflict names it: `"kubectl-edit" using apps/v1`, `"x" with subresource "scale"`."""
        text = f'"{self.manager}"'
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def encode(self) -> dict:
        entry = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version}
        if self.time:
            entry["time"] = self.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = mf.to_fields_v1(self.fields)
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


def decode(managed: object) -> list[Entry] | None:
    """The entries of a managedFields value; None when it is absent, empty or not valid."""
    if not isinstance(managed, list) or not managed:
        return None
    entries: list[Entry] = []
    try:
        for raw in managed:
            if not isinstance(raw, dict):
                return None
            if not raw:
                continue  # `[{}]` clears the managed fields, as in Kubernetes
            if raw.get("fieldsType", "FieldsV1") != "FieldsV1" or raw.get("operation") not in ("Update", "Apply"):
                return None
            entries.append(Entry(str(raw.get("manager") or ""), raw["operation"], str(raw.get("apiVersion") or ""),
                                 mf.from_fields_v1(raw.get("fieldsV1") or {}), raw.get("time"),
                                 str(raw.get("subresource") or "")))
    except (ValueError, TypeError):
        return None
    return entries


def encode(entries: list[Entry]) -> list[dict]:
    """managedFields as Kubernetes orders them: Apply before Update, then by time, manager, apiVersion."""
    kept = [e for e in entries if e.fields]
    kept.sort(key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource))
    return [e.encode() for e in kept]


def _scoped(paths: set, rt: "ResourceType", subresource: str | None) -> set:
    """The fields a write may own: no server-set metadata; status only through its subresource."""
    paths = {p for p in paths if p not in _STRIPPED}
    if subresource == "status":
        return {p for p in paths if p[:1] == ("f:status",)}
    if rt.has_status:
        return {p for p in paths if p[:1] != ("f:status",)}
    return paths


def _schema(rt: "ResourceType") -> dict | None:
    from kctl.machinery import schemas

    try:
        return schemas.load(rt)
    except (OSError, ValueError, KeyError):
        return None


def _cap(entries: list[Entry]) -> list[Entry]:
    """At most MAX_UPDATE_MANAGERS Update entries: the oldest merge into `ancient-changes`."""
    updates = [e for e in entries if e.operation == "Update" and e.manager != ANCIENT_CHANGES]
    if len(updates) <= MAX_UPDATE_MANAGERS:
        return entries
    updates.sort(key=lambda e: e.time or "")
    old = updates[:len(updates) - MAX_UPDATE_MANAGERS]
    ancient = next((e for e in entries if e.manager == ANCIENT_CHANGES and e.operation == "Update"), None)
    if ancient is None:
        ancient = Entry(ANCIENT_CHANGES, "Update", old[-1].api_version, set(), old[-1].time)
        entries = [*entries, ancient]
    for e in old:
        ancient.fields |= e.fields
    gone = {id(e) for e in old}
    return [e for e in entries if id(e) not in gone]


def _update(entries: list[Entry], writer: Entry, changed: set, removed: set) -> None:
    """Fields `writer` changed leave every other manager; removed fields leave everyone."""
    for e in entries:
        if e is not writer:
            e.fields -= changed
        e.fields -= removed


def record(rt: "ResourceType", live: dict | None, new: dict, *, subresource: str | None = None,
           manager: str | None = None) -> None:
    """Set new's metadata.managedFields for a create (live None) or an update of live by `manager`.

    The starting entries are those new carries (the live ones the API server copied, or a
    client's own it checked with `decode`); none on an update means the object is not tracked
    (Kubernetes' skip-non-applied). A create is tracked when its manager is explicit (a
    `managing` block: the HTTPS API, server-side apply) or it brings entries; kctl's own creates
    (CLI, daemon) start untracked, as Kubernetes' probabilistic tracking on create allows, which
    keeps their cost (a comparison and larger stored objects) off kctl's bulk writes. Entries the
    write does not touch are kept as they are (not decoded again).
    """
    meta = new.setdefault("metadata", {})
    raw = meta.get("managedFields")
    entries = [e for e in raw if isinstance(e, dict) and e] if isinstance(raw, list) else []
    if not entries and (live is not None or (manager or current_manager()) is None):
        # untracked (or cleared with `managedFields: [{}]`); kctl's own creates start untracked
        meta.pop("managedFields", None)
        return
    schema = _schema(rt)
    before, after = _views(rt, live, new, subresource)
    added, modified, removed = mf.compare(before, after, schema)
    changed = _scoped(added | modified, rt, subresource)
    removed = _scoped(removed, rt, subresource)
    if not changed and not removed:
        return
    name = manager or manager_of_write()
    api_version = str(new.get("apiVersion") or rt.api_version)
    key = (name, "Update", api_version, subresource or "")
    touched = changed | removed
    kept: list[dict] = []
    writer: dict | None = None
    for entry in entries:
        if _key_of(entry) == key:
            writer = entry
        elif _owns_any(entry.get("fieldsV1"), touched):
            fields = _fields_of(entry) - touched
            if fields:
                kept.append({**entry, "fieldsV1": mf.to_fields_v1(fields)})
        else:
            kept.append(entry)
    fields = ((_fields_of(writer) if writer is not None else set()) - removed) | changed
    if fields:
        mine = Entry(name, "Update", api_version, fields, _now() if changed else (writer or {}).get("time"),
                     subresource or "").encode()
        kept.append(mine)
    kept = _sorted(kept)
    if sum(1 for e in kept if e.get("operation") == "Update") > MAX_UPDATE_MANAGERS:
        kept = encode(_cap(decode(kept) or []))
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)


def _views(rt: "ResourceType", live: dict | None, new: dict, subresource: str | None) -> tuple[dict, dict]:
    """The parts of the old and new object a write may own (only status for a status write)."""
    if subresource == "status":
        return ({"status": live["status"]} if live is not None and "status" in live else {},
                {"status": new["status"]} if "status" in new else {})
    if live is None:  # a create: from an empty object, whose metadata and spec exist (as Go's zero values)
        before: dict = {k: {} for k in ("metadata", "spec") if isinstance(new.get(k), dict)}
    else:
        before = live
    if rt.has_status:
        before = {k: v for k, v in before.items() if k != "status"}
        new = {k: v for k, v in new.items() if k != "status"}
    return before, new


def _key_of(entry: dict) -> tuple[str, str, str, str]:
    operation = str(entry.get("operation") or "")
    return (str(entry.get("manager") or ""), operation,
            "" if operation == "Apply" else str(entry.get("apiVersion") or ""), str(entry.get("subresource") or ""))


def _fields_of(entry: dict) -> set:
    try:
        return mf.from_fields_v1(entry.get("fieldsV1") or {})
    except ValueError:
        return set()


def _owns_any(fields_v1: object, paths: set) -> bool:
    """Whether a fieldsV1 trie has any of the paths as a member (without decoding it)."""
    if not isinstance(fields_v1, dict):
        return False
    for path in paths:
        node = fields_v1
        for pe in path:
            node = node.get(pe)
            if not isinstance(node, dict):
                break
        else:
            if not node or "." in node:
                return True
    return False


def _sorted(entries: list[dict]) -> list[dict]:
    return sorted(entries, key=lambda e: (str(e.get("operation") or ""), str(e.get("time") or ""),
                                          str(e.get("manager") or ""), str(e.get("apiVersion") or ""),
                                          str(e.get("subresource") or "")))


def apply(rt: "ResourceType", live: dict | None, config: dict, *, manager: str, force: bool = False) -> dict:
    """Server-side apply of `config` by `manager` over `live` (None: a create): the object to store.

    Raises ApplyConflict (unless `force`) when the result changes fields other managers own.
    The result carries its new managedFields; when nothing but managedFields changes, the
    times stay as they were.
    """
    if not manager:
        raise BadRequest("PATCH requests of type application/apply-patch+yaml require a fieldManager")
    schema = _schema(rt)
    config = _applied_config(rt, config)
    api_version = str(config.get("apiVersion") or rt.api_version)
    entries = decode((live or {}).get("metadata", {}).get("managedFields")) or []
    if live is not None and not entries:  # never tracked: one Update entry owns all that is there
        first = Entry(BEFORE_FIRST_APPLY, "Update", api_version,
                      _scoped(mf.field_set(live, schema), rt, None), _now())
        if first.fields:
            entries = [first]
    mine = next((e for e in entries if e.key == (manager, "Apply", "", "")), None)
    last = set(mine.fields) if mine is not None else set()
    applied = _scoped(mf.field_set(config, schema), rt, None)
    base = live if live is not None else {}
    merged = mf.merge(base, config, schema)
    if last:  # prune: what this manager applied before, applies no more, and no applier claims
        claimed = set(applied)
        for e in entries:
            if e.operation == "Apply" and e is not mine:
                claimed |= e.fields
        gone = (last - claimed) & mf.field_set(merged, schema)
        if gone:
            merged = mf.remove(merged, gone, schema)
    if rt.has_status and live is not None:  # status is the status subresource's
        if "status" in live:
            merged["status"] = live["status"]
        else:
            merged.pop("status", None)
    added, modified, removed = mf.compare(live if live is not None else {}, merged, schema)
    changed = _scoped(added | modified, rt, None)
    removed = _scoped(removed, rt, None)
    others = [e for e in entries if e is not mine]
    conflicts = [(e, sorted(e.fields & changed)) for e in others if e.fields & changed]
    if conflicts and not force:
        allowed = _allowed_by_last_applied(live, schema, rt) if manager == KUBECTL else set()
        left = [(e, [p for p in paths if p not in allowed]) for e, paths in conflicts]
        left = [(e, paths) for e, paths in left if paths]
        if left:
            raise _conflict_error(left)
    if mine is None:
        mine = Entry(manager, "Apply", api_version)
        entries.append(mine)
    _update(entries, mine, changed, removed)
    mine.fields = applied
    mine.api_version = api_version
    unchanged = live is not None and _same_object(live, merged)
    if not unchanged or mine.time is None:
        mine.time = _now()
    if manager == KUBECTL and live is not None and LAST_APPLIED in ((live.get("metadata") or {}).get("annotations")
                                                                    or {}):
        from kctl.machinery.apply import last_applied_annotation

        merged.setdefault("metadata", {}).setdefault("annotations", {})[LAST_APPLIED] = \
            last_applied_annotation(config)
    encoded = encode(_cap(entries))
    meta = merged.setdefault("metadata", {})
    if encoded:
        meta["managedFields"] = encoded
    else:
        meta.pop("managedFields", None)
    return merged


def _applied_config(rt: "ResourceType", config: dict) -> dict:
    """The configuration as applied: server-set metadata dropped, status too where it is a subresource."""
    if not isinstance(config, dict):
        raise BadRequest("an apply configuration must be an object")
    config = {k: v for k, v in config.items() if not (k == "status" and rt.has_status)}
    meta = config.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise BadRequest("metadata must be an object")
    if isinstance(meta, dict):
        if meta.get("managedFields") is not None:
            raise BadRequest("metadata.managedFields must be nil")
        config["metadata"] = {k: v for k, v in meta.items()
                              if ("f:metadata", "f:" + k) not in _STRIPPED or k in ("name", "namespace")}
    return config


def _same_object(live: dict, merged: dict) -> bool:
    strip = lambda obj: {**obj, "metadata": {k: v for k, v in (obj.get("metadata") or {}).items()  # noqa: E731
                                             if k != "managedFields"}}
    return strip(live) == strip(merged)


def _allowed_by_last_applied(live: dict | None, schema: dict | None, rt: "ResourceType") -> set:
    """Fields kubectl's client-side apply set (the last-applied annotation) that still hold that value."""
    from kctl.machinery.apply import last_applied_of

    last = last_applied_of(live)
    if last is None or live is None:
        return set()
    fields = mf.field_set(last, schema)
    _, modified, removed = mf.compare(last, live, schema)
    return _scoped(fields - modified - removed, rt, None)


def _conflict_error(conflicts: list[tuple[Entry, list]]) -> mf.ApplyConflict:
    """Kubernetes' text: `Apply failed with 1 conflict: conflict with "m" using apps/v1: .spec.replicas`."""
    causes = [FieldError(mf.path_string(p), f"conflict with {e.described()}") for e, paths in conflicts for p in paths]
    if len(causes) == 1:
        return mf.ApplyConflict(f"Apply failed with 1 conflict: {causes[0].message}: {causes[0].path}", causes)
    lines = []
    for e, paths in sorted(conflicts, key=lambda c: c[0].manager):
        lines.append(f"conflicts with {e.described()}:")
        lines.extend(f"- {mf.path_string(p)}" for p in paths)
    return mf.ApplyConflict(f"Apply failed with {len(causes)} conflicts: " + "\n".join(lines), causes)


def strip_managed_fields(obj: dict) -> dict:
    """A shallow copy of obj without metadata.managedFields (what kubectl prints by default)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


__all__ = ["Entry", "apply", "current_manager", "decode", "default_manager", "encode", "managing",
           "manager_of_write", "record", "strip_managed_fields"]
