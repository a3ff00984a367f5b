"""compactjson writes what json wrote (orjson where it can), so stored texts and measured sizes stay the same."""

from __future__ import annotations

import json

import pytest

from kctl.machinery import compactjson
from kctl.machinery.limits import encoded_size

_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


@pytest.mark.parametrize("obj", [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "labels": {"é": "😀 \u2028"}},
     "spec": {"containers": [{"name": "c", "args": ["x", 1, 2.5, None, True, False, -(2**63), 2**63 - 1]}]}},
    {"v": 2**64}, {"v": -(2**70)},  # beyond 64 bits: orjson refuses, json writes them
    {"v": "\ud800"},  # a lone surrogate: orjson refuses it
    {1: "an integer key"},  # json writes it as a string, orjson refuses it
    [], {}, "plain", 0.1, 1.5e300,
], ids=lambda v: repr(v)[:24])
def test_text_is_jsons_and_encode_its_utf8(obj):
    assert compactjson.text(obj) == _json(obj)
    assert compactjson.encode(obj) == _json(obj).encode("utf-8", "surrogatepass")
    assert encoded_size(obj) == len(_json(obj).encode("utf-8", "surrogatepass"))


def test_small_floats_read_back_as_the_same_number():
    assert json.loads(compactjson.text({"v": 1e-05})) == {"v": 1e-05}


def test_what_is_not_json_raises_as_json_does():
    with pytest.raises(TypeError):
        compactjson.text({"v": object()})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), None])
def test_nan_and_infinities_are_written_as_json_writes_them(value):
    assert compactjson.text({"v": value, "w": [1]}) == _json({"v": value, "w": [1]})
    assert compactjson.encode({"v": value}) == _json({"v": value}).encode()
