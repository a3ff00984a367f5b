"""kubectl's JSONPath templates: every feature of the template language, and its errors."""

from __future__ import annotations

import pytest

from kctl.machinery.errors import BadRequest
from kctl.output.jsonpath import format_value, go_sprint, parse_template, render

POD_A = {
    "kind": "Pod",
    "metadata": {"name": "web-a", "labels": {"app.kubernetes.io/name": "web", "tier": "fe"}},
    "spec": {"containers": [{"name": "app", "image": "nginx:1.25", "ports": [{"containerPort": 80}]},
                            {"name": "side", "image": "busybox"}]},
    "status": {"phase": "Running", "restarts": 3, "ready": True},
}
POD_B = {
    "kind": "Pod",
    "metadata": {"name": "web-b"},
    "spec": {"containers": [{"name": "app", "image": "nginx:1.24"}]},
    "status": {"phase": "Pending", "restarts": 0, "ready": False},
}
POD_C = {
    "kind": "Pod",
    "metadata": {"name": "job-c"},
    "spec": {"containers": [{"name": "run", "image": "busybox"}]},
    "status": {"phase": "Succeeded", "restarts": 1},
}
LIST = {"apiVersion": "v1", "kind": "List", "items": [POD_A, POD_B, POD_C],
        "metadata": {"resourceVersion": ""}}

RENDER_CASES = [
    ("{.kind}", LIST, "List"),
    ("text only", LIST, "text only"),
    ("kind: {.kind}!", LIST, "kind: List!"),
    ("{kind}", LIST, "List"),
    ("{$.kind}", LIST, "List"),
    ("{@.kind}", LIST, "List"),
    ("{.items[0].metadata.name}", LIST, "web-a"),
    ("{.items[-1].metadata.name}", LIST, "job-c"),
    ("{.items[*].metadata.name}", LIST, "web-a web-b job-c"),
    ("{.items[0:2].metadata.name}", LIST, "web-a web-b"),
    ("{.items[1:].metadata.name}", LIST, "web-b job-c"),
    ("{.items[0:3:2].metadata.name}", LIST, "web-a job-c"),
    ("{.items[0,2].metadata.name}", LIST, "web-a job-c"),
    ("{.items[0].spec.containers[*].image}", LIST, "nginx:1.25 busybox"),
    ("{.items[*].spec.containers[0].name}", LIST, "app app run"),
    ("{..image}", POD_A, "nginx:1.25 busybox"),
    ("{.items[0]..containerPort}", LIST, "80"),
    ('{.items[?(@.status.phase=="Running")].metadata.name}', LIST, "web-a"),
    ("{.items[?(@.status.phase=='Pending')].metadata.name}", LIST, "web-b"),
    ('{.items[?(@.status.phase!="Running")].metadata.name}', LIST, "web-b job-c"),
    ("{.items[?(@.status.restarts>0)].metadata.name}", LIST, "web-a job-c"),
    ("{.items[?(@.status.restarts>=1)].metadata.name}", LIST, "web-a job-c"),
    ("{.items[?(@.status.restarts<1)].metadata.name}", LIST, "web-b"),
    ("{.items[?(@.status.restarts<=1)].metadata.name}", LIST, "web-b job-c"),
    ("{.items[?(@.status.restarts==3)].metadata.name}", LIST, "web-a"),
    ("{.items[?(@.status.ready==true)].metadata.name}", LIST, "web-a"),
    ("{.items[?(@.status.ready)].metadata.name}", LIST, "web-a web-b"),
    ("{.items[?(@.metadata.labels)].metadata.name}", LIST, "web-a"),
    ('{.items[?(@.status.missing!="x")].metadata.name}', LIST, ""),
    ('{.items[0].spec.containers[?(@.name=="side")].image}', LIST, "busybox"),
    (r"{.metadata.labels.app\.kubernetes\.io/name}", POD_A, "web"),
    ("{.metadata.labels['app.kubernetes.io/name']}", POD_A, "web"),
    ('{range .items[*]}{.metadata.name}{"\\t"}{.status.phase}{"\\n"}{end}', LIST,
     "web-a\tRunning\nweb-b\tPending\njob-c\tSucceeded\n"),
    ("{range .items[*]}[{.metadata.name}]{end}", LIST, "[web-a][web-b][job-c]"),
    ("{range .items[*]}{.metadata.name}:{range .spec.containers[*]} {.image}{end};{end}", LIST,
     "web-a: nginx:1.25 busybox;web-b: nginx:1.24;job-c: busybox;"),
    ('{range .items[?(@.status.phase=="Running")]}{.metadata.name}{end}', LIST, "web-a"),
    ("{range .nothing[*]}x{end}done", LIST, "done"),
    ('{"a\\tb"}{"\\u00e9"}', LIST, "a\tb\u00e9"),
    ("{'}'}", LIST, "}"),
    ("{.metadata.missing}", POD_A, ""),
    ("{.items[9].metadata.name}", LIST, ""),
    ("{.status.restarts}", POD_A, "3"),
    ("{.status.ready}", POD_A, "true"),
    ("{.metadata.labels}", POD_A, '{"app.kubernetes.io/name":"web","tier":"fe"}'),
    ("{.spec.containers[1]}", POD_A, '{"image":"busybox","name":"side"}'),
]


@pytest.mark.parametrize("template,data,expected", RENDER_CASES, ids=[c[0] for c in RENDER_CASES])
def test_render(template, data, expected):
    """A template renders exactly what kubectl -o jsonpath prints."""
    assert render(template, data) == expected


ERROR_CASES = [
    ("{.metadata.name", "unclosed action"),
    ("{range .items[*]}{.metadata.name}", "unclosed range: {range} without {end}"),
    ("{.metadata.name}{end}", "not in range, nothing to end"),
    ("{.items[x]}", "invalid array index x"),
    ("{.items[0:1:0]}", "step must be > 0"),
    ("{.items[?(@.a=<1)]}", "unrecognized filter operator =<"),
    ("{range}{end}", "range needs an expression"),
]


@pytest.mark.parametrize("template,reason", ERROR_CASES, ids=[c[1] for c in ERROR_CASES])
def test_parse_errors(template, reason):
    """A bad template is a one-line BadRequest naming the template and the reason."""
    with pytest.raises(BadRequest) as info:
        parse_template(template)
    assert info.value.message.startswith(f"error parsing jsonpath {template}, ")
    assert info.value.message.endswith(reason)
    assert "\n" not in info.value.message


def test_values_keep_types():
    """Template.values gives the raw values of every action, for custom columns."""
    assert parse_template("{.spec.containers[*].ports}").values(POD_A) == [[{"containerPort": 80}]]
    assert parse_template("{.nothing}").values(POD_A) == []


VALUE_CASES = [
    ("text", "text", "text"),
    (3, "3", "3"),
    (2.0, "2", "2"),
    (0.5, "0.5", "0.5"),
    (True, "true", "true"),
    (None, "null", "<nil>"),
    ({"b": 1, "a": "<x>"}, '{"a":"\\u003cx\\u003e","b":1}', "map[a:<x> b:1]"),
    (["x", 1], '["x",1]', "[x 1]"),
]


@pytest.mark.parametrize("value,as_jsonpath,as_sprint", VALUE_CASES, ids=[repr(c[0]) for c in VALUE_CASES])
def test_value_printing(value, as_jsonpath, as_sprint):
    """Values print as kubectl prints them: JSON for jsonpath, Go's fmt for custom columns."""
    assert format_value(value) == as_jsonpath
    assert go_sprint(value) == as_sprint
