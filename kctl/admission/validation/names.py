"""Names, labels, annotations and label selectors as Kubernetes checks their syntax.

k8s.io/apimachinery/pkg/util/validation: DNS-1123 labels and subdomains, DNS-1035
labels, qualified names, label values, IANA port names. The per-kind checks (kinds.py,
podspec.py) and the CRD checks (crd.py) use them; `label_value_problems` is also used
by sync's inventory labels.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kctl.admission.validation.fields import Path, invalid_value, join_path, required_value, unsupported_value
from kctl.machinery.errors import FieldError


_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_IANA_SVC_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")

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


def path_segment_name_problems(value: str) -> list[str]:
    """What is wrong with `value` as a path segment name (RBAC kinds' names, which may hold ':')."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def dns1035_label_problems(value: str) -> list[str]:
    """What is wrong with `value` as a DNS-1035 label (Service names)."""
    problems = [] if len(value) <= 63 else ["must be no more than 63 characters"]
    if not DNS1035_LABEL.fullmatch(value):
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


def port_name_problems(value: str) -> list[str]:
    """What is wrong with `value` as an IANA service (port) name."""
    problems = [] if len(value) <= 15 else ["must be no more than 15 characters"]
    if not _IANA_SVC_NAME.fullmatch(value):
        problems.append("must contain only lowercase alphanumeric characters or '-', and start and end with "
                        "an alphanumeric character")
    if "--" in value:
        problems.append("must not contain consecutive hyphens")
    if not re.search(r"[a-z]", value):
        problems.append("must contain at least one letter (a-z)")
    return problems


def name_errors(path: Path, value: Any, check: Callable[[str], list[str]]) -> list[FieldError]:
    """An Invalid value error at `path` for each problem `check` finds in a string value."""
    if not isinstance(value, str):
        return []
    return [invalid_value(path, value, problem) for problem in check(value)]


def labels_errors(path: Path, labels: Any) -> list[FieldError]:
    """Label keys (qualified names) and values under `path`."""
    if not isinstance(labels, dict):
        return []
    errors = []
    for key, value in labels.items():
        if isinstance(key, str):
            errors.extend(invalid_value(path, key, p) for p in qualified_name_problems(key))
        if isinstance(value, str):
            errors.extend(invalid_value(path, value, p) for p in label_value_problems(value))
    return errors


def annotations_errors(path: Path, annotations: Any) -> list[FieldError]:
    """Annotation keys (qualified names) and the 256 KiB total size under `path`."""
    if not isinstance(annotations, dict):
        return []
    errors = []
    size = 0
    for key, value in annotations.items():
        if isinstance(key, str):
            errors.extend(invalid_value(path, key, p) for p in qualified_name_problems(key.lower()))
            size += len(key)
        if isinstance(value, str):
            size += len(value)
    if size > 256 * 1024:
        errors.append(FieldError(join_path(path), "Too long: must have at most 262144 bytes"))
    return errors


def selector_errors(path: Path, selector: Any) -> list[FieldError]:
    """A LabelSelector's matchLabels and matchExpressions (keys, operators, values)."""
    if not isinstance(selector, dict):
        return []
    errors = labels_errors((*path, "matchLabels"), selector.get("matchLabels"))
    expressions = selector.get("matchExpressions")
    for i, expression in enumerate(expressions if isinstance(expressions, list) else ()):
        if not isinstance(expression, dict):
            continue
        where = (*path, "matchExpressions", i)
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values")
        if isinstance(key, str):
            errors.extend(invalid_value((*where, "key"), key, p) for p in qualified_name_problems(key))
        if operator in ("In", "NotIn"):
            if not values:
                errors.append(required_value((*where, "values"),
                                             "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errors.append(FieldError(join_path((*where, "values")),
                                         "Forbidden: may not be specified when `operator` is 'Exists' or "
                                         "'DoesNotExist'"))
        elif isinstance(operator, str):
            errors.append(unsupported_value((*where, "operator"), operator, ("DoesNotExist", "Exists", "In", "NotIn")))
    return errors


def selector_matches(selector: dict, labels: dict) -> bool:
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
