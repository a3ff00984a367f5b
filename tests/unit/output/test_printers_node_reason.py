"""`get nodes -o wide`'s REASON column: why a node is not Ready, or what its agent just could not do."""

from __future__ import annotations

import io
from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import builtin_registry
from kctl.output.formats import parse_output
from kctl.output.printers import print_objects

NOW = datetime(2026, 12, 2, 17, 0, 0, tzinfo=timezone.utc)


def node(ready: str, reason: str = "", annotations: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "h3", "creationTimestamp": "2026-12-02T16:00:00Z", "annotations": annotations or {}},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": reason}]}}


@pytest.mark.parametrize("obj, reason", [
    (node("True", "KubeletReady"), "<none>"),
    (node("Unknown", "HostKeyChanged", {"kctl.io/unreachable-reason": "HostKeyChanged"}), "HostKeyChanged"),
    (node("False", "PodmanSocketMissing"), "PodmanSocketMissing"),
    (node("True", "KubeletReady", {"kctl.io/unreachable-reason": "ConnectionRefused"}), "ConnectionRefused"),
], ids=["ready", "unknown-rekeyed", "not-ready", "within-grace"])
def test_wide_reason_column(obj, reason):
    """The last wide column names the Ready condition's reason when not True, else the agent's latest cause."""
    out = io.StringIO()
    print_objects([obj], builtin_registry().lookup("nodes"), parse_output("wide"), out, err=io.StringIO(), now=NOW)
    header, row = out.getvalue().splitlines()
    assert header.split()[-1] == "REASON"
    assert row.split()[-1] == reason
