"""`kctl explain`: a kind's fields and their documentation, read from the kind's JSON Schema.

Called by the CLI (`kctl explain deployment.spec.strategy [--recursive]`) with the
ResourceType the first word names and the rest of the path. The text follows kubectl
explain: KIND and VERSION, the field and its type, its description, then its fields.
Works the same for built-in kinds (schemas/) and custom ones (the CRD's openAPIV3Schema).
"""

from __future__ import annotations

import textwrap

from kctl.machinery import schemas
from kctl.machinery.errors import BadRequest
from kctl.machinery.resources import ResourceType

__all__ = ["explain", "type_name"]

_WIDTH = 80


def explain(rt: ResourceType, field_path: list[str], *, recursive: bool = False) -> str:
    """kubectl-explain text for `rt` or one of its fields; BadRequest for a field that does not exist."""
    root = schemas.load(rt)
    node: dict = root
    for name in field_path:
        properties = _properties(root, node)
        if name not in properties:
            raise BadRequest(f'field "{name}" does not exist')
        node = properties[name]

    lines = [f"KIND:     {rt.kind}", f"VERSION:  {rt.api_version}", ""]
    if field_path:
        lines += [f"FIELD: {field_path[-1]} <{type_name(root, node)}>", ""]
    lines.append("DESCRIPTION:")
    lines += _wrap(_description(root, node, top=not field_path) or "<empty>", "    ")

    options = [v for v in (schemas.resolve(root, node).get("enum") or ()) if v is not None]
    if options:
        lines += ["", "ENUM:"] + [f"    {option}" for option in options]

    fields = _properties(root, node)
    if fields:
        lines += ["", "FIELDS:"]
        if recursive:
            lines += _tree(root, node, "  ", frozenset())
        else:
            required = _required(root, node)
            for name, sub in sorted(fields.items()):
                lines.append(f"  {name}\t<{type_name(root, sub)}>" + (" -required-" if name in required else ""))
                lines += _wrap(_first_paragraph(_description(root, sub)), "    ")
                lines.append("")
            lines.pop()
    return "\n".join(lines) + "\n"


def type_name(root: dict, node: dict) -> str:
    """kubectl's name for a field's type: string, integer, Object, []Object, map[string]string, Quantity ..."""
    ref_name = node.get("$ref", "").rsplit(".", 1)[-1] if isinstance(node.get("$ref"), str) else ""
    if ref_name in ("IntOrString", "Quantity"):
        return ref_name
    target = schemas.resolve(root, node)
    if target.get("x-kubernetes-int-or-string"):
        return "IntOrString"
    if target.get("format") == "quantity":
        return "Quantity"
    kinds = target.get("type")
    kinds = [kinds] if isinstance(kinds, str) else [k for k in (kinds or ()) if k != "null"]
    if "array" in kinds:
        items = target.get("items")
        return "[]" + (type_name(root, items) if isinstance(items, dict) else "Object")
    if "object" in kinds or "properties" in target:
        extra = target.get("additionalProperties")
        if isinstance(extra, dict) and "properties" not in target:
            return "map[string]" + type_name(root, extra)
        return "Object"
    if kinds == ["integer", "string"] or kinds == ["string", "integer"]:
        return "IntOrString"
    if kinds:
        return kinds[0]
    return ref_name or "Object"


def _properties(root: dict, node: dict) -> dict:
    """The fields under a node, looking through arrays (containers -> a container's fields)."""
    target = schemas.resolve(root, node)
    for _ in range(8):
        items = target.get("items")
        if not isinstance(items, dict):
            break
        target = schemas.resolve(root, items)
    properties = target.get("properties")
    return properties if isinstance(properties, dict) else {}


def _required(root: dict, node: dict) -> set[str]:
    target = schemas.resolve(root, node)
    while isinstance(target.get("items"), dict):
        target = schemas.resolve(root, target["items"])
    return set(target.get("required") or ())


def _description(root: dict, node: dict, *, top: bool = False) -> str:
    """The field's own description, then its type's if that says something more."""
    own = (node.get("description") or "").strip()
    if top:
        return own
    target = schemas.resolve(root, node)
    while isinstance(target.get("items"), dict) and not target.get("properties"):
        target = schemas.resolve(root, target["items"])
    of_type = (target.get("description") or "").strip() if target is not node else ""
    if of_type and of_type != own:
        return f"{own}\n\n{of_type}" if own else of_type
    return own


def _first_paragraph(text: str) -> str:
    return text.split("\n\n", 1)[0].strip()


def _wrap(text: str, indent: str) -> list[str]:
    lines: list[str] = []
    for paragraph in text.split("\n"):
        if not paragraph.strip():
            if lines and lines[-1]:
                lines.append("")
            continue
        lines += textwrap.wrap(paragraph.strip(), width=_WIDTH, initial_indent=indent, subsequent_indent=indent,
                               break_long_words=False, break_on_hyphens=False)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _tree(root: dict, node: dict, indent: str, seen: frozenset[str]) -> list[str]:
    """Every field below `node`, one a line, nested by indentation (kubectl explain --recursive)."""
    lines = []
    required = _required(root, node)
    for name, sub in sorted(_properties(root, node).items()):
        lines.append(f"{indent}{name}\t<{type_name(root, sub)}>" + (" -required-" if name in required else ""))
        refs = _refs_along(root, sub)
        if refs & seen:
            continue  # a recursive type (JSONSchemaProps): show it once
        lines += _tree(root, sub, indent + "  ", seen | refs)
    return lines


def _refs_along(root: dict, node: dict) -> frozenset[str]:
    """The $defs a field passes through on its way to its fields (for cycle detection)."""
    found = set()
    for _ in range(16):
        if "$ref" in node:
            found.add(node["$ref"])
            node = root["$defs"].get(node["$ref"].rsplit("/", 1)[-1], {})
        elif isinstance(node.get("items"), dict):
            node = node["items"]
        else:
            break
    return frozenset(found)
