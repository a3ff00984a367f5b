"""kctl.output.tables: every kind's row function fills exactly the columns its table declares, narrow and wide."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import BUILTIN
from kctl.output.tables import GENERIC, TABLES, Table

NOW = datetime(2026, 12, 2, 17, 0, 0, tzinfo=timezone.utc)
#: a bare object (only a name) and one whose every top-level field is an empty mapping
OBJECTS = [{"metadata": {"name": "x"}},
           {"metadata": {"name": "x", "creationTimestamp": "2026-12-02T16:00:00Z"}, "spec": {}, "status": {}}]


@pytest.mark.parametrize("kind", sorted(TABLES) + ["(generic)"])
@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
def test_row_has_a_cell_per_header(kind: str, wide: bool) -> None:
    """A row of any kind has as many cells as its header, even for an object with no spec or status."""
    table = TABLES.get(kind, GENERIC)
    for obj in OBJECTS:
        row = table.row(obj, wide, NOW)
        assert len(row) == len(table.header(wide=wide)), (kind, obj)
        assert all(isinstance(cell, str) for cell in row)


def test_every_table_names_a_kind_kctl_knows() -> None:
    """Each TABLES key is a built-in kind's `Kind.group`, so no table is unreachable by a typo."""
    assert set(TABLES) <= {rt.group_kind for rt in BUILTIN}


@pytest.mark.parametrize("table, wide, expected", [
    (Table(("NAME", "AGE"), ("IP",), lambda o, w, n: []), False, ("NAME", "AGE")),
    (Table(("NAME", "AGE"), ("IP",), lambda o, w, n: []), True, ("NAME", "AGE", "IP")),
    (Table(("NAME", "AGE"), ("AGE", "NAME", "IP"), lambda o, w, n: [], wide_replaces=True), True,
     ("AGE", "NAME", "IP")),
], ids=["narrow", "wide-adds", "wide-replaces"])
def test_header(table: Table, wide: bool, expected: tuple[str, ...]) -> None:
    """`-o wide` adds the wide headers after the others, or replaces them (Event's wide view)."""
    assert table.header(wide=wide) == expected
