"""kctl.output.tables' GitSource row: its short revision agrees with git sync's, with no import of kctl.sync."""

from __future__ import annotations

import io
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import builtin_registry
from kctl.output.formats import parse_output
from kctl.output.printers import print_objects
from kctl.output.tables import short_revision
from kctl.sync import reconcile

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize("revision", [f"main@{SHA}", f"folder:{SHA}", SHA, "v1.0@abc", "short", "",
                                      f"feature/x@y@{SHA}"])
def test_short_revision_matches_git_sync(revision: str) -> None:
    """The printer's short revision is the one git sync computes, for every form of revision."""
    assert short_revision(revision) == reconcile.short_revision(revision)


def test_gitsource_table_row() -> None:
    """`kctl get gitsources` prints the short revision and the Ready condition's status and message."""
    rtype = builtin_registry().lookup("gitsources")
    obj = {"apiVersion": "kctl.io/v1alpha1", "kind": "GitSource",
           "metadata": {"name": "app", "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"url": "https://example.invalid/app.git"},
           "status": {"lastAppliedRevision": f"main@{SHA}",
                      "conditions": [{"type": "Other", "status": "False"},
                                     {"type": "Ready", "status": "True", "message": "applied"}]}}
    out = io.StringIO()
    print_objects([obj], rtype, parse_output(None), out, err=io.StringIO(),
                  now=datetime(2026, 1, 1, 0, 5, tzinfo=timezone.utc))
    row = out.getvalue().splitlines()[1].split()
    assert row == ["app", "https://example.invalid/app.git", f"main@{SHA[:12]}", "True", "applied", "5m"]


def test_output_does_not_import_sync() -> None:
    """Printing a GitSource row loads no module of kctl.sync (output sits below sync)."""
    code = ("import io, sys\n"
            "from kctl.machinery.resources import builtin_registry\n"
            "from kctl.output.formats import parse_output\n"
            "from kctl.output.printers import print_objects\n"
            "obj = {'kind': 'GitSource', 'metadata': {'name': 'a'}, 'status': {'lastAppliedRevision': 'main@abc'}}\n"
            "print_objects([obj], builtin_registry().lookup('gitsources'), parse_output(None), io.StringIO(),\n"
            "              err=io.StringIO())\n"
            "assert not [m for m in sys.modules if m.startswith('kctl.sync')], sorted(sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
