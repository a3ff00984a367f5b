"""`-o json` written by orjson (kctl.output.printers._fast_json) is byte for byte what json wrote, or not used."""

from __future__ import annotations

import io
import json

import pytest

from kctl.output.formats import parse_output
from kctl.output.keyorder import sorted_keys
from kctl.output.printers import _fast_json, print_objects

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web", "namespace": "default", "labels": {"b": "2", "a": "1"},
                    "annotations": {"note": "a \"quoted\"\nmulti-line\ttext, é 😀 \u2028 \x01 \x7f"}},
       "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "args": ["e-5", "0.00001", "1e-7"],
                                "ports": [{"containerPort": 80}]}], "volumes": [], "nodeSelector": {}},
       "status": {"phase": "Running"}}


def _slow(data: dict) -> str:
    """What -o json printed before orjson: kctl.manifests.writer.dump_json of the key-sorted data."""
    return json.dumps(sorted_keys(data), indent=4, ensure_ascii=False) + "\n"


@pytest.mark.parametrize(("value", "fast"), [
    ("text", True), (0, True), (-7, True), (2**63 - 1, True), (True, True), (None, True),
    (1.5, True), (0.1 + 0.2, True), (1e16, True), (1e21, True), (-0.0, True), (123456.789, True),
    ([], True), ({}, True), ([[{}]], True), ({"z": 1, "a": {"y": [], "b": None}}, True),
    (2**64, False),  # beyond 64 bits: orjson refuses, json writes it
    (1e-5, False), (2.5e-6, False), (1e-7, False), ([1e-10], False),  # orjson: 0.00001, 2.5e-6, 1e-7
], ids=repr)
def test_json_output_is_jsons(value, fast):
    """Every value prints as json printed it; orjson is used unless it would write other text."""
    data = {**POD, "extra": value}
    out = io.StringIO()
    print_objects([data], None, parse_output("json"), out)
    assert out.getvalue() == _slow(data)
    assert (_fast_json(sorted_keys(data)) is not None) is fast


def test_list_of_many_is_jsons():
    """A List of many objects (the `get` of a kind) prints as json printed it."""
    objs = [{**POD, "metadata": {**POD["metadata"], "name": f"web-{i}"}} for i in range(50)]
    out = io.StringIO()
    print_objects(objs, None, parse_output("json"), out, force_list=True)
    assert out.getvalue() == _slow({"apiVersion": "v1", "items": objs, "kind": "List",
                                    "metadata": {"resourceVersion": ""}})


def test_watch_event_keeps_type_first():
    """A `get -w -o json --output-watch-events` event keeps WatchEvent's order (type, then object): not orjson's."""
    from kctl.machinery.resources import builtin_registry
    from kctl.output.printers import WatchPrinter

    out = io.StringIO()
    WatchPrinter(builtin_registry().lookup("pods"), parse_output("json"), out, events=True).print("ADDED", POD)
    assert out.getvalue().startswith('{\n    "type": "ADDED",\n    "object": {')


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=repr)
def test_nan_prints_as_null(value):
    """NaN and Infinity (not JSON; kubectl cannot hold them) print as null, where json wrote the invalid NaN."""
    out = io.StringIO()
    print_objects([{**POD, "extra": value}], None, parse_output("json"), out)
    assert json.loads(out.getvalue())["extra"] is None
