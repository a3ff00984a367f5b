"""Stored objects decode (orjson, else json) as json.loads reads them, whatever json wrote (sqlite._loads)."""

from __future__ import annotations

import json
import math

import pytest

from kctl.store.sqlite import _loads


@pytest.mark.parametrize("value", [
    {"a": [1, 2.5, None, True, "é 😀"]}, 2**63 - 1, -(2**63), 1e-7, 0.1,
    2**64, -(2**70),  # beyond 64 bits: orjson refuses, json reads them
    "\ud800",  # a lone surrogate json wrote (ensure_ascii=False): orjson refuses it
    "x" * (70 << 10),  # beyond FAST_DECODE_LIMIT: json decodes it
], ids=lambda v: repr(v)[:20])
def test_decode_is_jsons(value):
    """Each stored text reads back as json.loads reads it, as str or bytes (a decrypted Secret)."""
    text = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode({"v": value})
    assert _loads(text) == json.loads(text)
    if "\ud800" not in text:
        assert _loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize("text", ['{"v":NaN}', '{"v":Infinity}', '{"v":-Infinity}'])
def test_decode_reads_what_only_json_writes(text):
    """NaN and Infinity, which json writes by default, read back as json reads them."""
    value = _loads(text)["v"]
    assert math.isnan(value) if "NaN" in text else math.isinf(value)


def test_store_round_trip(tmp_path):
    """Objects with numbers orjson refuses (beyond 64 bits, NaN) are stored, got and listed back as written."""
    from kctl.store.sqlite import Store

    store = Store(tmp_path / "kctl.db")
    try:
        objs = {"a": {"metadata": {"name": "a"}, "data": {"big": 2**80}},
                "b": {"metadata": {"name": "b"}, "data": {"small": 7, "f": 1e-7}},
                "c": {"metadata": {"name": "c"}, "data": {"nan": float("nan")}}}
        with store.transaction() as tx:
            for name, obj in objs.items():
                tx.put("ConfigMap", "default", name, obj, event="ADDED")
        assert store.get("ConfigMap", "default", "a")["data"]["big"] == 2**80
        listed, _ = store.list("ConfigMap")
        assert [o["data"].get("big") or o["data"].get("small") for o in listed[:2]] == [2**80, 7]
        assert math.isnan(listed[2]["data"]["nan"])
    finally:
        store.close()
