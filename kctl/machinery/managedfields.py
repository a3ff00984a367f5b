"""Field sets as Kubernetes' structured-merge-diff computes them, for metadata.managedFields and server-side apply.

A field set is a Python set of paths; a path is a tuple of path elements written as in the
`fieldsV1` format: `f:NAME` (a field of a struct or a key of a map), `k:{"name":"web"}` (an
item of an associative list, by its list-map keys), `v:"value"` (an item of a set list) and
`i:N` (an item by index, only where an item has no key). A path is in the set when the
fields it names is owned (`.` in fieldsV1 marks a node that is itself a member and also has
members below it).

What is a leaf, an associative list and so on comes from the kind's JSON Schema
(kctl.machinery.schemas): `x-kubernetes-list-type` (map, set, atomic) and
`x-kubernetes-list-map-keys`, else the strategic-merge markers (`x-kubernetes-patch-strategy:
merge` with a merge key is a map list, without one a set), `x-kubernetes-map-type: atomic`;
lists with no marker are atomic, and values with no schema are "deduced" (maps granular,
lists atomic), as structured-merge-diff does.

The operations (all pure, arguments never mutated):
- `field_set(obj, schema)`: the fields an object (an applied configuration) sets (SMD ToFieldSet);
- `compare(old, new, schema)`: the fields added, modified and removed (SMD Compare);
- `merge(live, config, schema)`: the applied configuration merged over the live object (SMD Merge);
- `remove(obj, paths, schema)`: the object without the given fields (SMD RemoveItems);
- `to_fields_v1` / `from_fields_v1`: the JSON trie of managedFields' `fieldsV1`;
- `path_string`: a path as Kubernetes prints it in a conflict (`.spec.containers[name="web"].image`).

Called by kctl.apiserver.fieldmanager (every write's managedFields, and server-side apply).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Iterable

from kctl.machinery.errors import Conflict, FieldError

__all__ = ["Path", "ApplyConflict", "field_set", "compare", "merge", "remove", "to_fields_v1", "from_fields_v1",
           "path_string", "schema_root"]

Path = tuple[str, ...]
_MISSING: Any = object()
#: list-map key fields whose value Kubernetes defaults when an item omits it (its OpenAPI `default`)
_KEY_DEFAULTS = {"protocol": "TCP"}


class ApplyConflict(Conflict):
    """A server-side apply that would change fields other managers own (409, reason Conflict).

    `causes` names each conflicting field (`FieldError(path, "conflict with \"MANAGER\"...")`);
    the HTTPS API reports them as Kubernetes' FieldManagerConflict causes. Never retried.
    """

    def __init__(self, message: str, causes: list[FieldError]) -> None:
        super().__init__(message)
        self.causes = list(causes)

    def status(self) -> dict:
        """A Kubernetes Status with details.causes of type FieldManagerConflict."""
        status = super().status()
        status["details"] = {"causes": [{"reason": "FieldManagerConflict", "message": c.message, "field": c.path}
                                        for c in self.causes]}
        return status


# --------------------------------------------------------------------------- schema types

class _Type:
    """What structured-merge-diff needs to know about one schema node."""

    __slots__ = ("kind", "fields", "elem", "keys", "key_defaults", "root")

    def __init__(self, kind: str, root: dict | None, *, fields: dict | None = None, elem: Any = None,
                 keys: tuple[str, ...] = (), key_defaults: dict | None = None) -> None:
        self.kind = kind  # scalar | atomic | struct | map | deduced | list_map | list_set
        self.root = root
        self.fields = fields or {}
        self.elem = elem
        self.keys = keys
        self.key_defaults = key_defaults or {}

    def child(self, key: str) -> "_Type":
        """The type of field `key` of a struct or map."""
        if self.kind == "deduced":
            return _DEDUCED
        node = self.fields.get(key)
        if node is None:
            node = self.elem
        return _type_of(self.root, node)

    def declared(self, key: str) -> bool:
        return key in self.fields

    def item(self) -> "_Type":
        return _type_of(self.root, self.elem)


_DEDUCED = _Type("deduced", None)
_SCALAR = _Type("scalar", None)
_CACHE: dict[int, tuple[dict, _Type]] = {}


def schema_root(schema: dict | None) -> _Type:
    """The type of an object's root from its kind's schema (None: deduced from the values)."""
    return _type_of(schema, schema) if schema is not None else _DEDUCED


def _resolve(root: dict | None, node: dict) -> dict:
    """Follow `$ref`s and a lone allOf/oneOf/anyOf wrapper to the node they name."""
    for _ in range(64):
        if "$ref" in node and root is not None:
            target = (root.get("$defs") or {}).get(str(node["$ref"]).rsplit("/", 1)[-1])
            if not isinstance(target, dict):
                return {}
            node = target
            continue
        wrapped = node.get("allOf") or node.get("oneOf") or node.get("anyOf")
        if isinstance(wrapped, list) and len(wrapped) == 1 and isinstance(wrapped[0], dict) \
                and "properties" not in node:
            node = wrapped[0]
            continue
        return node
    return node


def _type_of(root: dict | None, node: Any) -> _Type:
    """The _Type of a schema node (cached: schemas are loaded once and shared)."""
    if not isinstance(node, dict):
        return _DEDUCED
    hit = _CACHE.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    t = _build(root, node)
    _CACHE[id(node)] = (node, t)  # the node is kept alive with its entry, so its id is never reused
    return t


def _marker(node: dict, resolved: dict, name: str) -> Any:
    value = node.get(name)
    return value if value is not None else resolved.get(name)


def _build(root: dict | None, node: dict) -> _Type:
    resolved = _resolve(root, node)
    if _marker(node, resolved, "x-kubernetes-int-or-string"):
        return _SCALAR
    kind = resolved.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    kinds.discard("null")
    if "array" in kinds or "items" in resolved:
        items = resolved.get("items") if isinstance(resolved.get("items"), dict) else None
        list_type = _marker(node, resolved, "x-kubernetes-list-type")
        keys = _marker(node, resolved, "x-kubernetes-list-map-keys")
        if list_type is None:
            strategy = str(_marker(node, resolved, "x-kubernetes-patch-strategy") or "")
            merge_key = _marker(node, resolved, "x-kubernetes-patch-merge-key")
            if "merge" in strategy.split(","):
                list_type, keys = ("map", [merge_key]) if merge_key else ("set", None)
        if list_type == "map" and isinstance(keys, list) and keys:
            item = _resolve(root, items) if items else {}
            props = item.get("properties") or {}
            defaults = {}
            for key in keys:
                prop = props.get(key)
                default = _resolve(root, prop).get("default") if isinstance(prop, dict) else None
                if isinstance(prop, dict) and prop.get("default") is not None:
                    default = prop["default"]
                if default is None:
                    default = _KEY_DEFAULTS.get(key)
                if default is not None:
                    defaults[key] = default
            return _Type("list_map", root, elem=items, keys=tuple(str(k) for k in keys), key_defaults=defaults)
        if list_type == "set":
            return _Type("list_set", root, elem=items)
        return _Type("atomic", root)
    props = resolved.get("properties")
    extra = resolved.get("additionalProperties")
    if "object" in kinds or isinstance(props, dict) or isinstance(extra, dict):
        if _marker(node, resolved, "x-kubernetes-map-type") == "atomic":
            return _Type("atomic", root)
        if isinstance(props, dict) and props:
            return _Type("struct", root, fields=props, elem=extra if isinstance(extra, dict) else None)
        if isinstance(extra, dict):
            return _Type("map", root, elem=extra)
        return _DEDUCED
    return _SCALAR


def _item_pe(t: _Type, index: int, item: Any) -> str:
    """The path element of one list item: its keys, its value, or (no key possible) its index."""
    if t.kind == "list_map" and isinstance(item, dict):
        key = {}
        for name in t.keys:
            value = item.get(name, t.key_defaults.get(name))
            if value is not None:
                key[name] = value
        if key:
            return "k:" + json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if t.kind == "list_set" and not isinstance(item, (dict, list)):
        return "v:" + json.dumps(item, separators=(",", ":"), ensure_ascii=False)
    return f"i:{index}"


def _items(t: _Type, values: list) -> list[tuple[str, Any]]:
    """(path element, item) of a list, the first of each repeated element kept."""
    seen: set[str] = set()
    out = []
    for i, item in enumerate(values):
        pe = _item_pe(t, i, item)
        if pe not in seen:
            seen.add(pe)
            out.append((pe, item))
    return out


def _is_map(t: _Type) -> bool:
    return t.kind in ("struct", "map", "deduced")


def _is_list(t: _Type) -> bool:
    return t.kind in ("list_map", "list_set")


# --------------------------------------------------------------------------- ToFieldSet

def field_set(obj: Any, schema: dict | None) -> set[Path]:
    """The fields `obj` sets: its leaves, the items of its associative lists, the keys of its maps."""
    out: set[Path] = set()
    _to_set(obj, schema_root(schema), (), out)
    return out


def _to_set(value: Any, t: _Type, path: Path, out: set[Path]) -> None:
    if _is_list(t) and isinstance(value, list):
        for pe, item in _items(t, value):
            child = path + (pe,)
            _to_set(item, t.item(), child, out)
            out.add(child)
    elif _is_map(t) and isinstance(value, dict):
        for key, sub in value.items():
            child = path + ("f:" + key,)
            _to_set(sub, t.child(key), child, out)
            if not t.declared(key):  # a map's key is a member; a struct's field only through its leaves
                out.add(child)
    elif value is None and (_is_list(t) or _is_map(t)):
        return
    elif path:
        out.add(path)


# --------------------------------------------------------------------------- Compare

def compare(old: Any, new: Any, schema: dict | None) -> tuple[set[Path], set[Path], set[Path]]:
    """(added, modified, removed): the fields `new` adds to `old`, changes, and drops.

    A map or list item that appears (or disappears) is itself added (removed), besides its
    fields; `old` _MISSING-like None means nothing was there (a create).
    """
    added: set[Path] = set()
    modified: set[Path] = set()
    removed: set[Path] = set()
    lhs = old if isinstance(old, dict) else _MISSING
    _compare(lhs, new if isinstance(new, dict) else _MISSING, schema_root(schema), (), added, modified, removed)
    added.discard(())
    removed.discard(())
    return added, modified, removed


def _empty(value: Any) -> bool:
    return value is _MISSING or value is None or (isinstance(value, (dict, list)) and not value)


def _compare(lhs: Any, rhs: Any, t: _Type, path: Path, added: set, modified: set, removed: set) -> None:
    if lhs is _MISSING:
        if rhs is not _MISSING:
            _all(rhs, t, path, added)
        return
    if rhs is _MISSING:
        _all(lhs, t, path, removed)
        return
    if type(lhs) is type(rhs) and lhs == rhs:  # (C speed) an unchanged subtree: nothing below it changed
        return
    descend = False
    if _is_map(t) and (isinstance(lhs, dict) or isinstance(rhs, dict)) and not (_empty(lhs) and _empty(rhs)):
        descend = all(v is _MISSING or v is None or isinstance(v, dict) for v in (lhs, rhs))
    elif _is_list(t) and (isinstance(lhs, list) or isinstance(rhs, list)) and not (_empty(lhs) and _empty(rhs)):
        descend = all(v is _MISSING or v is None or isinstance(v, list) for v in (lhs, rhs))
    if not descend:
        if lhs is _MISSING:
            if rhs is not _MISSING:
                added.add(path)
        elif rhs is _MISSING:
            removed.add(path)
        elif not _same(lhs, rhs):
            modified.add(path)
        return
    if _is_map(t):
        left = lhs if isinstance(lhs, dict) else {}
        right = rhs if isinstance(rhs, dict) else {}
        for key in {**left, **right}:
            _compare(left.get(key, _MISSING), right.get(key, _MISSING), t.child(key), path + ("f:" + key,),
                     added, modified, removed)
    else:
        left_items = dict(_items(t, lhs if isinstance(lhs, list) else []))
        right_items = dict(_items(t, rhs if isinstance(rhs, list) else []))
        item_type = t.item()
        for pe in {**left_items, **right_items}:
            _compare(left_items.get(pe, _MISSING), right_items.get(pe, _MISSING), item_type, path + (pe,),
                     added, modified, removed)
    if lhs is _MISSING:
        added.add(path)
    elif rhs is _MISSING:
        removed.add(path)


def _all(value: Any, t: _Type, path: Path, out: set[Path]) -> None:
    """Every node of a value that appears (or goes) whole: its leaves, and its maps and items themselves."""
    if _is_map(t) and isinstance(value, dict) and value:
        for key, sub in value.items():
            _all(sub, t.child(key), path + ("f:" + key,), out)
    elif _is_list(t) and isinstance(value, list) and value:
        item_type = t.item()
        for pe, item in _items(t, value):
            _all(item, item_type, path + (pe,), out)
    out.add(path)


def _same(a: Any, b: Any) -> bool:
    """JSON equality where true is not 1 (Python's 1 == True)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b and (a is None) == (b is None)


# --------------------------------------------------------------------------- Merge

def merge(live: Any, config: Any, schema: dict | None) -> dict:
    """The applied configuration merged over the live object (a new object).

    Fields of `config` replace live ones; maps and structs merge key by key; associative
    lists merge item by item (config's order, live-only items kept where they were); atomic
    lists and maps are replaced whole. A null in `config` removes the field.
    """
    out = _merge(live if isinstance(live, dict) else _MISSING, config, schema_root(schema))
    return out if isinstance(out, dict) else {}


def _merge(lhs: Any, rhs: Any, t: _Type) -> Any:
    if rhs is _MISSING:
        return copy.deepcopy(lhs)
    if _is_map(t) and isinstance(rhs, dict) and isinstance(lhs, dict):
        out = copy.deepcopy(lhs)
        for key, value in rhs.items():
            if value is None:
                out.pop(key, None)
                continue
            merged = _merge(lhs.get(key, _MISSING), value, t.child(key))
            out[key] = merged
        return out
    if _is_list(t) and isinstance(rhs, list) and isinstance(lhs, list):
        return _merge_list(lhs, rhs, t)
    return _without_nulls(rhs)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _merge_list(lhs: list, rhs: list, t: _Type) -> list:
    """Associative merge in structured-merge-diff's order: rhs's order for its items, the
    live-only items kept in their place relative to the shared ones."""
    left = _items(t, lhs)
    right = _items(t, rhs)
    left_map = dict(left)
    right_map = dict(right)
    item_type = t.item()
    shared = [pe for pe, _ in right if pe in left_map]
    out: list = []
    li = ri = si = 0
    while li < len(left) or ri < len(right):
        if li < len(left) and ri < len(right):
            pe = left[li][0]
            if pe == right[ri][0]:
                out.append(_merge(left_map[pe], right_map[pe], item_type))
                li += 1
                ri += 1
                si += 1
                continue
            if pe in right_map and si < len(shared) and shared[si] != pe:
                li += 1  # shared, but not the one due now: it is merged when rhs reaches it
                continue
        if li < len(left):
            pe = left[li][0]
            if pe not in right_map:
                out.append(copy.deepcopy(left_map[pe]))
                li += 1
                continue
        if ri < len(right):
            pe = right[ri][0]
            out.append(_merge(left_map.get(pe, _MISSING), right_map[pe], item_type))
            ri += 1
            if si < len(shared) and shared[si] == pe:
                si += 1
        else:
            li += 1  # a live item already merged out of turn
    return out


# --------------------------------------------------------------------------- RemoveItems

def remove(obj: dict, paths: Iterable[Path], schema: dict | None) -> dict:
    """`obj` without the fields at `paths` (a new object); maps and lists left empty by it go too."""
    trie = _trie(paths)
    if not trie:
        return copy.deepcopy(obj)
    out = _remove(obj, schema_root(schema), trie)
    return out if isinstance(out, dict) else {}


def _remove(value: Any, t: _Type, trie: dict) -> Any:
    if _is_map(t) and isinstance(value, dict):
        out = {}
        for key, sub in value.items():
            node = trie.get("f:" + key)
            if node is None:
                out[key] = copy.deepcopy(sub)
                continue
            if "." in node:
                continue
            kept = _remove(sub, t.child(key), node)
            if kept is not _MISSING:
                out[key] = kept
        return out if out or not value else _MISSING
    if _is_list(t) and isinstance(value, list):
        kept_items = []
        item_type = t.item()
        for i, item in enumerate(value):
            node = trie.get(_item_pe(t, i, item))
            if node is None:
                kept_items.append(copy.deepcopy(item))
                continue
            if "." in node:
                continue
            kept = _remove(item, item_type, node)
            if kept is not _MISSING:
                kept_items.append(kept)
        return kept_items if kept_items or not value else _MISSING
    return copy.deepcopy(value)


# --------------------------------------------------------------------------- fieldsV1

def _trie(paths: Iterable[Path]) -> dict:
    """Paths as a trie: element -> subtrie, "." in a node when its path is itself a member."""
    root: dict = {}
    for path in paths:
        node = root
        for pe in path:
            node = node.setdefault(pe, {})
        node["."] = {}
    return root


def to_fields_v1(paths: Iterable[Path]) -> dict:
    """The `fieldsV1` JSON of a field set: `{}` for a member leaf, `.` for a member with members below."""
    return _encode(_trie(paths))


def _encode(node: dict) -> dict:
    children = {pe: sub for pe, sub in node.items() if pe != "."}
    out: dict = {}
    if "." in node and children:
        out["."] = {}
    for pe in sorted(children):
        out[pe] = _encode(children[pe])
    return out


def from_fields_v1(fields: Any) -> set[Path]:
    """The field set of a `fieldsV1` JSON trie; ValueError when it is not one."""
    out: set[Path] = set()
    if not isinstance(fields, dict):
        raise ValueError("fieldsV1 must be an object")
    _decode(fields, (), out)
    return out


def _decode(node: dict, path: Path, out: set[Path]) -> None:
    if not node:
        if path:
            out.add(path)
        return
    for pe, sub in node.items():
        if pe == ".":
            if path:
                out.add(path)
            continue
        if not isinstance(sub, dict) or not isinstance(pe, str) or pe[:2] not in ("f:", "k:", "v:", "i:"):
            raise ValueError(f"invalid fieldsV1 element {pe!r}")
        _decode(sub, path + (pe,), out)


def path_string(path: Path) -> str:
    """A path as structured-merge-diff prints it: `.spec.containers[name="web"].ports[containerPort=80,...]`."""
    parts = []
    for pe in path:
        kind, text = pe[:2], pe[2:]
        if kind == "f:":
            parts.append("." + text)
        elif kind == "k:":
            try:
                key = json.loads(text)
                parts.append("[" + ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}"
                                            for k, v in sorted(key.items())) + "]")
            except (ValueError, AttributeError):
                parts.append("[" + text + "]")
        elif kind == "v:":
            parts.append("[=" + text + "]")
        else:
            parts.append("[" + text + "]")
    return "".join(parts)
