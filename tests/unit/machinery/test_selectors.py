"""Label and field selectors behave as k8s.io/apimachinery's pkg/labels and pkg/fields."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kctl.machinery.errors import BadRequest, Invalid
from kctl.machinery.selectors import (
    EVERYTHING,
    NOTHING,
    FieldSelector,
    FieldTerm,
    LabelSelector,
    Operator,
    Requirement,
    from_label_selector_object,
    parse_field_selector,
    parse_label_selector,
    supported_field_labels,
)

# ---------------------------------------------------------------------------------------
# Label selector text: matching

LABELS = {"app": "web", "tier": "front", "rev": "7", "empty": ""}

MATCH_CASES = [
    ("", True, "empty-selects-all"),
    ("app=web", True, "equals"),
    ("app=db", False, "equals-other-value"),
    ("app==web", True, "double-equals"),
    ("missing=x", False, "equals-missing-key"),
    ("empty=", True, "equals-empty-value"),
    ("missing=", False, "equals-empty-needs-key"),
    ("app!=db", True, "not-equals"),
    ("app!=web", False, "not-equals-same-value"),
    ("missing!=x", True, "not-equals-missing-key"),
    ("app in (db, web)", True, "in"),
    ("app in (db)", False, "in-miss"),
    ("missing in (x)", False, "in-missing-key"),
    ("empty in ()", True, "in-empty-value"),
    ("app notin (db,cache)", True, "notin"),
    ("app notin (web)", False, "notin-hit"),
    ("missing notin (x)", True, "notin-missing-key"),
    ("app", True, "exists"),
    ("empty", True, "exists-empty-value"),
    ("missing", False, "exists-missing"),
    ("!missing", True, "does-not-exist"),
    ("!app", False, "does-not-exist-present"),
    ("rev>3", True, "gt"),
    ("rev>7", False, "gt-equal"),
    ("rev<10", True, "lt"),
    ("rev<7", False, "lt-equal"),
    ("app>3", False, "gt-non-integer-label"),
    ("missing<3", False, "lt-missing-key"),
    ("rev>007", False, "gt-leading-zeros"),
    ("app=web,tier=front", True, "and-both"),
    ("app=web,tier=back", False, "and-one-fails"),
    ("app=web,app=db", False, "same-key-twice"),
    ("in", False, "keyword-as-key"),
]


@pytest.mark.parametrize("text, expected", [c[:2] for c in MATCH_CASES], ids=[c[2] for c in MATCH_CASES])
def test_label_selector_matches(text: str, expected: bool) -> None:
    """Each operator selects the labels Kubernetes would."""
    assert parse_label_selector(text).matches(LABELS) is expected


@pytest.mark.parametrize("labels", [None, {}], ids=["none", "empty"])
def test_label_selector_on_no_labels(labels: dict | None) -> None:
    """None counts as no labels: negative requirements match, positive ones do not."""
    assert parse_label_selector("!a,b!=c,d notin (e)").matches(labels)
    assert not parse_label_selector("a").matches(labels)
    assert parse_label_selector("").matches(labels)


@pytest.mark.parametrize("text, value, expected", [
    ("n<10", "-5", True), ("n<10", "+5", True), ("n>1", "9223372036854775807", True),
    ("n>1", "9223372036854775808", False), ("n>1", "1_0", False), ("n>1", " 5", False),
    ("n<10", "", False), ("n<10", "0x5", False),
], ids=["negative", "plus-sign", "int64-max", "int64-overflow", "underscore", "space", "empty", "hex"])
def test_label_selector_gt_lt_read_labels_as_go_int64(text: str, value: str, expected: bool) -> None:
    """Gt/Lt read the label as strconv.ParseInt(v, 10, 64) does; non-integers never match."""
    assert parse_label_selector(text).matches({"n": value}) is expected


# ---------------------------------------------------------------------------------------
# Label selector text: canonical form and whitespace

CANONICAL_CASES = [
    ("", "", "empty"),
    ("   ", "", "blank"),
    ("b=1,a=2", "a=2,b=1", "sorted-by-key"),
    ("a==b", "a==b", "double-equals-kept"),
    ("a != b", "a!=b", "spaces-around-operator"),
    ("a in (z, y,y)", "a in (y,z)", "in-values-sorted-unique"),
    ("a notin(x)", "a notin (x)", "notin-no-space"),
    ("a in ()", "a in ()", "in-empty-parens"),
    ("a in (,x)", "a in (,x)", "in-leading-empty"),
    ("a in (x,,y,)", "a in (,x,y)", "in-empty-slots"),
    ("\t!a ,\nb\r", "!a,b", "tabs-newlines"),
    ("! a", "!a", "space-after-bang"),
    ("a>3, b<4", "a>3,b<4", "gt-lt"),
    ("a=", "a=", "empty-value"),
    ("a=,b", "a=,b", "empty-value-then-more"),
    ("example.com/app=in", "example.com/app=in", "prefixed-key-keyword-value"),
    ("in in (notin,in)", "in in (in,notin)", "keywords-as-identifiers"),
    ("b=1,a,b=0", "a,b=1,b=0", "stable-for-equal-keys"),
]


@pytest.mark.parametrize("text, canonical", [c[:2] for c in CANONICAL_CASES], ids=[c[2] for c in CANONICAL_CASES])
def test_label_selector_canonical_string(text: str, canonical: str) -> None:
    """str() is Kubernetes' canonical form, and it parses back to the same selector."""
    selector = parse_label_selector(text)
    assert str(selector) == canonical
    assert parse_label_selector(canonical) == selector


def test_label_selector_is_immutable_and_hashable() -> None:
    """A parsed selector cannot be changed and can key a dict."""
    selector = parse_label_selector("a=b")
    with pytest.raises(AttributeError):
        selector.requirements = ()  # type: ignore[misc]
    assert {selector: 1}[parse_label_selector(" a = b ")] == 1


def test_label_selector_requirements() -> None:
    """Requirements expose key, operator and sorted values for the store to use."""
    selector = parse_label_selector("tier notin (b,a),!x,rev>3")
    assert selector.requirements == (
        Requirement("rev", Operator.GREATER_THAN, ("3",)),
        Requirement("tier", Operator.NOT_IN, ("a", "b")),
        Requirement("x", Operator.DOES_NOT_EXIST),
    )


@pytest.mark.parametrize("selector, empty, text", [
    (EVERYTHING, True, ""), (NOTHING, False, ""), (parse_label_selector(""), True, ""),
    (parse_label_selector("a"), False, "a"),
], ids=["everything", "nothing", "parsed-empty", "exists"])
def test_label_selector_is_empty(selector: LabelSelector, empty: bool, text: str) -> None:
    """is_empty is true only for a selector that matches everything."""
    assert selector.is_empty is empty
    assert str(selector) == text


# ---------------------------------------------------------------------------------------
# Label selector text: errors

SYNTAX_ERROR_CASES = [
    ("a,", "found end of string, expected: identifier after ','", "trailing-comma"),
    (",a", "found ',' at column 1, expected: !, identifier, or 'end of string'", "leading-comma"),
    ("(a)", "found '(' at column 1, expected: !, identifier, or 'end of string'", "leading-paren"),
    ("a b", "unable to parse requirement: found 'b' at column 3, expected: one of in, notin", "missing-operator"),
    ("a=(", "unable to parse requirement: found '(' at column 3, expected: identifier", "paren-as-value"),
    ("a=b c", "found 'c' at column 5, expected: ',' or 'end of string'", "two-values"),
    ("!a=b", "found '=' at column 3, expected: ',' or 'end of string'", "not-with-value"),
    ("!", "unable to parse requirement: found end of string, expected: identifier", "bare-bang"),
    ("!,a", "found ',' at column 2, expected: identifier", "bang-comma"),
    ("a in x", "found 'x' at column 6, expected: '('", "in-without-parens"),
    ("a in (x", "found end of string, expected: ',' or ')'", "in-unclosed"),
    ("a in (x y)", "found 'y' at column 9, expected: ',' or ')'", "in-missing-comma"),
    ("a in (=)", "found '=' at column 7, expected: ',', ')' or identifier", "in-operator-inside"),
    ("a in (x,=)", "found '=' at column 9, expected: ',', or identifier", "in-operator-after-comma"),
    ("a<=3", "found '=' at column 3, expected: identifier", "less-or-equal"),
    ("a in (x,,)", "found ')' at column 10, expected: ',', or identifier", "in-two-empty-slots-at-end"),
    ("a===b", "found '=' at column 4, expected: identifier", "triple-equals"),
]


@pytest.mark.parametrize("text, message", [c[:2] for c in SYNTAX_ERROR_CASES], ids=[c[2] for c in SYNTAX_ERROR_CASES])
def test_label_selector_syntax_errors(text: str, message: str) -> None:
    """Bad syntax raises BadRequest with one line naming the selector, problem and column."""
    with pytest.raises(BadRequest) as raised:
        parse_label_selector(text)
    assert raised.value.message.startswith(f'invalid label selector "{text}": ')
    assert message in raised.value.message
    assert "\n" not in raised.value.message


VALIDATION_ERROR_CASES = [
    ("-a", 'invalid label key "-a" at column 1: name part must consist of', "key-leading-dash"),
    ("a-", 'invalid label key "a-" at column 1: name part must consist of', "key-trailing-dash"),
    ("a" * 64, "name part must be no more than 63 characters", "key-too-long"),
    ("/a", "prefix part must be non-empty", "empty-prefix"),
    ("a/", "name part must be non-empty", "empty-name"),
    ("Example.com/a", "prefix part a lowercase RFC 1123 subdomain", "uppercase-prefix"),
    ("a/b/c", "a qualified name must consist of", "two-slashes"),
    ("x" * 254 + "/a", "prefix part must be no more than 253 characters", "prefix-too-long"),
    ("a@b=c", 'invalid label key "a@b"', "key-bad-char"),
    ("a=-b", 'invalid value "-b" at column 3: a valid label must be an empty string', "value-leading-dash"),
    ("a=" + "v" * 64, "must be no more than 63 characters", "value-too-long"),
    ("a in (ok, b/c)", 'invalid value "b/c" at column 11', "in-value-slash"),
    ("a>b", "for '>' and '<' the value must be an integer", "gt-not-integer"),
    ("a<", 'invalid value "" at column 3: for', "lt-empty"),
    ("a>-1", 'invalid value "-1"', "gt-negative-is-not-a-label-value"),
    ("a>99999999999999999999", "must be an integer", "gt-overflow"),
]


@pytest.mark.parametrize("text, message", [c[:2] for c in VALIDATION_ERROR_CASES],
                         ids=[c[2] for c in VALIDATION_ERROR_CASES])
def test_label_selector_key_and_value_validation(text: str, message: str) -> None:
    """Keys must be qualified names and values label values, as Kubernetes requires."""
    with pytest.raises(BadRequest) as raised:
        parse_label_selector(text)
    assert message in raised.value.message


@pytest.mark.parametrize("text", [
    "a", "a.b-c_d=E.f-G_h", "example.com/a=b", "k8s.io/x", "a" * 63, "a=" + "b" * 63, "a=",
    "1=2", "sub.example-1.com/Name_1.x",
], ids=["short", "punctuated", "prefixed", "prefixed-exists", "key-63", "value-63",
        "value-empty", "digits", "mixed"])
def test_label_selector_valid_keys_and_values(text: str) -> None:
    """Keys and values at the limits of what Kubernetes allows parse."""
    parse_label_selector(text)


# ---------------------------------------------------------------------------------------
# metav1.LabelSelector objects

OBJECT_CASES = [
    ({}, "", {"x": "y"}, True, "empty-object-selects-all"),
    ({"matchLabels": {}, "matchExpressions": []}, "", {}, True, "empty-parts-select-all"),
    ({"matchLabels": {"app": "web"}}, "app=web", {"app": "web", "x": "y"}, True, "match-labels"),
    ({"matchLabels": {"app": "web"}}, "app=web", {"app": "db"}, False, "match-labels-miss"),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]},
     "tier in (a,b)", {"tier": "a"}, True, "in"),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]},
     "tier notin (a)", {}, True, "notin-missing-key"),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, "tier", {"tier": ""}, True, "exists"),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist", "values": []}]},
     "!tier", {"tier": "a"}, False, "does-not-exist"),
    ({"matchLabels": {"z": "1"}, "matchExpressions": [{"key": "a", "operator": "Exists"}]},
     "a,z=1", {"a": "", "z": "1"}, True, "labels-and-expressions-sorted"),
]


@pytest.mark.parametrize("obj, text, labels, expected", [c[:4] for c in OBJECT_CASES], ids=[c[4] for c in OBJECT_CASES])
def test_label_selector_object(obj: dict, text: str, labels: dict, expected: bool) -> None:
    """matchLabels and matchExpressions become the requirements LabelSelectorAsSelector builds."""
    selector = from_label_selector_object(obj)
    assert str(selector) == text
    assert selector.matches(labels) is expected


def test_nil_selector_object_selects_nothing() -> None:
    """None (a nil selector) selects nothing, unlike {} which selects everything."""
    nil = from_label_selector_object(None)
    assert nil == NOTHING
    assert not nil.matches({}) and not nil.matches({"app": "web"})
    assert not nil.is_empty
    assert from_label_selector_object({}) == EVERYTHING


INVALID_OBJECT_CASES = [
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
     "spec.selector.matchExpressions[0].values: Required value: must be specified when operator is In or NotIn",
     "in-without-values"),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn"}]},
     "spec.selector.matchExpressions[0].values: Required value", "notin-values-missing"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists", "values": ["x"]}]},
     "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when operator is Exists",
     "exists-with-values"),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["x"]}]},
     "spec.selector.matchExpressions[0].values: Forbidden", "does-not-exist-with-values"),
    ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
     'spec.selector.matchExpressions[0].operator: Unsupported value: "Gt": supported values: "In", "NotIn"',
     "unknown-operator"),
    ({"matchExpressions": [{"key": "a"}]},
     "spec.selector.matchExpressions[0].operator: Required value", "missing-operator"),
    ({"matchExpressions": [{"operator": "Exists"}]},
     "spec.selector.matchExpressions[0].key: Required value", "missing-key"),
    ({"matchExpressions": [{"key": "-a", "operator": "Exists"}]},
     'spec.selector.matchExpressions[0].key: Invalid value: "-a": name part must consist of', "bad-key"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "b c"]}]},
     'spec.selector.matchExpressions[0].values[1]: Invalid value: "b c": a valid label', "bad-value"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]},
     "spec.selector.matchExpressions[0].values: Invalid value: must be a list of strings", "values-not-list"),
    ({"matchExpressions": ["a"]}, "spec.selector.matchExpressions[0]: Invalid value", "expression-not-object"),
    ({"matchExpressions": {"key": "a"}}, "spec.selector.matchExpressions: Invalid value: must be a list",
     "expressions-not-list"),
    ({"matchLabels": {"-a": "b"}}, 'spec.selector.matchLabels: Invalid value: "-a": name part', "bad-label-key"),
    ({"matchLabels": {"a": "-b"}}, 'spec.selector.matchLabels: Invalid value: "-b": a valid label', "bad-label-value"),
    ({"matchLabels": {"a": 1}}, 'spec.selector.matchLabels.a: Invalid value: 1: must be a string',
     "label-value-not-string"),
    ({"matchLabels": ["a"]}, "spec.selector.matchLabels: Invalid value: must be an object", "labels-not-object"),
    ("app=web", 'spec.selector: Invalid value: "app=web": must be an object', "selector-not-object"),
]


@pytest.mark.parametrize("obj, message", [c[:2] for c in INVALID_OBJECT_CASES],
                         ids=[c[2] for c in INVALID_OBJECT_CASES])
def test_label_selector_object_invalid(obj: dict, message: str) -> None:
    """An invalid selector object raises Invalid naming the field path and the problem."""
    with pytest.raises(Invalid) as raised:
        from_label_selector_object(obj)
    assert raised.value.message.startswith("label selector is invalid: ")
    assert message in raised.value.message, raised.value.message


def test_label_selector_object_path_and_all_causes() -> None:
    """Causes are reported under the caller's path and every problem is listed."""
    obj = {"matchLabels": {"-a": "b"}, "matchExpressions": [{"key": "a", "operator": "In"}]}
    with pytest.raises(Invalid) as raised:
        from_label_selector_object(obj, path="spec.template.spec.affinity", what='Deployment "web"')
    assert [c.path for c in raised.value.causes] == [
        "spec.template.spec.affinity.matchLabels", "spec.template.spec.affinity.matchExpressions[0].values"]
    assert raised.value.message.startswith('Deployment "web" is invalid: ')


# ---------------------------------------------------------------------------------------
# Field selectors

POD_BOUND = {"kind": "Pod", "metadata": {"name": "web-1", "namespace": "prod"},
             "spec": {"nodeName": "n1", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                      "serviceAccountName": "default", "hostNetwork": True},
             "status": {"phase": "Running", "podIP": "10.0.0.5"}}
POD_PENDING = {"kind": "Pod", "metadata": {"name": "web-2", "namespace": "prod"}, "spec": {},
               "status": {"phase": "Pending", "podIPs": [{"ip": "10.0.0.9"}]}}
EVENT = {"kind": "Event", "metadata": {"name": "web-1.abc", "namespace": "prod"},
         "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "prod", "uid": "u-1"},
         "reason": "Scheduled", "type": "Normal", "reportingComponent": "kctl-scheduler"}
NODE = {"kind": "Node", "metadata": {"name": "n1"}, "spec": {}}
CORDONED = {"kind": "Node", "metadata": {"name": "n2"}, "spec": {"unschedulable": True}}
SECRET = {"kind": "Secret", "metadata": {"name": "s", "namespace": "prod"}, "type": "Opaque"}
NAMESPACE = {"kind": "Namespace", "metadata": {"name": "prod"}, "status": {"phase": "Terminating"}}
REPLICASET = {"kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "prod"}, "status": {}}
JOB = {"kind": "Job", "metadata": {"name": "j", "namespace": "prod"}, "status": {"succeeded": 2}}

FIELD_CASES = [
    (None, "metadata.name=web-1", POD_BOUND, True, "name"),
    (None, "metadata.name==web-1", POD_PENDING, False, "name-double-equals-miss"),
    (None, "metadata.namespace!=prod", POD_BOUND, False, "namespace-not-equals"),
    (None, "metadata.namespace=", NODE, True, "cluster-scoped-namespace-empty"),
    (None, "", NODE, True, "empty-selects-all"),
    (None, ",metadata.name=n1,", NODE, True, "empty-terms-skipped"),
    ("Pod", "spec.nodeName=", POD_PENDING, True, "unscheduled-pod"),
    ("Pod", "spec.nodeName=", POD_BOUND, False, "scheduled-pod-not-unscheduled"),
    ("Pod", "spec.nodeName!=", POD_BOUND, True, "scheduled-pod"),
    ("Pod", "spec.nodeName=n1,status.phase=Running", POD_BOUND, True, "and"),
    ("Pod", "spec.nodeName=n1,status.phase!=Running", POD_BOUND, False, "and-one-fails"),
    ("Pod", "status.phase!=Running", POD_PENDING, True, "phase-not-equals"),
    ("Pod", "spec.restartPolicy=Always", POD_BOUND, True, "restart-policy"),
    ("Pod", "spec.schedulerName=default-scheduler", POD_BOUND, True, "scheduler-name"),
    ("Pod", "spec.serviceAccountName=default", POD_BOUND, True, "service-account"),
    ("Pod", "spec.hostNetwork=true", POD_BOUND, True, "host-network"),
    ("Pod", "spec.hostNetwork=false", POD_PENDING, True, "host-network-unset-is-false"),
    ("Pod", "status.podIP=10.0.0.5", POD_BOUND, True, "pod-ip"),
    ("Pod", "status.podIP=10.0.0.9", POD_PENDING, True, "pod-ip-from-pod-ips"),
    ("Event", "involvedObject.kind=Pod,involvedObject.name=web-1", EVENT, True, "event-involved"),
    ("Event", "involvedObject.namespace=prod,involvedObject.uid=u-1", EVENT, True, "event-involved-ns-uid"),
    ("Event", "reason=Scheduled,type=Normal", EVENT, True, "event-reason-type"),
    ("Event", "type=Warning", EVENT, False, "event-type-miss"),
    ("Event", "source=kctl-scheduler", EVENT, True, "event-source-from-reporting-component"),
    ("Node", "spec.unschedulable=true", CORDONED, True, "cordoned"),
    ("Node", "spec.unschedulable=false", NODE, True, "unschedulable-unset-is-false"),
    ("Node", "spec.unschedulable!=true", CORDONED, False, "not-cordoned"),
    ("Secret", "type=Opaque", SECRET, True, "secret-type"),
    ("Namespace", "status.phase=Terminating", NAMESPACE, True, "namespace-phase"),
    ("ReplicaSet", "status.replicas=0", REPLICASET, True, "replicas-unset-is-zero"),
    ("Job", "status.successful=2", JOB, True, "job-successful-reads-succeeded"),
    (None, r"metadata.name=a\,b\=c\\d", {"metadata": {"name": "a,b=c\\d"}}, True, "escaped-value"),
    (None, "metadata.name=a b", {"metadata": {"name": "a b"}}, True, "value-with-space"),
]


@pytest.mark.parametrize("kind, text, obj, expected", [c[:4] for c in FIELD_CASES], ids=[c[4] for c in FIELD_CASES])
def test_field_selector_matches(kind: str | None, text: str, obj: dict, expected: bool) -> None:
    """Each kind's field labels select the objects Kubernetes would; missing reads as ""."""
    assert parse_field_selector(text, kind=kind).matches(obj) is expected


@pytest.mark.parametrize("text, canonical", [
    ("metadata.name==a", "metadata.name=a"),
    ("status.phase=Running,metadata.name!=b", "metadata.name!=b,status.phase=Running"),
    (r"metadata.name=a\,b", r"metadata.name=a\,b"),
    ("", ""),
], ids=["double-equals-normalised", "sorted", "escapes-kept", "empty"])
def test_field_selector_canonical_string(text: str, canonical: str) -> None:
    """str() gives the sorted, escaped form, which parses back to an equal selector."""
    selector = parse_field_selector(text, kind="Pod")
    assert str(selector) == canonical
    assert parse_field_selector(canonical, kind="Pod") == selector
    assert selector.is_empty is (canonical == "")


@pytest.mark.parametrize("text, field, expected", [
    ("metadata.namespace=prod,metadata.name=web", "metadata.namespace", "prod"),
    ("metadata.namespace=prod,metadata.name=web", "metadata.name", "web"),
    ("metadata.name==web", "metadata.name", "web"),
    ("metadata.name=", "metadata.name", ""),
    ("metadata.name!=web", "metadata.name", None),
    ("metadata.namespace=prod", "metadata.name", None),
], ids=["namespace", "name", "double-equals", "empty-value", "not-equals-is-no-match", "absent"])
def test_field_selector_equality_value(text: str, field: str, expected: str | None) -> None:
    """equality_value gives the value of a field=value term, for narrowing a store query."""
    assert parse_field_selector(text).equality_value(field) == expected


FIELD_ERROR_CASES = [
    (None, "spec.foo=x", "field label not supported: spec.foo (supported: metadata.name, metadata.namespace)",
     "unknown-field"),
    (None, "spec.nodeName=", "field label not supported: spec.nodeName", "pod-field-without-kind"),
    ("Pod", "spec.foo=x", "field label not supported: spec.foo (Pod supports: metadata.name, metadata.namespace, "
     "spec.nodeName", "unknown-pod-field"),
    ("Node", "status.phase=x", "field label not supported: status.phase (Node supports", "pod-field-on-node"),
    ("Deployment", "spec.replicas=1", "field label not supported: spec.replicas (Deployment supports: "
     "metadata.name, metadata.namespace)", "kind-without-extra-fields"),
    (None, "metadata.name = x", "field label not supported: metadata.name ", "no-trimming"),
    (None, "=x", "field label not supported:  (", "empty-field"),
    (None, "metadata.name", """can't understand "metadata.name" (expected field=value""", "no-operator"),
    (None, "metadata.name=a,b", """can't understand "b\"""", "bare-comma-splits"),
    (None, "metadata.name=a=b", "unescaped character in value: =", "bare-equals-in-value"),
    (None, r"metadata.name=a\b", r"invalid escape sequence: \b", "bad-escape"),
    (None, "metadata.name=a\\", r"invalid escape sequence: \ at end of value", "trailing-backslash"),
]


@pytest.mark.parametrize("kind, text, message", [c[:3] for c in FIELD_ERROR_CASES],
                         ids=[c[3] for c in FIELD_ERROR_CASES])
def test_field_selector_errors(kind: str | None, text: str, message: str) -> None:
    """Unknown field labels and bad syntax raise BadRequest with a one-line message."""
    with pytest.raises(BadRequest) as raised:
        parse_field_selector(text, kind=kind)
    assert message in raised.value.message, raised.value.message
    assert "\n" not in raised.value.message


def test_supported_field_labels() -> None:
    """Every kind has metadata.name and metadata.namespace; Pod adds its own."""
    assert supported_field_labels(None) == ("metadata.name", "metadata.namespace")
    assert "spec.nodeName" in supported_field_labels("Pod")
    assert supported_field_labels("ConfigMap") == supported_field_labels(None)


def test_field_term_rejects_label_operators() -> None:
    """A field term only takes =, == or !=."""
    assert FieldTerm("a", Operator.DOUBLE_EQUALS, "b").operator is Operator.EQUALS
    with pytest.raises(ValueError):
        FieldTerm("a", Operator.IN, "b")
    assert FieldSelector().matches({}) and FieldSelector().is_empty


# ---------------------------------------------------------------------------------------
# Property: the canonical string re-parses to an equal selector

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_alnum = st.text(_ALNUM, min_size=1, max_size=3)
_middle = st.text(_ALNUM + "-_.", max_size=5)
_name = st.one_of(
    st.sampled_from(["in", "notin", "a"]),
    st.builds(lambda a, m, b: a + m + b, _alnum, _middle, _alnum).filter(lambda s: len(s) <= 63),
)
_dns_label = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,4}[a-z0-9])?", fullmatch=True)
_prefix = st.lists(_dns_label, min_size=1, max_size=3).map(".".join)
_key = st.one_of(_name, st.builds(lambda p, n: f"{p}/{n}", _prefix, _name))
_value = st.one_of(st.just(""), _name)
_space = st.sampled_from(["", " ", "  ", "\t", "\n"])


@st.composite
def _requirement_text(draw: st.DrawFn) -> str:
    key = draw(_key)
    op = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!", ">", "<"]))
    s = lambda: draw(_space)  # noqa: E731
    if op == "exists":
        return key
    if op == "!":
        return f"!{s()}{key}"
    if op in ("in", "notin"):
        # k8s rejects an empty slot just before ')' after another one ("(x,,)"): keep "" first.
        values = sorted(set(draw(st.lists(_value, min_size=1, max_size=4))), key=bool)
        inner = f"{s()},{s()}".join(values)
        return f"{key} {op}{s()}({s()}{inner}{s()})"
    if op in (">", "<"):
        return f"{key}{s()}{op}{s()}{draw(st.integers(0, 10 ** 6))}"
    return f"{key}{s()}{op}{s()}{draw(_value)}"


@settings(max_examples=300, deadline=None)
@given(st.lists(_requirement_text(), max_size=5), _space)
def test_label_selector_string_round_trips(requirements: list[str], space: str) -> None:
    """For any valid selector text, str(parse(s)) parses back to an equal selector."""
    selector = parse_label_selector(f"{space},{space}".join(requirements))
    again = parse_label_selector(str(selector))
    assert again == selector
    assert str(again) == str(selector)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_key, _value, max_size=4), st.lists(_requirement_text(), max_size=4))
def test_label_selector_is_the_and_of_its_requirements(labels: dict[str, str], requirements: list[str]) -> None:
    """A selector matches exactly when each of its requirements matches on its own."""
    selector = parse_label_selector(",".join(requirements))
    assert selector.matches(labels) is all(parse_label_selector(r).matches(labels) for r in requirements)
