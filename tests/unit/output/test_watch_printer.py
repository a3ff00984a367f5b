"""WatchPrinter (kctl.output.printers): how `kctl get -w` prints one object or watch event at a time."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import builtin_registry
from kctl.output.formats import parse_output
from kctl.output.printers import WatchPrinter

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
CMS = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "default",
                                                              "creationTimestamp": "2026-01-01T00:00:00Z"},
        "data": {"k": "v"}} for n in ("a", "b")]
CM_RT = builtin_registry().lookup("configmaps")


def _print(output: str | None, *, events: bool = False, no_headers: bool = False) -> str:
    out = io.StringIO()
    printer = WatchPrinter(CM_RT, parse_output(output), out, events=events, no_headers=no_headers)
    printer.print_list(CMS[:1], now=NOW)
    printer.print("DELETED", CMS[1], now=NOW)
    return out.getvalue()


@pytest.mark.parametrize(("output", "events", "expected"), [
    (None, False, "NAME   DATA   AGE\na      1      0s\nb     1     0s\n"),
    (None, True, "EVENT      NAME   DATA   AGE\nADDED      a      1      0s\nDELETED    b     1     0s\n"),
    ("name", False, "configmap/a\nconfigmap/b\n"),
    ("name", True, "ADDED configmap/a\nDELETED configmap/b\n"),
    ("jsonpath={.type}:{.object.metadata.name} ", True, "ADDED:a DELETED:b "),
    ("go-template={{.type}}:{{.object.metadata.name}} ", True, "ADDED:a DELETED:b "),
], ids=["table", "table-events", "name", "name-events", "jsonpath-events", "go-template-events"])
def test_watch_formats(output, events, expected):
    """The table's header prints once; events add an EVENT column or prefix, or wrap the object."""
    assert _print(output, events=events) == expected


def test_yaml_documents_are_separated():
    """YAML documents after the first start with `---`, as kubectl's YAML printer in a watch."""
    text = _print("yaml")
    assert text.count("---\n") == 1 and text.index("name: b") > text.index("---\n")


def test_json_events_put_type_first():
    """-o json events are metav1.WatchEvent: `type` then `object`, the object's keys sorted."""
    text = _print("json", events=True)
    first = json.loads(text[:text.index("}\n{") + 1])
    assert list(first) == ["type", "object"] and first["type"] == "ADDED"
    assert list(first["object"]) == sorted(first["object"])


def test_no_headers():
    """--no-headers prints rows only."""
    assert _print(None, no_headers=True).splitlines()[0].split()[0] == "a"
