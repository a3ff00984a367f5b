"""--sort-by's order (kctl.output.sorting.sort_objects) and a CRD's printer-column cells, as kubectl."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from kctl.machinery.errors import ClientSideError
from kctl.output.crdcolumns import PrinterColumn, crd_cell, crd_columns
from kctl.output.sorting import natural_less, sort_objects


@pytest.mark.parametrize(("a", "b", "less"), [
    ("a", "b", True), ("b", "a", False), ("a2", "a10", True), ("a10", "a2", False),
    ("a02", "a2", False), ("a2", "a02", True), ("1", "a", True), ("a", "1", False),
    ("x", "xy", True), ("same", "same", False), ("v1.9", "v1.10", True),
], ids=lambda v: repr(v))
def testnatural_less(a, b, less):
    """Strings compare as sortorder.NaturalLess: digit runs by value, then fewer leading zeros first."""
    assert natural_less(a, b) is less


def _objs(*values):
    return [{"metadata": {"name": f"o{i}"}, "v": v} if v is not None else {"metadata": {"name": f"o{i}"}}
            for i, v in enumerate(values)]


@pytest.mark.parametrize(("values", "order"), [
    ((10, 9, 100), ["o1", "o0", "o2"]),
    ((1.5, 0.25, 1), ["o1", "o2", "o0"]),
    (("1Gi", "512Mi", "2"), ["o2", "o1", "o0"]),
    (("web-10", "web-9", "web-1"), ["o2", "o1", "o0"]),
    (("2024-05-01T00:00:00Z", "2023-12-31T23:59:59Z"), ["o1", "o0"]),
    (("b", None, "a"), ["o1", "o2", "o0"]),
    ((True, False), ["o1", "o0"]),
], ids=["ints", "floats", "quantities", "natural", "timestamps", "missing-first", "bools"])
def test_sort_objects(values, order):
    """Numbers numerically, quantities by value, strings naturally, timestamps in time order."""
    assert [o["metadata"]["name"] for o in sort_objects(_objs(*values), ".v")] == order


def test_sort_objects_errors():
    """A path no object has, or values of different types, are one clear error."""
    with pytest.raises(ClientSideError, match="couldn't find any field"):
        sort_objects(_objs(1, 2), "{.nope}")
    with pytest.raises(ClientSideError, match="unsortable"):
        sort_objects(_objs(1, "a"), ".v")


NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize(("column", "obj", "cell"), [
    (PrinterColumn("N", "integer", ".spec.n"), {"spec": {"n": 3}}, "3"),
    (PrinterColumn("N", "integer", ".spec.n"), {"spec": {"n": 2.7}}, "2"),
    (PrinterColumn("N", "integer", ".spec.n"), {"spec": {"n": "x"}}, ""),
    (PrinterColumn("F", "number", ".spec.f"), {"spec": {"f": 2}}, "2"),
    (PrinterColumn("F", "number", ".spec.f"), {"spec": {"f": 0.5}}, "0.5"),
    (PrinterColumn("B", "boolean", ".ok"), {"ok": False}, "false"),
    (PrinterColumn("S", "string", ".s"), {"s": {"a": 1}}, '{"a":1}'),
    (PrinterColumn("S", "string", ".s"), {}, ""),
    (PrinterColumn("D", "date", ".t"), {"t": (NOW - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")}, "5m"),
    (PrinterColumn("D", "date", ".t"), {"t": "yesterday"}, "<invalid>"),
], ids=["int", "int-from-float", "int-wrong-type", "number", "number-frac", "bool", "string-of-map",
        "missing", "date", "bad-date"])
def test_crd_cells(column, obj, cell):
    """Cells follow the apiextensions table convertor: typed values, dates as ages, missing empty."""
    assert crd_cell(column, obj, NOW) == cell


def test_crd_columns_default_and_version():
    """Columns come from the named version; a version without any gets the server's Age column."""
    crd = {"spec": {"versions": [
        {"name": "v1", "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size",
                                                      "priority": 1}]},
        {"name": "v2"}]}}
    assert crd_columns(crd, "v1") == (PrinterColumn("Size", "integer", ".spec.size", 1),)
    assert [c.name for c in crd_columns(crd, "v2")] == ["Age"]
