"""Label and field selectors, as k8s.io/apimachinery `pkg/labels` and `pkg/fields` have them.

The API layer (kctl.apiserver.server) parses `-l`/`--field-selector` once per list or watch
request and calls `matches` on every object; controllers turn a workload's
`spec.selector` (a metav1.LabelSelector object) into a `LabelSelector` with
`from_label_selector_object`. Parsing validates everything up front and compiles each
requirement into a small predicate, so matching is a few dict look-ups per object.

Bad selector text raises `BadRequest`; a bad selector object raises `Invalid` naming the
field path, as the API server's validation does.
"""

from __future__ import annotations

import dataclasses
import json
import re
from enum import StrEnum
from typing import Callable, NamedTuple

from kctl.machinery.errors import BadRequest, FieldError, Invalid

__all__ = [
    "EVERYTHING", "NOTHING", "FieldSelector", "FieldTerm", "LabelSelector", "Operator",
    "Requirement", "from_label_selector_object", "parse_field_selector",
    "parse_label_selector", "supported_field_labels",
]


class Operator(StrEnum):
    """A selector operator, spelled as k8s.io/apimachinery/pkg/selection spells it."""

    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


# ---------------------------------------------------------------------------------------
# Label key and value validation (apimachinery/pkg/util/validation)

_NAME_MAX = 63
_PREFIX_MAX = 253
_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
             "with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc')")
_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
              "'-', '_' or '.', and must start and end with an alphanumeric character "
              "(e.g. 'MyValue', or 'my_value', or '12345')")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                  "characters, '-' or '.', and must start and end with an alphanumeric "
                  "character (e.g. 'example.com')")


def _label_key_errors(key: str) -> list[str]:
    """Why `key` is not a label key (IsQualifiedName); empty when it is one."""
    parts = key.split("/")
    if len(parts) > 2:
        return [f"a qualified name {_NAME_MSG} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    errors = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > _PREFIX_MAX:
            errors.append(f"prefix part must be no more than {_PREFIX_MAX} characters")
        elif not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
            errors.append(f"prefix part {_SUBDOMAIN_MSG}")
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > _NAME_MAX:
        errors.append(f"name part must be no more than {_NAME_MAX} characters")
    elif not _NAME_RE.fullmatch(name):
        errors.append(f"name part {_NAME_MSG}")
    return errors


def _label_value_errors(value: str) -> list[str]:
    """Why `value` is not a label value (IsValidLabelValue); empty when it is one."""
    if len(value) > _NAME_MAX:
        return [f"must be no more than {_NAME_MAX} characters"]
    if not _VALUE_RE.fullmatch(value):
        return [_VALUE_MSG]
    return []


_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def _parse_int64(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64): the integer, or None if it is not one."""
    if not _INT_RE.fullmatch(text):
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def _quote(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


# ---------------------------------------------------------------------------------------
# Label selectors

_LabelMatcher = Callable[[dict], bool]


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One `key op values` term of a label selector; `values` are kept sorted and unique.

    Build requirements with `parse_label_selector` or `from_label_selector_object`, which
    validate them; this class does not.
    """

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "operator", Operator(self.operator))
        object.__setattr__(self, "values", tuple(sorted(set(self.values))))

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        joined = ",".join(self.values)
        if op is Operator.IN or op is Operator.NOT_IN:
            return f"{self.key} {op.value} ({joined})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{joined}"

    def compile(self) -> _LabelMatcher:
        """A predicate over a labels dict that is true when this requirement holds."""
        key, op, values = self.key, self.operator, self.values
        if op in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN):
            if len(values) == 1:
                value = values[0]
                return lambda labels: labels.get(key) == value
            allowed = frozenset(values)
            return lambda labels: labels.get(key) in allowed
        if op in (Operator.NOT_EQUALS, Operator.NOT_IN):
            # A missing key (None) is never among the values: NotIn matches it, as in k8s.
            if len(values) == 1:
                value = values[0]
                return lambda labels: labels.get(key) != value
            denied = frozenset(values)
            return lambda labels: labels.get(key) not in denied
        if op is Operator.EXISTS:
            return lambda labels: key in labels
        if op is Operator.DOES_NOT_EXIST:
            return lambda labels: key not in labels
        bound = _parse_int64(values[0]) if len(values) == 1 else None
        if bound is None:
            return lambda labels: False
        greater = op is Operator.GREATER_THAN

        def compare(labels: dict) -> bool:
            raw = labels.get(key)
            number = _parse_int64(raw) if isinstance(raw, str) else None
            if number is None:
                return False
            return number > bound if greater else number < bound

        return compare


@dataclasses.dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector: the AND of its requirements (sorted by key, as k8s sorts them).

    `LabelSelector()` selects everything (`is_empty`); `match_nothing=True` is
    k8s's `labels.Nothing()`, which a nil metav1.LabelSelector becomes. Like k8s, both
    print as the empty string.
    """

    requirements: tuple[Requirement, ...] = ()
    match_nothing: bool = False
    _matchers: tuple[_LabelMatcher, ...] = dataclasses.field(
        default=(), init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.requirements, key=lambda r: r.key))
        object.__setattr__(self, "requirements", ordered)
        object.__setattr__(self, "_matchers", tuple(r.compile() for r in ordered))

    @property
    def is_empty(self) -> bool:
        """True when the selector has no requirements and so matches every set of labels."""
        return not self.requirements and not self.match_nothing

    def matches(self, labels: dict[str, str] | None) -> bool:
        """Whether `labels` (None counts as no labels) satisfy every requirement."""
        if self.match_nothing:
            return False
        if labels is None:
            labels = {}
        for matcher in self._matchers:
            if not matcher(labels):
                return False
        return True

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


#: Selects every object (k8s `labels.Everything()`; the parse of "").
EVERYTHING = LabelSelector()
#: Selects no object (k8s `labels.Nothing()`; what a nil selector object becomes).
NOTHING = LabelSelector(match_nothing=True)


class _Tok(StrEnum):
    IDENTIFIER = "identifier"
    END = "end of string"
    OPEN = "("
    CLOSE = ")"
    COMMA = ","
    NOT = "!"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    GREATER = ">"
    LESS = "<"
    IN = "in"
    NOT_IN = "notin"


class _Item(NamedTuple):
    tok: _Tok
    literal: str
    pos: int


_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),<>")
_SYMBOLS = {"(": _Tok.OPEN, ")": _Tok.CLOSE, ",": _Tok.COMMA, "!": _Tok.NOT,
            "=": _Tok.EQUALS, "==": _Tok.DOUBLE_EQUALS, "!=": _Tok.NOT_EQUALS,
            ">": _Tok.GREATER, "<": _Tok.LESS}
_KEYWORDS = {"in": _Tok.IN, "notin": _Tok.NOT_IN}
_BINARY_OPERATORS = {_Tok.IN: Operator.IN, _Tok.NOT_IN: Operator.NOT_IN,
                     _Tok.EQUALS: Operator.EQUALS, _Tok.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
                     _Tok.NOT_EQUALS: Operator.NOT_EQUALS, _Tok.GREATER: Operator.GREATER_THAN,
                     _Tok.LESS: Operator.LESS_THAN}


def _lex(text: str) -> list[_Item]:
    """Split selector text into tokens, as labels.Lexer does (symbols are matched greedily)."""
    items: list[_Item] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            items.append(_Item(_Tok.END, "", n))
            return items
        start = i
        if text[i] in _SPECIAL:
            symbol = text[i]
            i += 1
            while i < n and text[i] in _SPECIAL and symbol + text[i] in _SYMBOLS:
                symbol += text[i]
                i += 1
            items.append(_Item(_SYMBOLS[symbol], symbol, start))
        else:
            while i < n and text[i] not in _WHITESPACE and text[i] not in _SPECIAL:
                i += 1
            word = text[start:i]
            items.append(_Item(_KEYWORDS.get(word, _Tok.IDENTIFIER), word, start))


class _SyntaxError(Exception):
    """A problem in selector text; the message already names the position."""


def _found(item: _Item) -> str:
    if item.tok is _Tok.END:
        return "found end of string"
    return f"found '{item.literal}' at column {item.pos + 1}"


class _LabelParser:
    """labels.Parser: a recursive-descent parser over the token list."""

    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    def lookahead(self, values: bool) -> _Item:
        """The next token; where a value may stand, the keywords in/notin are identifiers."""
        item = self.items[self.position]
        if values and item.tok in (_Tok.IN, _Tok.NOT_IN):
            return item._replace(tok=_Tok.IDENTIFIER)
        return item

    def consume(self, values: bool) -> _Item:
        item = self.lookahead(values)
        if item.tok is not _Tok.END:
            self.position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            item = self.lookahead(values=True)
            if item.tok in (_Tok.IDENTIFIER, _Tok.NOT):
                try:
                    requirements.append(self.parse_requirement())
                except _SyntaxError as e:
                    raise _SyntaxError(f"unable to parse requirement: {e}") from None
                after = self.consume(values=True)
                if after.tok is _Tok.END:
                    return requirements
                if after.tok is not _Tok.COMMA:
                    raise _SyntaxError(f"{_found(after)}, expected: ',' or 'end of string'")
                following = self.lookahead(values=True)
                if following.tok not in (_Tok.IDENTIFIER, _Tok.NOT):
                    raise _SyntaxError(f"{_found(following)}, expected: identifier after ','")
            elif item.tok is _Tok.END:
                return requirements
            else:
                raise _SyntaxError(f"{_found(item)}, expected: !, identifier, or 'end of string'")

    def parse_requirement(self) -> Requirement:
        key, operator = self.parse_key_and_infer_operator()
        if operator is not None:
            return Requirement(key, operator)
        operator = self.parse_operator()
        if operator in (Operator.IN, Operator.NOT_IN):
            values = self.parse_values()
        else:
            values = [self.parse_exact_value()]
        for value in values:
            problems = _label_value_errors(value.literal)
            if operator in (Operator.GREATER_THAN, Operator.LESS_THAN):
                if _parse_int64(value.literal) is None:
                    problems = ["for '>' and '<' the value must be an integer", *problems]
            if problems:
                raise _SyntaxError(f"invalid value {_quote(value.literal)} at column "
                                   f"{value.pos + 1}: " + "; ".join(problems))
        return Requirement(key, operator, tuple(v.literal for v in values))

    def parse_key_and_infer_operator(self) -> tuple[str, Operator | None]:
        """The key, and Exists/DoesNotExist when the requirement is a bare `key` or `!key`."""
        operator = None
        item = self.consume(values=True)
        if item.tok is _Tok.NOT:
            operator = Operator.DOES_NOT_EXIST
            item = self.consume(values=True)
        if item.tok is not _Tok.IDENTIFIER:
            raise _SyntaxError(f"{_found(item)}, expected: identifier")
        problems = _label_key_errors(item.literal)
        if problems:
            raise _SyntaxError(f"invalid label key {_quote(item.literal)} at column "
                               f"{item.pos + 1}: " + "; ".join(problems))
        if operator is None and self.lookahead(values=True).tok in (_Tok.END, _Tok.COMMA):
            operator = Operator.EXISTS
        return item.literal, operator

    def parse_operator(self) -> Operator:
        item = self.consume(values=False)
        operator = _BINARY_OPERATORS.get(item.tok)
        if operator is None:
            raise _SyntaxError(f"{_found(item)}, expected: one of in, notin, =, ==, !=, >, <")
        return operator

    def parse_values(self) -> list[_Item]:
        """A parenthesised, comma-separated value list; empty slots are the value ""."""
        item = self.consume(values=True)
        if item.tok is not _Tok.OPEN:
            raise _SyntaxError(f"{_found(item)}, expected: '('")
        item = self.lookahead(values=True)
        if item.tok is _Tok.CLOSE:  # "()"
            self.consume(values=True)
            return [_Item(_Tok.IDENTIFIER, "", item.pos)]
        if item.tok not in (_Tok.IDENTIFIER, _Tok.COMMA):
            raise _SyntaxError(f"{_found(item)}, expected: ',', ')' or identifier")
        values = self.parse_identifiers_list()
        self.consume(values=True)  # the ')' that ended the list
        return values

    def parse_identifiers_list(self) -> list[_Item]:
        values: list[_Item] = []
        while True:
            item = self.consume(values=True)
            if item.tok is _Tok.IDENTIFIER:
                values.append(item)
                following = self.lookahead(values=True)
                if following.tok is _Tok.CLOSE:
                    return values
                if following.tok is not _Tok.COMMA:
                    raise _SyntaxError(f"{_found(following)}, expected: ',' or ')'")
            elif item.tok is _Tok.COMMA:
                empty = _Item(_Tok.IDENTIFIER, "", item.pos)
                if not values:  # "(,"
                    values.append(empty)
                following = self.lookahead(values=True)
                if following.tok is _Tok.CLOSE:  # ",)"
                    values.append(empty)
                    return values
                if following.tok is _Tok.COMMA:  # ",,"
                    self.consume(values=True)
                    values.append(empty)
            else:
                raise _SyntaxError(f"{_found(item)}, expected: ',', or identifier")

    def parse_exact_value(self) -> _Item:
        item = self.lookahead(values=True)
        if item.tok in (_Tok.END, _Tok.COMMA):  # "a=" selects the empty value
            return _Item(_Tok.IDENTIFIER, "", item.pos)
        item = self.consume(values=True)
        if item.tok is not _Tok.IDENTIFIER:
            raise _SyntaxError(f"{_found(item)}, expected: identifier")
        return item


def parse_label_selector(text: str) -> LabelSelector:
    """Parse `-l` text (`app=web,tier in (a,b),!canary,rev>3`) as labels.Parse does.

    Requirements are comma-separated and ANDed; whitespace between tokens is ignored;
    "" selects everything. Raises BadRequest naming the problem and its column.
    """
    try:
        requirements = _LabelParser(text).parse()
    except _SyntaxError as e:
        raise BadRequest(f"invalid label selector {_quote(text)}: {e}") from None
    return LabelSelector(tuple(requirements))


_SELECTOR_OPERATORS = {"In": Operator.IN, "NotIn": Operator.NOT_IN,
                       "Exists": Operator.EXISTS, "DoesNotExist": Operator.DOES_NOT_EXIST}


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def from_label_selector_object(obj: dict | None, *, path: str = "spec.selector",
                               what: str = "label selector") -> LabelSelector:
    """The selector a metav1.LabelSelector object stands for (LabelSelectorAsSelector).

    As in Kubernetes, None (a nil selector) selects NOTHING, while `{}` (or one with no
    matchLabels and no matchExpressions) selects EVERYTHING. matchLabels become `key=value`
    requirements; matchExpressions use operator In, NotIn, Exists or DoesNotExist.

    Raises Invalid (message starting with `what`) listing every problem with its field path
    under `path`, e.g. `spec.selector.matchExpressions[0].values: Required value: ...`.
    """
    if obj is None:
        return NOTHING
    if not isinstance(obj, dict):
        raise Invalid(what, FieldError(path, f"Invalid value: {_quote(str(obj))}: must be an object"))
    errors: list[FieldError] = []
    requirements: list[Requirement] = []

    labels_path = _child(path, "matchLabels")
    match_labels = obj.get("matchLabels") or {}
    if not isinstance(match_labels, dict):
        errors.append(FieldError(labels_path, "Invalid value: must be an object of label key to value"))
        match_labels = {}
    for key, value in match_labels.items():
        problems = _label_key_errors(key) if isinstance(key, str) else ["must be a string"]
        errors.extend(FieldError(labels_path, f"Invalid value: {_quote(key)}: {p}") for p in problems)
        if not isinstance(value, str):
            errors.append(FieldError(_child(labels_path, str(key)),
                                     f"Invalid value: {_quote(value)}: must be a string"))
            continue
        errors.extend(FieldError(labels_path, f"Invalid value: {_quote(value)}: {p}")
                      for p in _label_value_errors(value))
        requirements.append(Requirement(str(key), Operator.EQUALS, (value,)))

    expressions_path = _child(path, "matchExpressions")
    expressions = obj.get("matchExpressions") or []
    if not isinstance(expressions, list):
        errors.append(FieldError(expressions_path, "Invalid value: must be a list"))
        expressions = []
    for index, expression in enumerate(expressions):
        errors_before = len(errors)
        at = f"{expressions_path}[{index}]"
        if not isinstance(expression, dict):
            errors.append(FieldError(at, "Invalid value: must be an object with key, operator and values"))
            continue
        key, operator_name = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            errors.append(FieldError(_child(at, "values"), "Invalid value: must be a list of strings"))
            values = []
        operator = _SELECTOR_OPERATORS.get(operator_name) if isinstance(operator_name, str) else None
        if operator_name in (None, ""):
            errors.append(FieldError(_child(at, "operator"), "Required value"))
        elif operator is None:
            supported = ", ".join(_quote(o) for o in _SELECTOR_OPERATORS)
            errors.append(FieldError(_child(at, "operator"), f"Unsupported value: {_quote(operator_name)}: "
                                     f"supported values: {supported}"))
        elif operator in (Operator.IN, Operator.NOT_IN) and not values:
            errors.append(FieldError(_child(at, "values"),
                                     "Required value: must be specified when operator is In or NotIn"))
        elif operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
            errors.append(FieldError(_child(at, "values"),
                                     "Forbidden: may not be specified when operator is Exists or DoesNotExist"))
        if not isinstance(key, str) or not key:
            errors.append(FieldError(_child(at, "key"), "Required value"))
        else:
            errors.extend(FieldError(_child(at, "key"), f"Invalid value: {_quote(key)}: {p}")
                          for p in _label_key_errors(key))
        for value_index, value in enumerate(values):
            errors.extend(FieldError(f"{at}.values[{value_index}]", f"Invalid value: {_quote(value)}: {p}")
                          for p in _label_value_errors(value))
        if len(errors) == errors_before and operator is not None:
            requirements.append(Requirement(key, operator, tuple(values)))

    if errors:
        raise Invalid(what, errors)
    return LabelSelector(tuple(requirements))


# ---------------------------------------------------------------------------------------
# Field selectors

_FieldGetter = Callable[[dict], str]


def _scalar(value: object, default: str) -> str:
    if value is None:
        return default
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def _path_getter(path: str, default: str = "") -> _FieldGetter:
    """Read the dotted `path` of an object as a string; a missing value reads as `default`."""
    parts = tuple(path.split("."))

    def get(obj: dict) -> str:
        current: object = obj
        for part in parts:
            if not isinstance(current, dict):
                return default
            current = current.get(part)
        return _scalar(current, default)

    return get


def _first_of(*getters: _FieldGetter) -> _FieldGetter:
    def get(obj: dict) -> str:
        for getter in getters:
            value = getter(obj)
            if value:
                return value
        return ""

    return get


def _first_pod_ip(obj: dict) -> str:
    pod_ips = (obj.get("status") or {}).get("podIPs") or []
    first = pod_ips[0] if pod_ips and isinstance(pod_ips[0], dict) else {}
    return _scalar(first.get("ip"), "")


#: How each selectable field reads from an object, where that differs from its dotted
#: path. Go booleans and integers read "false"/"0" when unset, as in Kubernetes.
_SPECIAL_GETTERS: dict[str, _FieldGetter] = {
    "spec.hostNetwork": _path_getter("spec.hostNetwork", "false"),
    "spec.unschedulable": _path_getter("spec.unschedulable", "false"),
    "status.podIP": _first_of(_path_getter("status.podIP"), _first_pod_ip),
    "status.replicas": _path_getter("status.replicas", "0"),
    "status.successful": _path_getter("status.succeeded", "0"),
    "source": _first_of(_path_getter("source.component"), _path_getter("reportingComponent")),
}

_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
#: The field labels each kind's API accepts beyond metadata.name and metadata.namespace
#: (the field label conversion functions in k8s.io/kubernetes pkg/apis/*/v1).
_KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
            "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
            "status.nominatedNodeName"),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
              "involvedObject.uid", "involvedObject.apiVersion",
              "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
              "reportingComponent", "source", "type"),
    "Node": ("spec.unschedulable",),
    "Namespace": ("status.phase",),
    "Secret": ("type",),
    "ReplicaSet": ("status.replicas",),
    "ReplicationController": ("status.replicas",),
    "Job": ("status.successful",),
}


def supported_field_labels(kind: str | None) -> tuple[str, ...]:
    """The field labels `parse_field_selector` accepts for `kind` (None: any kind)."""
    return _COMMON_FIELDS + _KIND_FIELDS.get(kind or "", ())


@dataclasses.dataclass(frozen=True)
class FieldTerm:
    """One `field=value` or `field!=value` term (`==` is read as `=`, as in k8s)."""

    field: str
    operator: Operator
    value: str

    def __post_init__(self) -> None:
        operator = Operator(self.operator)
        if operator is Operator.DOUBLE_EQUALS:
            operator = Operator.EQUALS
        if operator not in (Operator.EQUALS, Operator.NOT_EQUALS):
            raise ValueError(f"a field selector term cannot use operator {operator.value!r}")
        object.__setattr__(self, "operator", operator)

    def __str__(self) -> str:
        return f"{self.field}{self.operator.value}{_escape_field_value(self.value)}"


@dataclasses.dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector: the AND of its terms (kept in their canonical string order).

    A field missing from an object reads as "" (so `spec.nodeName=` selects unscheduled
    pods); boolean and integer fields read as Go prints them ("false", "0") when unset.
    Defaults such as a Pod's restartPolicy are not filled in here: admission does that.
    """

    terms: tuple[FieldTerm, ...] = ()
    _compiled: tuple[tuple[_FieldGetter, str, bool], ...] = dataclasses.field(
        default=(), init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.terms, key=str))
        object.__setattr__(self, "terms", ordered)
        object.__setattr__(self, "_compiled", tuple(
            (_SPECIAL_GETTERS.get(t.field) or _path_getter(t.field), t.value,
             t.operator is Operator.EQUALS) for t in ordered))

    @property
    def is_empty(self) -> bool:
        """True when the selector has no terms and so matches every object."""
        return not self.terms

    def matches(self, obj: dict) -> bool:
        """Whether every term holds for `obj`."""
        for get, value, equal in self._compiled:
            if (get(obj) == value) is not equal:
                return False
        return True

    def equality_value(self, field: str) -> str | None:
        """The value of the first `field=value` term (k8s RequiresExactMatch), else None."""
        for term in self.terms:
            if term.field == field and term.operator is Operator.EQUALS:
                return term.value
        return None

    def __str__(self) -> str:
        return ",".join(str(t) for t in self.terms)


def _escape_field_value(value: str) -> str:
    """fields.EscapeValue: backslash-escape `\\`, `,` and `=`."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(value: str) -> str:
    """fields.UnescapeValue; raises _SyntaxError on a bad escape or a bare `,` or `=`."""
    if not any(c in value for c in "\\,="):
        return value
    out: list[str] = []
    escaped = False
    for c in value:
        if escaped:
            if c not in "\\,=":
                raise _SyntaxError(f"invalid escape sequence: \\{c}")
            out.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",=":
            raise _SyntaxError(f"unescaped character in value: {c} (write \\{c})")
        else:
            out.append(c)
    if escaped:
        raise _SyntaxError("invalid escape sequence: \\ at end of value")
    return "".join(out)


def _split_field_terms(text: str) -> list[str]:
    """Split on commas that are not backslash-escaped (fields.splitTerms)."""
    terms: list[str] = []
    start, escaped = 0, False
    for i, c in enumerate(text):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_field_term(term: str) -> tuple[str, Operator, str] | None:
    """Split at the first operator: `!=`, then `==`, then `=` (fields.splitTerm)."""
    for i in range(len(term)):
        for symbol, operator in (("!=", Operator.NOT_EQUALS), ("==", Operator.EQUALS),
                                 ("=", Operator.EQUALS)):
            if term.startswith(symbol, i):
                return term[:i], operator, term[i + len(symbol):]
    return None


def parse_field_selector(text: str, *, kind: str | None = None) -> FieldSelector:
    """Parse `--field-selector` text (`status.phase=Running,spec.nodeName!=n1`).

    Terms are comma-separated and ANDed, each `field=value`, `field==value` or
    `field!=value`; empty terms are skipped and, as in Kubernetes, nothing is trimmed. A
    value may hold `\\,`, `\\=` and `\\\\`. Only the field labels Kubernetes supports for
    `kind` are accepted (`supported_field_labels`); with no kind, only metadata.name and
    metadata.namespace. Raises BadRequest.
    """
    allowed = supported_field_labels(kind)
    terms: list[FieldTerm] = []
    for part in _split_field_terms(text):
        if not part:
            continue
        split = _split_field_term(part)
        if split is None:
            raise BadRequest(f"invalid field selector {_quote(text)}: can't understand {_quote(part)} "
                             "(expected field=value, field==value or field!=value)")
        field, operator, raw = split
        try:
            value = _unescape_field_value(raw)
        except _SyntaxError as e:
            raise BadRequest(f"invalid field selector {_quote(text)}: {e}") from None
        if field not in allowed:
            supported = ", ".join(allowed)
            raise BadRequest(f"field label not supported: {field} "
                             f"({kind + ' supports' if kind else 'supported'}: {supported})")
        terms.append(FieldTerm(field, operator, value))
    return FieldSelector(tuple(terms))
