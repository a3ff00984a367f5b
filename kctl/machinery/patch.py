"""The three patch types of the Kubernetes API, and the diffs that produce them.

`merge_patch` (RFC 7386), `json_patch` (RFC 6902) and `strategic_merge_patch` apply a
patch to an object; `create_merge_patch` and `create_strategic_patch` compute the patch
that turns one object into another. The API layer calls the appliers for `kctl patch`
and admission hooks' JSONPatch; kctl.machinery.apply builds kubectl's three-way apply on the
same strategic-merge machinery (`diff_strategic`).

Strategic merge reads the kind's JSON Schema (kctl.machinery.schemas.load): a list whose
schema carries `x-kubernetes-patch-strategy: merge` and `x-kubernetes-patch-merge-key`
is merged element by element on that key, a `retainKeys` field drops the keys its patch
does not list, and the patch may carry Kubernetes' directives (`$patch`, `$retainKeys`,
`$setElementOrder/<field>`, `$deleteFromPrimitiveList/<field>`). Directives never reach
the result.

Every function here is pure: it never mutates its arguments and returns new objects.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from kctl.machinery.errors import BadRequest, FieldError, Invalid

__all__ = [
    "PATCH_DIRECTIVE", "RETAIN_KEYS_DIRECTIVE", "SET_ELEMENT_ORDER_PREFIX",
    "DELETE_FROM_PRIMITIVE_LIST_PREFIX",
    "merge_patch", "create_merge_patch", "json_patch",
    "strategic_merge_patch", "create_strategic_patch", "diff_strategic",
]

PATCH_DIRECTIVE = "$patch"
RETAIN_KEYS_DIRECTIVE = "$retainKeys"
SET_ELEMENT_ORDER_PREFIX = "$setElementOrder/"
DELETE_FROM_PRIMITIVE_LIST_PREFIX = "$deleteFromPrimitiveList/"

_MISSING: Any = object()


# --------------------------------------------------------------------------- helpers

def _kind(value: Any) -> str:
    """JSON type of a value; bool is not int and int is not float (1 == True in Python)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, dict):
        return "dict"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def _same(a: Any, b: Any) -> bool:
    """Deep JSON equality that also compares types (so 1, 1.0 and true differ)."""
    kind = _kind(a)
    if kind != _kind(b):
        return False
    if kind == "dict":
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if kind == "list":
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _hkey(value: Any) -> str:
    """A hashable identity for a merge-key value or a primitive list element."""
    return _kind(value) + ":" + json.dumps(value, sort_keys=True, default=str)


def _dedupe(values: list) -> list:
    seen: set[str] = set()
    out = []
    for v in values:
        h = _hkey(v)
        if h not in seen:
            seen.add(h)
            out.append(v)
    return out


# --------------------------------------------------------------------------- RFC 7386

def _merge_value(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_value(result.get(key), value)
    return result


def merge_patch(target: dict, patch: dict) -> dict:
    """RFC 7386 JSON merge patch: null deletes a key, objects merge, anything else replaces.

    A patch that is not an object replaces the whole target (as the RFC says).
    """
    return _merge_value(target, patch)


def create_merge_patch(original: dict, modified: dict) -> dict:
    """The RFC 7386 merge patch that turns `original` into `modified`.

    Keys whose value in `modified` is null cannot be expressed (null means delete).
    """
    patch: dict = {}
    for key in original:
        if key not in modified:
            patch[key] = None
    for key, value in modified.items():
        old = original.get(key, _MISSING)
        if isinstance(old, dict) and isinstance(value, dict):
            sub = create_merge_patch(old, value)
            if sub:
                patch[key] = sub
        elif old is _MISSING or not _same(old, value):
            patch[key] = copy.deepcopy(value)
    return patch


# --------------------------------------------------------------------------- RFC 6902

def json_patch(target: dict, ops: list) -> dict:
    """RFC 6902 JSON patch, applied with the `jsonpatch` library.

    Raises BadRequest when `ops` is not a list, and Invalid naming the failing op's
    index, operation and path (`patch is invalid: [2]: test /data/pw: testing value
    /data/pw failed: test failed`, `[0]: add /a/b: doc is missing path: "/a/b"`). The
    message never quotes a value of the object (nor of the patch): it may be a Secret's.
    """
    import jsonpatch

    if not isinstance(ops, list):
        raise BadRequest(f"json patch must be a list of operations, not {_kind(ops)}")
    doc = copy.deepcopy(target)
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise Invalid("patch", FieldError(f"[{i}]", f"operation must be an object, not {_kind(op)}"))
        where = " ".join(_short(op[k]) for k in ("op", "path") if isinstance(op.get(k), str))
        try:
            doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
        except Exception as exc:  # noqa: BLE001 - any failure of one op is reported the same way
            message = _json_patch_error(exc, op, doc)
            raise Invalid("patch", FieldError(f"[{i}]", f"{where}: {message}" if where else message)) from None
    if not isinstance(doc, dict):
        raise Invalid("patch", FieldError("", f"the patched object must be an object, not {_kind(doc)}"))
    return doc


#: messages of the jsonpatch library that hold no value of the document (kept as they are)
_SAFE_PATCH_MESSAGES = (
    "Cannot move values into their own children", "can't insert outside of list", "can't replace outside of list",
    "can't remove the whole document", "Location must start with /", "Operation must have a 'path' member",
    "Invalid 'path'", "The operation does not contain a 'value' member",
    "The operation does not contain a 'from' member",
)


def _short(text: object, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _json_patch_error(exc: Exception, op: dict, doc: object) -> str:
    """Why op failed, in Kubernetes' words, naming its operation and paths only."""
    import jsonpatch
    import jsonpointer

    name = _short(op.get("op")) if isinstance(op.get("op"), str) else "patch"
    path = _short(op.get("path")) if isinstance(op.get("path"), str) else ""
    source = _short(op.get("from")) if isinstance(op.get("from"), str) else ""
    text = str(exc).splitlines()[0] if str(exc) else ""
    if isinstance(exc, jsonpatch.JsonPatchTestFailed):
        return f"testing value {path} failed: test failed"
    if isinstance(exc, jsonpatch.InvalidJsonPatch):
        if text.startswith("Unknown operation"):
            return f'unknown operation "{name}"'
        return text if text in _SAFE_PATCH_MESSAGES else "not a valid operation"
    if name in ("move", "copy") and source and not _resolves(doc, source):
        return f'doc is missing from path: "{source}"'
    if isinstance(exc, jsonpatch.JsonPatchPathNotFound) or " not found in " in text:
        return f'doc is missing path: "{path}"'
    if isinstance(exc, jsonpointer.JsonPointerException):
        if text.startswith("Cannot apply token"):
            return f'"{path}" goes through a value that is not an object or a list'
        if "sequence index" in text or "array index" in text:
            return f'"{path}" is not a valid list index'
        return text if text in _SAFE_PATCH_MESSAGES else f'"{path}" is not a valid path'
    if isinstance(exc, jsonpatch.JsonPatchConflict) and text in _SAFE_PATCH_MESSAGES:
        return text
    return f"{name} operation does not apply"


def _resolves(doc: object, pointer: str) -> bool:
    import jsonpointer

    try:
        jsonpointer.resolve_pointer(doc, pointer)
    except (jsonpointer.JsonPointerException, KeyError, IndexError, TypeError):
        return False
    return True


# --------------------------------------------------------------------------- schema walk

@dataclass(frozen=True)
class _Node:
    """A place in the kind's schema: `node` (may hold a $ref) inside `root` (holds $defs)."""

    root: dict | None
    node: dict | None

    def _resolved(self) -> dict:
        node, seen = self.node, 0
        while isinstance(node, dict) and seen < 64:
            if "$ref" in node and self.root is not None:
                name = node["$ref"].rsplit("/", 1)[-1]
                target = (self.root.get("$defs") or {}).get(name)
                if not isinstance(target, dict):
                    return {}
                node = target
            else:
                wrapped = node.get("allOf") or node.get("oneOf") or node.get("anyOf")
                if isinstance(wrapped, list) and len(wrapped) == 1 and isinstance(wrapped[0], dict) \
                        and "properties" not in node:
                    node = wrapped[0]
                else:
                    return node
            seen += 1
        return node if isinstance(node, dict) else {}

    def child(self, key: str) -> _Node:
        """Schema of field `key` (a declared property, else the map's value schema)."""
        if self.node is None:
            return _NOWHERE
        node = self._resolved()
        props = node.get("properties")
        if isinstance(props, dict) and isinstance(props.get(key), dict):
            return _Node(self.root, props[key])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return _Node(self.root, extra)
        return _NOWHERE

    def items(self) -> _Node:
        if self.node is None:
            return _NOWHERE
        items = self._resolved().get("items")
        return _Node(self.root, items) if isinstance(items, dict) else _NOWHERE

    def _meta(self, name: str) -> Any:
        if self.node is None:
            return None
        value = self.node.get(name)
        return value if value is not None else self._resolved().get(name)

    @property
    def strategies(self) -> frozenset[str]:
        raw = self._meta("x-kubernetes-patch-strategy")
        return frozenset(s.strip() for s in raw.split(",")) if isinstance(raw, str) else frozenset()

    @property
    def merge_key(self) -> str | None:
        key = self._meta("x-kubernetes-patch-merge-key")
        return key if isinstance(key, str) and key else None

    @property
    def merges_list(self) -> bool:
        return "merge" in self.strategies

    @property
    def replaces(self) -> bool:
        return "replace" in self.strategies

    @property
    def retains_keys(self) -> bool:
        return "retainKeys" in self.strategies


_NOWHERE = _Node(None, None)


# --------------------------------------------------------------------------- apply SMP

def strategic_merge_patch(target: dict, patch: dict, schema: dict | None) -> dict:
    """Kubernetes strategic merge patch of `target`, guided by the kind's root `schema`.

    With `schema` None this is exactly `merge_patch`. A malformed patch (bad directive,
    `$retainKeys` that misses a patched key, a non-list order) raises BadRequest.
    """
    if not isinstance(patch, dict):
        raise BadRequest(f"strategic merge patch must be an object, not {_kind(patch)}")
    if schema is None:
        return merge_patch(target, patch)
    base = copy.deepcopy(target) if isinstance(target, dict) else {}
    merged = _merge_map(base, patch, _Node(schema, schema))
    return {} if merged is None else merged


def _field_names(patch: dict) -> list[str]:
    """Fields a map patch touches, directives folded onto the field they name."""
    names: dict[str, None] = {}
    for key in patch:
        if key in (PATCH_DIRECTIVE, RETAIN_KEYS_DIRECTIVE):
            continue
        for prefix in (SET_ELEMENT_ORDER_PREFIX, DELETE_FROM_PRIMITIVE_LIST_PREFIX):
            if key.startswith(prefix):
                names.setdefault(key[len(prefix):])
                break
        else:
            names.setdefault(key)
    return list(names)


def _retain_keys(base: dict, patch: dict) -> None:
    keys = patch[RETAIN_KEYS_DIRECTIVE]
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise BadRequest(f"{RETAIN_KEYS_DIRECTIVE} must be a list of field names")
    allowed = set(keys)
    for key, value in patch.items():
        if value is None or key.startswith("$"):
            continue
        if key not in allowed:
            raise BadRequest(f'{RETAIN_KEYS_DIRECTIVE} does not list the patched field "{key}"')
    for key in list(base):
        if key not in allowed:
            del base[key]


def _merge_map(base: dict, patch: dict, schema: _Node) -> dict | None:
    """Merge `patch` into `base` (owned: mutated and returned); None for `$patch: delete`."""
    directive = patch.get(PATCH_DIRECTIVE)
    if directive == "delete":
        return None
    if directive == "replace":
        base = {}
    elif directive not in (None, "merge"):
        raise BadRequest(f'unknown {PATCH_DIRECTIVE} directive "{directive}" (want replace or delete)')
    if RETAIN_KEYS_DIRECTIVE in patch:
        _retain_keys(base, patch)

    for name in _field_names(patch):
        value = patch.get(name, _MISSING)
        if value is None:
            base.pop(name, None)
            continue
        field = schema.child(name)
        current = base.get(name, _MISSING)
        if field.merges_list and (value is _MISSING or isinstance(value, list)):
            if value is _MISSING and not isinstance(current, list):
                continue
            base[name] = _merge_list(
                current if isinstance(current, list) else [],
                value if isinstance(value, list) else [],
                field,
                order=patch.get(SET_ELEMENT_ORDER_PREFIX + name),
                deletions=patch.get(DELETE_FROM_PRIMITIVE_LIST_PREFIX + name),
            )
        elif value is _MISSING:
            continue  # an order/deletion directive for a field that is not a merge list
        elif isinstance(value, dict):
            start = current if isinstance(current, dict) and not field.replaces else {}
            merged = _merge_map(start, value, field)
            if merged is None:
                base.pop(name, None)
            else:
                base[name] = merged
        else:
            base[name] = copy.deepcopy(value)
    return base


def _fresh(value: Any, schema: _Node) -> Any:
    """A patch value that lands where nothing was: its directives and nulls processed."""
    if isinstance(value, dict):
        return _merge_map({}, value, schema)
    return copy.deepcopy(value)


def _is_directive(element: Any) -> bool:
    return isinstance(element, dict) and PATCH_DIRECTIVE in element


def _merge_list(base: list, patch: list, field: _Node, *, order: Any, deletions: Any) -> list:
    """Merge a patch list into a merge-strategy list `base` (owned)."""
    before = base
    key = field.merge_key
    items = field.items()

    if any(_is_directive(e) and e[PATCH_DIRECTIVE] == "replace" for e in patch):
        merged = [x for x in (_fresh(e, items) for e in patch if not _is_directive(e)) if x is not None]
        return _order(merged, [], order, key) if order is not None else merged

    if deletions is not None:
        if not isinstance(deletions, list):
            raise BadRequest(f"{DELETE_FROM_PRIMITIVE_LIST_PREFIX} value must be a list")
        gone = {_hkey(d) for d in deletions}
        base = [x for x in base if _hkey(x) not in gone]

    if key is None:
        merged = list(base)
        for element in patch:
            if _is_directive(element):
                raise BadRequest(f'{PATCH_DIRECTIVE} "{element[PATCH_DIRECTIVE]}" is not allowed '
                                 "in a list without a merge key")
            merged.append(copy.deepcopy(element))
        merged = _dedupe(merged)
    else:
        deleted: set[str] = set()
        for element in patch:
            if not _is_directive(element):
                continue
            if element[PATCH_DIRECTIVE] != "delete":
                raise BadRequest(f'unknown {PATCH_DIRECTIVE} directive "{element[PATCH_DIRECTIVE]}" '
                                 "in a list (want replace or delete)")
            if key not in element:
                raise BadRequest(f'{PATCH_DIRECTIVE}: delete element has no merge key "{key}"')
            deleted.add(_hkey(element[key]))
        merged = [x for x in base
                  if not (isinstance(x, dict) and key in x and _hkey(x[key]) in deleted)]
        index: dict[str, int] = {}
        for i, x in enumerate(merged):
            if isinstance(x, dict) and key in x:
                index.setdefault(_hkey(x[key]), i)
        appended = []
        for element in patch:
            if _is_directive(element):
                continue
            at = index.get(_hkey(element[key])) if isinstance(element, dict) and key in element else None
            if at is None:
                appended.append(_fresh(element, items))
            else:
                merged[at] = _merge_map(merged[at], element, items)
        merged += appended

    return _order(merged, before, order, key) if order is not None else merged


def _order(merged: list, before: list, order: Any, key: str | None) -> list:
    """Apply `$setElementOrder` as Kubernetes does: the listed elements in the listed
    order, the others (only on the server) interleaved where they stood in `before`."""
    if not isinstance(order, list):
        raise BadRequest(f"{SET_ELEMENT_ORDER_PREFIX} value must be a list")

    def ident(x: Any) -> str | None:
        if key is None:
            return _hkey(x)
        return _hkey(x[key]) if isinstance(x, dict) and key in x else None

    wanted: dict[str, int] = {}
    for i, x in enumerate(order):
        h = ident(x)
        if h is not None:
            wanted.setdefault(h, i)
    was: dict[str, int] = {}
    for i, x in enumerate(before):
        h = ident(x)
        if h is not None:
            was.setdefault(h, i)

    listed = sorted((x for x in merged if ident(x) in wanted), key=lambda x: wanted[ident(x)])
    server = sorted((x for x in merged if ident(x) not in wanted),
                    key=lambda x: was.get(ident(x), len(before)))
    out: list = []
    i = j = 0
    while i < len(listed) or j < len(server):
        if j >= len(server):
            out.append(listed[i])
            i += 1
        elif i >= len(listed):
            out.append(server[j])
            j += 1
        else:
            li, sj = was.get(ident(listed[i])), was.get(ident(server[j]))
            if li is not None and sj is not None and li < sj:
                out.append(listed[i])
                i += 1
            else:
                out.append(server[j])
                j += 1
    return out


# --------------------------------------------------------------------------- diff SMP

def create_strategic_patch(original: dict, modified: dict, schema: dict | None) -> dict:
    """Two-way diff: the patch p with strategic_merge_patch(original, p, schema) == modified.

    Removed fields become null, removed elements of merge-keyed lists `$patch: delete`,
    removed primitives `$deleteFromPrimitiveList`, order changes `$setElementOrder`; lists
    without a merge strategy are sent whole. With `schema` None: create_merge_patch.
    (Null values inside `modified` cannot be expressed, as in any merge patch.)
    """
    if schema is None:
        return create_merge_patch(original, modified)
    return diff_strategic(original, modified, original, schema)


def diff_strategic(original: dict | None, modified: dict, current: dict, schema: dict | None) -> dict:
    """The strategic merge patch that sets in `current` every field of `modified` that
    differs, and removes what `original` had and `modified` no longer has.

    Fields only `current` has (written by others) are left alone. With original ==
    current this is the two-way diff; with the last-applied configuration as `original`
    it is kubectl's three-way apply patch. With `schema` None it produces a plain JSON
    merge patch (lists compared and replaced whole).
    """
    root = _Node(schema, schema) if schema is not None else _NOWHERE
    return _diff_map(original or {}, modified, current, root, retain=False)


def _diff_map(orig: dict, mod: dict, cur: dict, schema: _Node, *, retain: bool) -> dict:
    patch: dict = {}
    for name, want in mod.items():
        have = cur.get(name, _MISSING)
        if want is None:
            if have is not _MISSING and have is not None:
                patch[name] = None
            continue
        field = schema.child(name)
        was = orig.get(name)
        if isinstance(want, dict) and isinstance(have, dict) and not field.replaces:
            sub = _diff_map(was if isinstance(was, dict) else {}, want, have, field,
                            retain=field.retains_keys)
            if sub:
                patch[name] = sub
        elif isinstance(want, list) and isinstance(have, list) and field.merges_list:
            _diff_list(name, was if isinstance(was, list) else [], want, have, field, patch)
        elif have is _MISSING or not _same(have, want):
            patch[name] = copy.deepcopy(want)
    for name in orig:
        if name not in mod and name in cur:
            patch[name] = None
    if retain and patch:
        patch[RETAIN_KEYS_DIRECTIVE] = sorted(k for k, v in mod.items() if v is not None)
    return patch


def _well_keyed(values: list, key: str) -> bool:
    """Every element an object with a non-null, unique merge key."""
    seen: set[str] = set()
    for x in values:
        if not isinstance(x, dict) or x.get(key) is None:
            return False
        h = _hkey(x[key])
        if h in seen:
            return False
        seen.add(h)
    return True


def _replace_list(values: list) -> list:
    return [{PATCH_DIRECTIVE: "replace"}, *copy.deepcopy(values)]


def _diff_list(name: str, orig: list, mod: list, cur: list, field: _Node, patch: dict) -> None:
    """Add to `patch` the entries (list, order, deletions) that turn `cur` into `mod`."""
    if _same(mod, cur):
        return  # nothing to set, and nothing of `orig` is left in `cur` to delete
    key = field.merge_key
    if key is None:
        _diff_primitive_list(name, orig, mod, cur, patch)
        return
    if not (_well_keyed(mod, key) and _well_keyed(cur, key)):
        if not _same(mod, cur):
            patch[name] = _replace_list(mod)
        return

    items = field.items()
    by_key_cur = {_hkey(x[key]): x for x in cur}
    by_key_orig = {_hkey(x[key]): x for x in orig if isinstance(x, dict) and x.get(key) is not None}
    mod_keys = [_hkey(x[key]) for x in mod]
    in_mod = set(mod_keys)

    entries: list = []
    for element, h in zip(mod, mod_keys):
        have = by_key_cur.get(h)
        if have is None:
            entries.append(copy.deepcopy(element))
            continue
        was = by_key_orig.get(h, {})
        sub = _diff_map(was, element, have, items, retain=field.retains_keys)
        if sub:
            entries.append({key: copy.deepcopy(element[key]), **sub})
    deleted: set[str] = set()
    for h, element in by_key_orig.items():
        if h not in in_mod and h in by_key_cur and h not in deleted:
            deleted.add(h)
            entries.append({PATCH_DIRECTIVE: "delete", key: copy.deepcopy(element[key])})

    cur_keys = [_hkey(x[key]) for x in cur]
    reordered = [h for h in cur_keys if h in in_mod] != [h for h in mod_keys if h in by_key_cur]
    if entries:
        patch[name] = entries
    if entries or reordered:
        patch[SET_ELEMENT_ORDER_PREFIX + name] = [{key: copy.deepcopy(x[key])} for x in mod]


def _diff_primitive_list(name: str, orig: list, mod: list, cur: list, patch: dict) -> None:
    """Set-like merge list (finalizers): additions, $deleteFromPrimitiveList, order."""
    if len(_dedupe(mod)) != len(mod) or len(_dedupe(cur)) != len(cur) \
            or any(isinstance(x, (dict, list)) for x in mod):
        if not _same(mod, cur):
            patch[name] = _replace_list(mod)
        return
    in_mod = {_hkey(x) for x in mod}
    in_cur = {_hkey(x) for x in cur}
    additions = [copy.deepcopy(x) for x in mod if _hkey(x) not in in_cur]
    removals = [copy.deepcopy(x) for x in _dedupe(orig) if _hkey(x) not in in_mod and _hkey(x) in in_cur]
    reordered = [_hkey(x) for x in cur if _hkey(x) in in_mod] != [_hkey(x) for x in mod if _hkey(x) in in_cur]
    if additions:
        patch[name] = additions
    if removals:
        patch[DELETE_FROM_PRIMITIVE_LIST_PREFIX + name] = removals
    if additions or removals or reordered:
        patch[SET_ELEMENT_ORDER_PREFIX + name] = copy.deepcopy(mod)
