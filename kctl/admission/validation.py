"""Validation of objects: the JSON Schema step of admission, plus the checks a schema cannot say.

The API layer calls `validate(obj, rt)` after defaulting and mutating hooks and before
validating hooks; an empty list means the object may be stored, otherwise it raises
`Invalid` with these FieldErrors. Messages follow kubectl's strict validation
(`spec.replicass: unknown field "replicass"`, `spec.replicas: Invalid value: "3": must be
an integer`), paths are dotted with [i] indices.

Two parts:
- schema: the kind's schema (kctl.api.schemas.load) checked by jsonschema's
  Draft202012Validator, with a "quantity" format checker. jsonschema is thorough but
  slow (about 1 ms for a Deployment), so each schema is also compiled here into plain
  Python predicates that answer "valid or not" in a tenth of that; jsonschema only runs
  when that answer is "not" (or for a schema using keywords the compiler does not know),
  to produce the messages.
- semantics: names, labels, containers, ports, selectors ... as Kubernetes' own
  validation enforces them, as small functions applied by kind, once the schema passes.

It also turns CustomResourceDefinitions into ResourceTypes (`crd_resource_types`) and
checks a CRD beyond its schema (`validate_crd`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kctl.api import schemas
from kctl.api.errors import FieldError
from kctl.api.quantity import is_quantity, parse_quantity
from kctl.api.resources import ResourceType

__all__ = ["validate", "crd_resource_types", "validate_crd"]

Path = tuple[str | int, ...]


def validate(obj: dict, rt: ResourceType) -> list[FieldError]:
    """Every problem with `obj` as an object of kind `rt`, sorted by path; [] if it is valid.

    Schema errors (unknown fields, wrong types, bad quantities) come first and alone, as
    from the API server: only an object that matches its schema gets the semantic checks.
    """
    errors = _schema_errors(obj, rt)
    if errors:  # as the API server: an object that does not decode is not checked further
        return _finish(errors)
    errors = _metadata_errors(obj, rt)
    for check in _KIND_CHECKS.get(rt.group_kind, ()):
        errors.extend(check(obj))
    return _finish(errors)


def _finish(errors: Iterable[FieldError]) -> list[FieldError]:
    """Deduplicated and sorted by path (numeric indices in numeric order)."""
    return sorted(set(errors), key=lambda e: (_path_sort_key(e.path), e.message))


def _path_sort_key(path: str) -> tuple:
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"[.\[\]]+", path) if part)


# ---------------------------------------------------------------------------------------
# Field paths and values as kubectl prints them


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_$-]+")


def _join(path: Iterable[str | int]) -> str:
    """`spec.template.spec.containers[0].image`; map keys with dots or slashes as `[key]`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part}]"
    return out


def _show(value: Any) -> str:
    """A value in a message: JSON for scalars, the kind of thing for objects and lists."""
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(str(value))


def _invalid(path: Iterable[str | int], value: Any, detail: str) -> FieldError:
    return FieldError(_join(path), f"Invalid value: {_show(value)}: {detail}")


def _required(path: Iterable[str | int], detail: str = "") -> FieldError:
    return FieldError(_join(path), "Required value" + (f": {detail}" if detail else ""))


def _unsupported(path: Iterable[str | int], value: Any, supported: Iterable[Any]) -> FieldError:
    listed = ", ".join(_show(v) for v in supported if v is not None)
    return FieldError(_join(path), f"Unsupported value: {_show(value)}: supported values: {listed}")


# ---------------------------------------------------------------------------------------
# Schema validation


_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY_HINT = "must be a quantity like 500m or 128Mi"
_TYPE_WORDS = {"integer": "an integer", "string": "a string", "boolean": "a boolean",
               "object": "an object", "array": "a list", "number": "a number", "null": "null"}


@dataclass
class _CompiledSchema:
    """A kind's schema ready to check objects; `root` keeps the cached source alive."""

    root: dict
    is_valid: Callable[[Any], bool] | None
    validator: Any  # jsonschema.Draft202012Validator


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
    from jsonschema import Draft202012Validator, FormatChecker

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
    formats = FormatChecker(formats=())
    formats.checks("quantity")(lambda value: value is None or is_quantity(value))
    validator = Draft202012Validator(checked, format_checker=formats)
    try:
        is_valid = _FastCompiler(checked).compile(checked)
    except _Unsupported:
        is_valid = None
    return _CompiledSchema(root, is_valid, validator)


def _schema_errors(obj: dict, rt: ResourceType) -> list[FieldError]:
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


def _convert(error: Any) -> Iterator[FieldError]:
    """One jsonschema ValidationError as kubectl-style FieldErrors."""
    path: Path = tuple(error.absolute_path)
    kind, value, schema, expected = error.validator, error.instance, error.schema, error.validator_value
    if kind == "additionalProperties" and isinstance(value, dict):
        known = schema.get("properties") or {}
        patterns = list((schema.get("patternProperties") or {}).keys())
        for key in value:
            if key not in known and not any(re.search(p, key) for p in patterns):
                yield FieldError(_join((*path, key)), f'unknown field "{key}"')
    elif kind == "required" and isinstance(value, dict):
        for key in expected:
            if key not in value:
                yield _required((*path, key))
    elif kind == "type":
        yield _invalid(path, value, _type_detail(schema, expected))
    elif kind == "format":
        yield _invalid(path, value, QUANTITY_HINT if expected == "quantity" else f"must be a valid {expected}")
    elif kind == "enum":
        yield _unsupported(path, value, expected)
    elif kind == "const":
        yield _invalid(path, value, f"must be {_show(expected)}")
    elif kind == "pattern":
        detail = ("must be an absolute path" if expected == "^/"
                  else f'must match the regular expression "{expected}"')
        yield _invalid(path, value, detail)
    elif kind in ("minItems", "maxItems"):
        if kind == "minItems" and not value:
            yield _required(path, f"must have at least {expected} item{'s' if expected != 1 else ''}")
        else:
            bound = "at least" if kind == "minItems" else "at most"
            yield FieldError(_join(path), f"Invalid value: {len(value)} items: must have {bound} {expected}")
    elif kind in ("minLength", "maxLength"):
        bound = "at least" if kind == "minLength" else "no more than"
        yield _invalid(path, value, f"must be {bound} {expected} characters")
    elif kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        relation = {"minimum": "greater than or equal to", "maximum": "less than or equal to",
                    "exclusiveMinimum": "greater than", "exclusiveMaximum": "less than"}[kind]
        yield _invalid(path, value, f"must be {relation} {expected}")
    elif kind in ("oneOf", "anyOf"):
        yield _invalid(path, value, _alternatives_detail(error))
    else:
        message = error.message
        yield _invalid(path, value, message[0].lower() + message[1:] if message else kind)


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
    a schema using them is not compiled at all.
    """

    def __init__(self, root: dict) -> None:
        self._defs = root.get("$defs") or {}
        self._done: dict[str, Callable[[Any], bool]] = {}
        self._cells: dict[str, list] = {}

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
        if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
            raise _Unsupported(ref)
        name = ref[len("#/$defs/"):]
        if name in self._done:
            return self._done[name]
        if name in self._cells:  # recursive: go through a cell filled once compiled
            cell = self._cells[name]
            return lambda value: cell[0](value)
        if name not in self._defs:
            raise _Unsupported(ref)
        self._cells[name] = cell = [None]
        cell[0] = check = self.compile(self._defs[name])
        self._done[name] = check
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


# ---------------------------------------------------------------------------------------
# Names, labels and other syntax Kubernetes checks (k8s.io/apimachinery/pkg/util/validation)


_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_IANA_SVC_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
_PERCENT = re.compile(r"[0-9]+%")

LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
             "and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                 "'.', and must start and end with an alphanumeric character (e.g. 'example.com')")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
               "alphabetic character, and end with an alphanumeric character (e.g. 'my-name', or 'abc-123')")


def dns1123_label_problems(value: str) -> list[str]:
    """What is wrong with `value` as a DNS-1123 label (container, port-less names, namespaces)."""
    problems = [] if len(value) <= 63 else ["must be no more than 63 characters"]
    if not _DNS1123_LABEL.fullmatch(value):
        problems.append(LABEL_MSG)
    return problems


def dns1123_subdomain_problems(value: str) -> list[str]:
    """What is wrong with `value` as a DNS-1123 subdomain (most object names)."""
    problems = [] if len(value) <= 253 else ["must be no more than 253 characters"]
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        problems.append(SUBDOMAIN_MSG)
    return problems


def dns1035_label_problems(value: str) -> list[str]:
    """What is wrong with `value` as a DNS-1035 label (Service names)."""
    problems = [] if len(value) <= 63 else ["must be no more than 63 characters"]
    if not _DNS1035_LABEL.fullmatch(value):
        problems.append(DNS1035_MSG)
    return problems


def qualified_name_problems(value: str) -> list[str]:
    """Label and annotation keys: `[prefix/]name`, prefix a DNS subdomain, name <= 63 characters."""
    prefix, slash, name = value.rpartition("/")
    problems = []
    if slash:
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems.extend("prefix part " + p for p in dns1123_subdomain_problems(prefix))
    if not name:
        problems.append("name part must be non-empty")
    else:
        if len(name) > 63:
            problems.append("name part must be no more than 63 characters")
        if not _QUALIFIED_NAME_PART.fullmatch(name):
            problems.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                            "start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', "
                            "or '123-abc')")
    return problems


def label_value_problems(value: str) -> list[str]:
    """What is wrong with `value` as a label value (empty is fine)."""
    problems = [] if len(value) <= 63 else ["must be no more than 63 characters"]
    if value and not _QUALIFIED_NAME_PART.fullmatch(value):
        problems.append("a valid label must be an empty string or consist of alphanumeric characters, '-', "
                        "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', "
                        "or 'my_value', or '12345')")
    return problems


def _port_name_problems(value: str) -> list[str]:
    problems = [] if len(value) <= 15 else ["must be no more than 15 characters"]
    if not _IANA_SVC_NAME.fullmatch(value):
        problems.append("must contain only lowercase alphanumeric characters or '-', and start and end with "
                        "an alphanumeric character")
    if "--" in value:
        problems.append("must not contain consecutive hyphens")
    if not re.search(r"[a-z]", value):
        problems.append("must contain at least one letter (a-z)")
    return problems


def _name_errors(path: Path, value: Any, check: Callable[[str], list[str]]) -> list[FieldError]:
    if not isinstance(value, str):
        return []
    return [_invalid(path, value, problem) for problem in check(value)]


def _labels_errors(path: Path, labels: Any) -> list[FieldError]:
    if not isinstance(labels, dict):
        return []
    errors = []
    for key, value in labels.items():
        if isinstance(key, str):
            errors.extend(_invalid(path, key, p) for p in qualified_name_problems(key))
        if isinstance(value, str):
            errors.extend(_invalid(path, value, p) for p in label_value_problems(value))
    return errors


def _annotations_errors(path: Path, annotations: Any) -> list[FieldError]:
    if not isinstance(annotations, dict):
        return []
    errors = []
    size = 0
    for key, value in annotations.items():
        if isinstance(key, str):
            errors.extend(_invalid(path, key, p) for p in qualified_name_problems(key.lower()))
            size += len(key)
        if isinstance(value, str):
            size += len(value)
    if size > 256 * 1024:
        errors.append(FieldError(_join(path), "Too long: must have at most 262144 bytes"))
    return errors


def _selector_errors(path: Path, selector: Any) -> list[FieldError]:
    if not isinstance(selector, dict):
        return []
    errors = _labels_errors((*path, "matchLabels"), selector.get("matchLabels"))
    expressions = selector.get("matchExpressions")
    for i, expression in enumerate(expressions if isinstance(expressions, list) else ()):
        if not isinstance(expression, dict):
            continue
        where = (*path, "matchExpressions", i)
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values")
        if isinstance(key, str):
            errors.extend(_invalid((*where, "key"), key, p) for p in qualified_name_problems(key))
        if operator in ("In", "NotIn"):
            if not values:
                errors.append(_required((*where, "values"), "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errors.append(FieldError(_join((*where, "values")),
                                         "Forbidden: may not be specified when `operator` is 'Exists' or "
                                         "'DoesNotExist'"))
        elif isinstance(operator, str):
            errors.append(_unsupported((*where, "operator"), operator, ("DoesNotExist", "Exists", "In", "NotIn")))
    return errors


def _selector_matches(selector: dict, labels: dict) -> bool:
    """Whether a LabelSelector (matchLabels + matchExpressions) selects `labels`."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or ():
        if not isinstance(expression, dict):
            continue
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or ()
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


# ---------------------------------------------------------------------------------------
# Semantic checks by kind


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _name_check_for(rt: ResourceType) -> Callable[[str], list[str]]:
    if rt.group == "" and rt.kind == "Namespace":
        return dns1123_label_problems
    if rt.group == "" and rt.kind == "Service":
        return dns1035_label_problems
    return dns1123_subdomain_problems


def _metadata_errors(obj: dict, rt: ResourceType) -> list[FieldError]:
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return [_required(("metadata", "name"), "name or generateName is required")]
    errors = []
    name = metadata.get("name")
    if name:
        errors.extend(_name_errors(("metadata", "name"), name, _name_check_for(rt)))
    elif not metadata.get("generateName"):
        errors.append(_required(("metadata", "name"), "name or generateName is required"))
    namespace = metadata.get("namespace")
    if namespace:
        errors.extend(_name_errors(("metadata", "namespace"), namespace, dns1123_label_problems))
    errors.extend(_labels_errors(("metadata", "labels"), metadata.get("labels")))
    errors.extend(_annotations_errors(("metadata", "annotations"), metadata.get("annotations")))
    return errors


_PROTOCOLS = ("SCTP", "TCP", "UDP")


def _port_number_errors(path: Path, value: Any, *, zero_ok: bool = False) -> list[FieldError]:
    if isinstance(value, bool) or not isinstance(value, int) or (zero_ok and value == 0):
        return []
    if 1 <= value <= 65535:
        return []
    return [_invalid(path, value, "must be between 1 and 65535, inclusive")]


def _pod_spec_errors(spec: Any, path: Path, *, restart_policies: tuple[str, ...] | None = None,
                     restart_required: bool = False) -> list[FieldError]:
    """Kubernetes' ValidatePodSpec, the parts users run into."""
    if not isinstance(spec, dict):
        return []
    errors: list[FieldError] = []
    volumes = spec.get("volumes") if isinstance(spec.get("volumes"), list) else []
    volume_names: set[str] = set()
    for i, volume in enumerate(volumes):
        name = _get(volume, "name")
        if isinstance(name, str) and name:
            errors.extend(_name_errors((*path, "volumes", i, "name"), name, dns1123_label_problems))
            if name in volume_names:
                errors.append(FieldError(_join((*path, "volumes", i, "name")), f"Duplicate value: {_show(name)}"))
            volume_names.add(name)

    containers = spec.get("containers")
    if not containers:
        errors.append(_required((*path, "containers")))
    container_names: set[str] = set()
    port_names: set[str] = set()
    for field in ("initContainers", "containers", "ephemeralContainers"):
        items = spec.get(field)
        for i, container in enumerate(items if isinstance(items, list) else ()):
            if isinstance(container, dict):
                errors.extend(_container_errors(container, (*path, field, i), container_names, port_names,
                                                volume_names, check_image=field != "ephemeralContainers"))

    policy = spec.get("restartPolicy")
    policies = restart_policies or ("Always", "OnFailure", "Never")
    if isinstance(policy, str):
        if policy not in policies:
            errors.append(_unsupported((*path, "restartPolicy"), policy, policies))
    elif policy is None and restart_required:
        errors.append(_required((*path, "restartPolicy"),
                                "valid values: " + ", ".join(_show(p) for p in policies)))
    return errors


def _container_errors(container: dict, path: Path, container_names: set[str], port_names: set[str],
                      volume_names: set[str], *, check_image: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    name = container.get("name")
    if name == "":
        errors.append(_required((*path, "name")))
    elif isinstance(name, str):
        errors.extend(_name_errors((*path, "name"), name, dns1123_label_problems))
        if name in container_names:
            errors.append(FieldError(_join((*path, "name")), f"Duplicate value: {_show(name)}"))
        container_names.add(name)
    if check_image and not container.get("image"):
        errors.append(_required((*path, "image")))

    ports = container.get("ports")
    for j, port in enumerate(ports if isinstance(ports, list) else ()):
        if not isinstance(port, dict):
            continue
        where = (*path, "ports", j)
        errors.extend(_port_number_errors((*where, "containerPort"), port.get("containerPort")))
        errors.extend(_port_number_errors((*where, "hostPort"), port.get("hostPort"), zero_ok=True))
        protocol = port.get("protocol")
        if isinstance(protocol, str) and protocol not in _PROTOCOLS:
            errors.append(_unsupported((*where, "protocol"), protocol, _PROTOCOLS))
        port_name = port.get("name")
        if isinstance(port_name, str) and port_name:
            errors.extend(_name_errors((*where, "name"), port_name, _port_name_problems))
            if port_name in port_names:
                errors.append(FieldError(_join((*where, "name")), f"Duplicate value: {_show(port_name)}"))
            port_names.add(port_name)

    mounts = container.get("volumeMounts")
    for j, mount in enumerate(mounts if isinstance(mounts, list) else ()):
        mount_name = _get(mount, "name")
        if isinstance(mount_name, str) and mount_name not in volume_names:
            errors.append(FieldError(_join((*path, "volumeMounts", j, "name")), f"Not found: {_show(mount_name)}"))

    resources = container.get("resources")
    if isinstance(resources, dict):
        errors.extend(_resources_errors(resources, (*path, "resources")))
    return errors


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _resources_errors(resources: dict, path: Path) -> list[FieldError]:
    errors: list[FieldError] = []
    limits = resources.get("limits") if isinstance(resources.get("limits"), dict) else {}
    requests = resources.get("requests") if isinstance(resources.get("requests"), dict) else {}
    for field, values in (("limits", limits), ("requests", requests)):
        for name, value in values.items():
            maybe_negative = value.startswith("-") if isinstance(value, str) else _is_number(value) and value < 0
            if maybe_negative and is_quantity(value) and parse_quantity(value) < 0:
                errors.append(_invalid((*path, field, name), value, "must be greater than or equal to 0"))
    for name, request in requests.items():
        limit = limits.get(name)
        if limit is None or request is None or request == limit or not (is_quantity(request) and is_quantity(limit)):
            continue
        if parse_quantity(request) > parse_quantity(limit):
            errors.append(_invalid((*path, "requests"), request,
                                   f"must be less than or equal to {name} limit of {limit}"))
    return errors


def _non_negative(obj: dict, *keys: str) -> list[FieldError]:
    value = _get(obj, *keys)
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [_invalid(keys, value, "must be greater than or equal to 0")]
    return []


def _workload_errors(obj: dict, *, selector_required: bool, restart_policies: tuple[str, ...],
                     restart_required: bool = False) -> list[FieldError]:
    """Deployment, ReplicaSet, DaemonSet, Job: selector vs template, and the template's pod spec."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    errors = _non_negative(obj, "spec", "replicas")
    selector = spec.get("selector")
    template_labels = _get(spec, "template", "metadata", "labels")
    errors.extend(_labels_errors(("spec", "template", "metadata", "labels"), template_labels))
    if selector is None:
        if selector_required:
            errors.append(_required(("spec", "selector")))
    elif isinstance(selector, dict):
        errors.extend(_selector_errors(("spec", "selector"), selector))
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            errors.append(_invalid(("spec", "selector"), selector,
                                   f"empty selector is invalid for {obj.get('kind', 'object').lower()}"))
        elif isinstance(spec.get("template"), dict):
            labels = template_labels if isinstance(template_labels, dict) else {}
            if not _selector_matches(selector, labels):
                errors.append(FieldError("spec.template.metadata.labels",
                                         f"Invalid value: {json.dumps(labels, sort_keys=True)}: "
                                         "selector does not match template labels"))
    errors.extend(_pod_spec_errors(_get(spec, "template", "spec"), ("spec", "template", "spec"),
                                   restart_policies=restart_policies, restart_required=restart_required))
    return errors


def _int_or_percent_errors(path: Path, value: Any) -> list[FieldError]:
    if isinstance(value, str) and not _PERCENT.fullmatch(value):
        return [_invalid(path, value, "a valid percent string must be a numeric string followed by an "
                                      "ending '%' (e.g. '1%', or '93%')")]
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [_invalid(path, value, "must be greater than or equal to 0")]
    return []


def _is_zero(value: Any) -> bool:
    return value == 0 or value == "0%"


def _deployment_errors(obj: dict) -> list[FieldError]:
    errors = _workload_errors(obj, selector_required=True, restart_policies=("Always",))
    strategy = _get(obj, "spec", "strategy")
    if not isinstance(strategy, dict):
        return errors
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    if isinstance(kind, str) and kind not in ("Recreate", "RollingUpdate"):
        errors.append(_unsupported(("spec", "strategy", "type"), kind, ("Recreate", "RollingUpdate")))
    if kind == "Recreate" and rolling is not None:
        errors.append(FieldError("spec.strategy.rollingUpdate",
                                 "Forbidden: may not be specified when strategy `type` is 'Recreate'"))
    if isinstance(rolling, dict):
        path = ("spec", "strategy", "rollingUpdate")
        surge, unavailable = rolling.get("maxSurge"), rolling.get("maxUnavailable")
        errors.extend(_int_or_percent_errors((*path, "maxSurge"), surge))
        errors.extend(_int_or_percent_errors((*path, "maxUnavailable"), unavailable))
        if isinstance(unavailable, str) and _PERCENT.fullmatch(unavailable) and int(unavailable[:-1]) > 100:
            errors.append(_invalid((*path, "maxUnavailable"), unavailable, "must not be greater than 100%"))
        if _is_zero(surge) and _is_zero(unavailable):
            errors.append(_invalid((*path, "maxUnavailable"), unavailable, "may not be 0 when `maxSurge` is 0"))
    return errors


def _replicaset_errors(obj: dict) -> list[FieldError]:
    return _workload_errors(obj, selector_required=True, restart_policies=("Always",))


def _daemonset_errors(obj: dict) -> list[FieldError]:
    errors = _workload_errors(obj, selector_required=True, restart_policies=("Always",))
    kind = _get(obj, "spec", "updateStrategy", "type")
    if isinstance(kind, str) and kind not in ("OnDelete", "RollingUpdate"):
        errors.append(_unsupported(("spec", "updateStrategy", "type"), kind, ("OnDelete", "RollingUpdate")))
    return errors


_JOB_RESTART = ("OnFailure", "Never")


def _job_spec_errors(spec: Any, path: Path) -> list[FieldError]:
    if not isinstance(spec, dict):
        return []
    errors = []
    for field in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        value = spec.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            errors.append(_invalid((*path, field), value, "must be greater than or equal to 0"))
    errors.extend(_pod_spec_errors(_get(spec, "template", "spec"), (*path, "template", "spec"),
                                   restart_policies=_JOB_RESTART, restart_required=True))
    labels = _get(spec, "template", "metadata", "labels")
    errors.extend(_labels_errors((*path, "template", "metadata", "labels"), labels))
    return errors


def _job_errors(obj: dict) -> list[FieldError]:
    errors = _job_spec_errors(obj.get("spec"), ("spec",))
    spec = obj.get("spec")
    selector = _get(spec, "selector")
    if isinstance(selector, dict):
        errors.extend(_selector_errors(("spec", "selector"), selector))
        labels = _get(spec, "template", "metadata", "labels")
        if not _selector_matches(selector, labels if isinstance(labels, dict) else {}):
            errors.append(FieldError("spec.template.metadata.labels",
                                     f"Invalid value: {json.dumps(labels or {}, sort_keys=True)}: "
                                     "selector does not match template labels"))
    return errors


_CRON_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_CRON_FIELD = re.compile(r"[0-9A-Za-z*?,/\-]+")


def _cronjob_errors(obj: dict) -> list[FieldError]:
    errors: list[FieldError] = []
    name = _get(obj, "metadata", "name")
    if isinstance(name, str) and len(name) > 52:
        errors.append(_invalid(("metadata", "name"), name, "must be no more than 52 characters"))
    schedule = _get(obj, "spec", "schedule")
    if isinstance(schedule, str):
        text = schedule.strip()
        if text.startswith(("TZ=", "CRON_TZ=")):
            text = text.split(None, 1)[1] if " " in text else ""
        fields = text.split()
        valid = (text in _CRON_MACROS or text.startswith("@every ")
                 or (len(fields) == 5 and all(_CRON_FIELD.fullmatch(f) for f in fields)))
        if not valid:
            errors.append(_invalid(("spec", "schedule"), schedule,
                                   "must be a cron schedule of 5 fields (minute hour day-of-month month "
                                   "day-of-week, e.g. '*/5 * * * *') or a macro such as @hourly"))
    policy = _get(obj, "spec", "concurrencyPolicy")
    if isinstance(policy, str) and policy not in ("Allow", "Forbid", "Replace"):
        errors.append(_unsupported(("spec", "concurrencyPolicy"), policy, ("Allow", "Forbid", "Replace")))
    errors.extend(_job_spec_errors(_get(obj, "spec", "jobTemplate", "spec"), ("spec", "jobTemplate", "spec")))
    return errors


def _pod_errors(obj: dict) -> list[FieldError]:
    return _pod_spec_errors(obj.get("spec"), ("spec",))


_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")


def _service_errors(obj: dict) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    errors = _labels_errors(("spec", "selector"), spec.get("selector"))
    kind = spec.get("type")
    if isinstance(kind, str) and kind not in _SERVICE_TYPES:
        errors.append(_unsupported(("spec", "type"), kind, _SERVICE_TYPES))
    ports = spec.get("ports") if isinstance(spec.get("ports"), list) else []
    names: set[str] = set()
    for i, port in enumerate(ports):
        if not isinstance(port, dict):
            continue
        path = ("spec", "ports", i)
        errors.extend(_port_number_errors((*path, "port"), port.get("port")))
        errors.extend(_port_number_errors((*path, "nodePort"), port.get("nodePort"), zero_ok=True))
        target = port.get("targetPort")
        if isinstance(target, str):
            errors.extend(_name_errors((*path, "targetPort"), target, _port_name_problems))
        else:
            errors.extend(_port_number_errors((*path, "targetPort"), target, zero_ok=True))
        protocol = port.get("protocol")
        if isinstance(protocol, str) and protocol not in _PROTOCOLS:
            errors.append(_unsupported((*path, "protocol"), protocol, _PROTOCOLS))
        name = port.get("name")
        if isinstance(name, str) and name:
            errors.extend(_name_errors((*path, "name"), name, dns1123_label_problems))
            if name in names:
                errors.append(FieldError(_join((*path, "name")), f"Duplicate value: {_show(name)}"))
            names.add(name)
        elif len(ports) > 1:
            errors.append(_required((*path, "name")))
    return errors


def _config_key_errors(obj: dict, *, base64_data: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: dict[str, str] = {}
    for field in ("data", "binaryData", "stringData"):
        values = obj.get(field)
        for key, value in (values.items() if isinstance(values, dict) else ()):
            if not isinstance(key, str):
                continue
            path = (field, key)
            if len(key) > 253:
                errors.append(_invalid(path, key, "must be no more than 253 characters"))
            if not _CONFIG_KEY.fullmatch(key):
                errors.append(_invalid(path, key, "a valid config key must consist of alphanumeric characters, "
                                                  "'-', '_' or '.' (e.g. 'key.name', or 'KEY_NAME', or 'key-name')"))
            if field != "stringData":
                if key in seen:
                    errors.append(_invalid(path, key, f"duplicate of key present in {seen[key]}"))
                seen[key] = field
            encoded = field == "binaryData" or (field == "data" and base64_data)
            if encoded and isinstance(value, str):
                try:
                    base64.b64decode(value.replace("\n", "").replace("\r", ""), validate=True)
                except (binascii.Error, ValueError):
                    errors.append(FieldError(_join(path), 'Invalid value: "<data>": must be base64-encoded'))
    return errors


def _configmap_errors(obj: dict) -> list[FieldError]:
    return _config_key_errors(obj, base64_data=False)


def _secret_errors(obj: dict) -> list[FieldError]:
    return _config_key_errors(obj, base64_data=True)


def _hook_errors(obj: dict) -> list[FieldError]:
    errors: list[FieldError] = []
    for field in ("namespaceSelector", "objectSelector"):
        errors.extend(_selector_errors(("spec", field), _get(obj, "spec", field)))
    return errors


def _crd_errors(obj: dict) -> list[FieldError]:
    return validate_crd(obj)


_KIND_CHECKS: dict[str, tuple[Callable[[dict], list[FieldError]], ...]] = {
    "Pod": (_pod_errors,),
    "Service": (_service_errors,),
    "ConfigMap": (_configmap_errors,),
    "Secret": (_secret_errors,),
    "Deployment.apps": (_deployment_errors,),
    "ReplicaSet.apps": (_replicaset_errors,),
    "DaemonSet.apps": (_daemonset_errors,),
    "Job.batch": (_job_errors,),
    "CronJob.batch": (_cronjob_errors,),
    "CustomResourceDefinition.apiextensions.k8s.io": (_crd_errors,),
    "MutatingAdmissionHook.kctl.io": (_hook_errors,),
    "ValidatingAdmissionHook.kctl.io": (_hook_errors,),
}


# ---------------------------------------------------------------------------------------
# CustomResourceDefinitions


def crd_resource_types(crd: dict) -> list[ResourceType]:
    """The kinds a stored apiextensions.k8s.io/v1 CRD serves: one ResourceType per served version.

    Each carries its version's openAPIV3Schema converted to JSON Schema (`crd_schema`).
    Expects a CRD that passed `validate`; fields it lacks are taken as empty.
    """
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, kind, plural = spec.get("group", ""), names.get("kind", ""), names.get("plural", "")
    types = []
    for version in spec.get("versions") or ():
        if not version.get("served"):
            continue
        openapi = _get(version, "schema", "openAPIV3Schema")
        api_version = f"{group}/{version['name']}" if group else version["name"]
        types.append(ResourceType(
            group=group, version=version["name"], kind=kind, plural=plural,
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            crd_schema=schemas.crd_schema(openapi, api_version=api_version, kind=kind),
            has_status=_get(version, "subresources", "status") is not None,
        ))
    return types


def validate_crd(crd: dict) -> list[FieldError]:
    """What Kubernetes checks in a CRD beyond its schema: names, versions, storage, schemas."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return []
    errors: list[FieldError] = []
    group = spec.get("group")
    if isinstance(group, str):
        errors.extend(_name_errors(("spec", "group"), group, dns1123_subdomain_problems))
        if "." not in group:
            errors.append(_invalid(("spec", "group"), group, "should be a domain with at least one dot"))
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    plural = names.get("plural")
    for field in ("plural", "singular"):
        if isinstance(names.get(field), str) and names[field]:
            errors.extend(_name_errors(("spec", "names", field), names[field], dns1123_label_problems))
    kind = names.get("kind")
    if isinstance(kind, str) and kind and not _DNS1035_LABEL.fullmatch(kind.lower()):
        errors.append(_invalid(("spec", "names", "kind"), kind,
                               "must start with a letter and consist of letters, digits or '-'"))
    short_names = names.get("shortNames")
    for i, short in enumerate(short_names if isinstance(short_names, list) else ()):
        if isinstance(short, str):
            errors.extend(_name_errors(("spec", "names", "shortNames", i), short, dns1123_label_problems))
    name = _get(crd, "metadata", "name")
    if isinstance(plural, str) and isinstance(group, str) and name != f"{plural}.{group}":
        errors.append(_invalid(("metadata", "name"), name, 'must be spec.names.plural+"."+spec.group'))
    scope = spec.get("scope")
    if isinstance(scope, str) and scope not in ("Cluster", "Namespaced"):
        errors.append(_unsupported(("spec", "scope"), scope, ("Cluster", "Namespaced")))
    versions = spec.get("versions")
    if not isinstance(versions, list):
        return errors
    if not versions:
        errors.append(_required(("spec", "versions"), "must have at least one version"))
        return errors
    storage = [v for v in versions if isinstance(v, dict) and v.get("storage") is True]
    if len(storage) != 1:
        errors.append(FieldError("spec.versions", f"Invalid value: {len(storage)} storage versions: "
                                                  "must have exactly one version marked as storage version"))
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if not isinstance(version, dict):
            continue
        path = ("spec", "versions", i)
        version_name = version.get("name")
        if isinstance(version_name, str):
            errors.extend(_name_errors((*path, "name"), version_name, dns1123_label_problems))
            if version_name in seen:
                errors.append(FieldError(_join((*path, "name")), f"Duplicate value: {_show(version_name)}"))
            seen.add(version_name)
        openapi = _get(version, "schema", "openAPIV3Schema")
        if not isinstance(openapi, dict) or not openapi:
            errors.append(_required((*path, "schema", "openAPIV3Schema"), "schemas are required"))
            continue
        errors.extend(_openapi_schema_errors(openapi, (*path, "schema", "openAPIV3Schema"),
                                             f"{group}/{version_name}", str(kind)))
    return errors


def _openapi_schema_errors(openapi: dict, path: Path, api_version: str, kind: str) -> list[FieldError]:
    if openapi.get("type") != "object":
        return [_required((*path, "type"), 'must be "object" at the root')]
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    converted = schemas.crd_schema(openapi, api_version=api_version, kind=kind)
    try:
        Draft202012Validator.check_schema({k: v for k, v in converted.items() if k != "$defs"})
    except SchemaError as error:
        where = (*path, *error.absolute_path)
        return [_invalid(where, error.instance, "not a valid schema: " + error.message)]
    return []
