"""The JSON Schema step of validation: an object checked against its kind's schema.

`schema_errors(obj, rt)` is called by `kctl.admission.validation.validate` first; its
errors come alone (an object that does not decode is not checked further). The kind's
schema (kctl.machinery.schemas.load) is checked by jsonschema's Draft202012Validator with a
"quantity" format checker. jsonschema is thorough but slow (about 1 ms for a
Deployment), so each schema is also compiled here into plain Python predicates that
answer "valid or not" in a tenth of that; jsonschema only runs when that answer is
"not" (or for a schema using keywords the compiler does not know), to produce the
messages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kctl.admission.validation.fields import (Path, invalid_value, join_path, required_value, show_value,
                                              unsupported_value)
from kctl.machinery import schemas
from kctl.machinery.errors import FieldError
from kctl.machinery.quantity import is_quantity
from kctl.machinery.resources import ResourceType


_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY_HINT = "must be a quantity like 500m or 128Mi"
_TYPE_WORDS = {"integer": "an integer", "string": "a string", "boolean": "a boolean",
               "object": "an object", "array": "a list", "number": "a number", "null": "null"}


@dataclass
class _CompiledSchema:
    """A kind's schema ready to check objects; `root` keeps the cached source alive."""

    root: dict
    is_valid: Callable[[Any], bool] | None
    checked: dict  # the schema jsonschema checks (IntOrString simplified)
    _validator: Any = None

    @property
    def validator(self) -> Any:
        """jsonschema's Draft202012Validator, made on first use: importing jsonschema costs a
        `kctl apply` of valid objects 50-100 ms of start-up it does not need."""
        if self._validator is None:
            from jsonschema import Draft202012Validator, FormatChecker

            formats = FormatChecker(formats=())
            formats.checks("quantity")(lambda value: value is None or is_quantity(value))
            self._validator = Draft202012Validator(self.checked, format_checker=formats)
        return self._validator


_COMPILED: dict[int, _CompiledSchema] = {}
_MAX_COMPILED = 256


def _compiled(rt: ResourceType) -> _CompiledSchema:
    root = schemas.load(rt)
    compiled = _COMPILED.get(id(root))
    if compiled is None or compiled.root is not root:
        if len(_COMPILED) >= _MAX_COMPILED:
            _COMPILED.clear()
        compiled = _COMPILED[id(root)] = _compile_schema(root)
    return compiled


def _compile_schema(root: dict) -> _CompiledSchema:
    # IntOrString is a oneOf of string-or-null and integer-or-null, which a null fails (it
    # matches both) and which reports its failures as a dump of both branches: one type
    # union says the same thing, and says it in one message.
    defs = root.get("$defs") or {}
    if _INT_OR_STRING in defs:
        patched = dict(defs)
        patched[_INT_OR_STRING] = {"type": ["integer", "string", "null"],
                                   "description": defs[_INT_OR_STRING].get("description", "")}
        checked = {**root, "$defs": patched}
    else:
        checked = root
    try:
        is_valid = _FastCompiler(checked).compile(checked)
    except _Unsupported:
        is_valid = None
    return _CompiledSchema(root, is_valid, checked)


def schema_errors(obj: dict, rt: ResourceType) -> list[FieldError]:
    """The schema step: [] if `obj` matches its kind's schema, else kubectl-style errors."""
    compiled = _compiled(rt)
    if compiled.is_valid is not None and compiled.is_valid(obj):
        return []
    found: list[tuple[str, FieldError]] = []
    for error in compiled.validator.iter_errors(obj):
        found.extend((error.validator, converted) for converted in _convert(error))
    # A value of the wrong type also fails its enum, format ...: say only what matters.
    mistyped = {e.path for kind, e in found if kind == "type"}
    return [e for kind, e in found if kind == "type" or e.path not in mistyped]


def _type_detail(schema: dict, types: Any) -> str:
    if schema.get("format") == "quantity":
        return QUANTITY_HINT
    names = [types] if isinstance(types, str) else [t for t in types if t != "null"] or list(types)
    if "integer" in names and "number" in names:
        names.remove("integer")
    return "must be " + " or ".join(_TYPE_WORDS.get(n, n) for n in names)


def _quote_hint(value: Any, expected: Any) -> str:
    """Why a manifest gave a non-string where a string belongs: YAML 1.1 resolved it."""
    if "string" not in ([expected] if isinstance(expected, str) else expected):
        return ""
    if isinstance(value, bool):
        return (" (YAML reads unquoted yes/no/on/off/y/n/true/false as booleans, as Kubernetes "
                "does: quote the value)")
    return ""


def _convert(error: Any) -> Iterator[FieldError]:
    """One jsonschema ValidationError as kubectl-style FieldErrors."""
    path: Path = tuple(error.absolute_path)
    kind, value, schema, expected = error.validator, error.instance, error.schema, error.validator_value
    if kind == "additionalProperties" and isinstance(value, dict):
        known = schema.get("properties") or {}
        patterns = list((schema.get("patternProperties") or {}).keys())
        for key in value:
            if key not in known and not any(re.search(p, key) for p in patterns):
                yield FieldError(join_path((*path, key)), f'unknown field "{key}"')
    elif kind == "required" and isinstance(value, dict):
        for key in expected:
            if key not in value:
                yield required_value((*path, key))
    elif kind == "type":
        yield invalid_value(path, value, _type_detail(schema, expected) + _quote_hint(value, expected))
    elif kind == "format":
        yield invalid_value(path, value, QUANTITY_HINT if expected == "quantity" else f"must be a valid {expected}")
    elif kind == "enum":
        yield unsupported_value(path, value, expected)
    elif kind == "const":
        yield invalid_value(path, value, f"must be {show_value(expected)}")
    elif kind == "pattern":
        detail = ("must be an absolute path" if expected == "^/"
                  else f'must match the regular expression "{expected}"')
        yield invalid_value(path, value, detail)
    elif kind in ("minItems", "maxItems"):
        if kind == "minItems" and not value:
            yield required_value(path, f"must have at least {expected} item{'s' if expected != 1 else ''}")
        else:
            bound = "at least" if kind == "minItems" else "at most"
            yield FieldError(join_path(path), f"Invalid value: {len(value)} items: must have {bound} {expected}")
    elif kind in ("minLength", "maxLength"):
        bound = "at least" if kind == "minLength" else "no more than"
        yield invalid_value(path, value, f"must be {bound} {expected} characters")
    elif kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        relation = {"minimum": "greater than or equal to", "maximum": "less than or equal to",
                    "exclusiveMinimum": "greater than", "exclusiveMaximum": "less than"}[kind]
        yield invalid_value(path, value, f"must be {relation} {expected}")
    elif kind in ("oneOf", "anyOf"):
        yield invalid_value(path, value, _alternatives_detail(error))
    else:
        message = error.message
        yield invalid_value(path, value, message[0].lower() + message[1:] if message else kind)


def _alternatives_detail(error: Any) -> str:
    """One sentence for a failed oneOf/anyOf instead of every branch's complaint."""
    context = list(error.context or ())
    if context and all(e.validator == "type" and not e.relative_path for e in context):
        names: list[str] = []
        for e in context:
            for name in [e.validator_value] if isinstance(e.validator_value, str) else e.validator_value:
                if name != "null" and name not in names:
                    names.append(name)
        return "must be " + " or ".join(_TYPE_WORDS.get(n, n) for n in names)
    if error.validator == "oneOf" and not context:
        return "must match exactly one of the allowed schemas, not several"
    return f"must match {'exactly one' if error.validator == 'oneOf' else 'at least one'} of the allowed schemas"


# --- the fast yes/no compiler ----------------------------------------------------------


class _Unsupported(Exception):
    """The schema uses a keyword the fast compiler does not handle: use jsonschema only."""


_NoneType = type(None)
_JSON_TYPE: dict[type, str] = {dict: "object", list: "array", str: "string", int: "integer",
                               float: "number", bool: "boolean", _NoneType: "null"}
_IGNORED = frozenset({"description", "title", "default", "examples", "example", "$schema", "$id",
                      "$comment", "readOnly", "writeOnly", "deprecated", "$defs", "definitions",
                      "externalDocs", "nullable", "format"})
_HANDLED = frozenset({"type", "enum", "const", "properties", "additionalProperties", "patternProperties",
                      "required", "items", "prefixItems", "minItems", "maxItems", "uniqueItems",
                      "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum",
                      "exclusiveMaximum", "multipleOf", "minProperties", "maxProperties", "allOf",
                      "anyOf", "$ref", "dependentRequired"})


def _json_type(value: Any) -> str:
    kind = _JSON_TYPE.get(type(value))
    if kind is not None:
        return kind
    for python_type, name in (dict, "object"), (list, "array"), (str, "string"), (bool, "boolean"), \
            (int, "integer"), (float, "number"):
        if isinstance(value, python_type):
            return name
    return "unknown"


def _always(value: Any) -> bool:
    return True


def _never(value: Any) -> bool:
    return False


def _all_of(checks: list[Callable[[Any], bool]]) -> Callable[[Any], bool]:
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]

    def check(value: Any) -> bool:
        for part in checks:
            if not part(value):
                return False
        return True
    return check


class _FastCompiler:
    """Schema -> predicate that is never more lenient than jsonschema.

    Where exactness would cost (1.0 as an integer, enum values equal across types,
    multipleOf on floats, uniqueItems of unhashable items) it answers "not valid" and
    lets jsonschema decide. oneOf and not would turn such strictness into leniency, so
    a schema (or a definition, see `_ref`) using them is not compiled at all.
    """

    def __init__(self, root: dict) -> None:
        self._defs = root.get("$defs") or {}
        self._cells: dict[str, list] = {}  # definition name -> [its check, once compiled]

    def compile(self, node: Any) -> Callable[[Any], bool]:
        if node is True or node == {}:
            return _always
        if node is False:
            return _never
        if not isinstance(node, dict):
            raise _Unsupported(repr(node))
        for key in node:
            if key not in _HANDLED and key not in _IGNORED and not key.startswith("x-"):
                raise _Unsupported(key)
        parts: list[Callable[[Any], bool]] = []
        if "$ref" in node:
            parts.append(self._ref(node["$ref"]))
        typed = self._typed(node)
        if typed is not None:
            parts.append(typed)
        if "enum" in node:
            parts.append(self._enum(node["enum"]))
        if "const" in node:
            parts.append(self._enum([node["const"]]))
        if "allOf" in node:
            parts.extend(self.compile(sub) for sub in node["allOf"])
        if "anyOf" in node:
            branches = [self.compile(sub) for sub in node["anyOf"]]
            parts.append(lambda value: any(branch(value) for branch in branches))
        return _all_of(parts)

    def _ref(self, ref: str) -> Callable[[Any], bool]:
        """A definition's check, compiled when a value first reaches it.

        A kind's schema names hundreds of definitions and an object uses a few (a Pod's
        schema compiled whole took 10-14 ms of every `kctl apply`). A definition the
        compiler cannot handle answers "not valid" (jsonschema then decides), which is
        never more lenient: the compiler makes no oneOf or not that could invert it.
        """
        if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
            raise _Unsupported(ref)
        name = ref[len("#/$defs/"):]
        if name not in self._defs:
            raise _Unsupported(ref)
        cell = self._cells.get(name)
        if cell is None:
            self._cells[name] = cell = [None]

        def check(value: Any) -> bool:
            compiled = cell[0]
            if compiled is None:
                try:
                    compiled = self.compile(self._defs[name])
                except _Unsupported:
                    compiled = _never
                cell[0] = compiled
            return compiled(value)
        return check

    def _enum(self, options: list) -> Callable[[Any], bool]:
        allowed = set()
        for option in options:
            try:
                allowed.add((_json_type(option), option))
            except TypeError:
                pass  # an unhashable option: such values fail here and jsonschema decides

        def check(value: Any) -> bool:
            try:
                return ((_JSON_TYPE.get(type(value)) or _json_type(value)), value) in allowed
            except TypeError:
                return False
        return check

    def _typed(self, node: dict) -> Callable[[Any], bool] | None:
        """Type plus the keywords that apply to one JSON type, fused into one closure."""
        allowed: frozenset[str] | None = None
        if "type" in node:
            names = [node["type"]] if isinstance(node["type"], str) else list(node["type"])
            if "number" in names:
                names.append("integer")
            allowed = frozenset(names)
        on_object = self._object_part(node)
        on_array = self._array_part(node)
        on_string = self._string_part(node)
        on_number = self._number_part(node)
        if allowed is None and not (on_object or on_array or on_string or on_number):
            return None
        if allowed is not None and len(allowed) <= 2 and not (on_array or on_string or on_number):
            if on_object is not None and "object" in allowed:  # the common object node
                def check_object(value: Any) -> bool:
                    kind = _JSON_TYPE.get(type(value)) or _json_type(value)
                    if kind == "object":
                        return on_object(value)
                    return kind in allowed
                return check_object
            if on_object is None:  # a plain scalar, list or map-free node
                def check_type(value: Any) -> bool:
                    return (_JSON_TYPE.get(type(value)) or _json_type(value)) in allowed
                return check_type

        def check(value: Any) -> bool:
            kind = _JSON_TYPE.get(type(value)) or _json_type(value)
            if allowed is not None and kind not in allowed:
                return False
            if kind == "object":
                return on_object is None or on_object(value)
            if kind == "array":
                return on_array is None or on_array(value)
            if kind == "string":
                return on_string is None or on_string(value)
            if kind in ("integer", "number"):
                return on_number is None or on_number(value)
            return True
        return check

    def _object_part(self, node: dict) -> Callable[[dict], bool] | None:
        keys = ("properties", "additionalProperties", "patternProperties", "required",
                "minProperties", "maxProperties", "dependentRequired")
        if not any(key in node for key in keys):
            return None
        properties = {name: self.compile(sub) for name, sub in (node.get("properties") or {}).items()}
        extra = node.get("additionalProperties", True)
        extra_check = None if extra is True else self.compile(extra)
        patterns = [(re.compile(p), self.compile(sub)) for p, sub in (node.get("patternProperties") or {}).items()]
        required = tuple(node.get("required") or ())
        min_props, max_props = node.get("minProperties"), node.get("maxProperties")
        dependent = dict(node.get("dependentRequired") or {})

        if not patterns and min_props is None and max_props is None and not dependent:
            def check_simple(value: dict) -> bool:
                for key, item in value.items():
                    sub = properties.get(key)
                    if sub is not None:
                        if not sub(item):
                            return False
                    elif extra_check is not None and not extra_check(item):
                        return False
                for key in required:
                    if key not in value:
                        return False
                return True
            return check_simple

        def check(value: dict) -> bool:
            for key, item in value.items():
                matched = False
                sub = properties.get(key)
                if sub is not None:
                    matched = True
                    if not sub(item):
                        return False
                for pattern, pattern_check in patterns:
                    if not isinstance(key, str):
                        return False
                    if pattern.search(key):
                        matched = True
                        if not pattern_check(item):
                            return False
                if not matched and extra_check is not None and not extra_check(item):
                    return False
            if any(key not in value for key in required):
                return False
            if min_props is not None and len(value) < min_props:
                return False
            if max_props is not None and len(value) > max_props:
                return False
            for key, needs in dependent.items():
                if key in value and any(n not in value for n in needs):
                    return False
            return True
        return check

    def _array_part(self, node: dict) -> Callable[[list], bool] | None:
        if not any(k in node for k in ("items", "prefixItems", "minItems", "maxItems", "uniqueItems")):
            return None
        if isinstance(node.get("items"), list):
            raise _Unsupported("items as a list")
        prefix = [self.compile(sub) for sub in node.get("prefixItems") or ()]
        items = self.compile(node["items"]) if "items" in node else _always
        min_items, max_items = node.get("minItems"), node.get("maxItems")
        unique = bool(node.get("uniqueItems"))

        def check(value: list) -> bool:
            if min_items is not None and len(value) < min_items:
                return False
            if max_items is not None and len(value) > max_items:
                return False
            for index, item in enumerate(value):
                sub = prefix[index] if index < len(prefix) else items
                if not sub(item):
                    return False
            if unique:
                try:
                    if len({(type(v), v) for v in value}) != len(value):
                        return False
                except TypeError:
                    return False
            return True
        return check

    def _string_part(self, node: dict) -> Callable[[str], bool] | None:
        checks: list[Callable[[str], bool]] = []
        if node.get("format") == "quantity":
            checks.append(is_quantity)
        if "pattern" in node:
            pattern = re.compile(node["pattern"])
            checks.append(lambda value: pattern.search(value) is not None)
        if "minLength" in node:
            least = node["minLength"]
            checks.append(lambda value: len(value) >= least)
        if "maxLength" in node:
            most = node["maxLength"]
            checks.append(lambda value: len(value) <= most)
        return _all_of(checks) if checks else None

    def _number_part(self, node: dict) -> Callable[[Any], bool] | None:
        checks: list[Callable[[Any], bool]] = []
        if node.get("format") == "quantity":
            checks.append(is_quantity)
        if "minimum" in node:
            low = node["minimum"]
            checks.append(lambda value: value >= low)
        if "maximum" in node:
            high = node["maximum"]
            checks.append(lambda value: value <= high)
        if "exclusiveMinimum" in node:
            low_x = node["exclusiveMinimum"]
            checks.append(lambda value: value > low_x)
        if "exclusiveMaximum" in node:
            high_x = node["exclusiveMaximum"]
            checks.append(lambda value: value < high_x)
        if "multipleOf" in node:
            step = node["multipleOf"]
            checks.append(lambda value: isinstance(value, int) and isinstance(step, int) and value % step == 0)
        return _all_of(checks) if checks else None
