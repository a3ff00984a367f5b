"""A PodDisruptionBudget as kubectl shows it: `describe pdb` (describePodDisruptionBudgetV1) and the ALLOWED
DISRUPTIONS column read from the status the disruption controller writes."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import builtin_registry
from kctl.output.describe import describe
from kctl.output.tables import TABLES

NOW = datetime(2026, 12, 2, 17, 0, 0, tzinfo=timezone.utc)
STATUS = {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3,
          "observedGeneration": 1}


def _pdb(spec: dict, status: dict | None = None) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2026-12-02T16:00:00Z"},
            "spec": spec, "status": status or {}}


@pytest.mark.parametrize("spec, head", [
    ({"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
     ["Name:           web", "Namespace:      default", "Min available:  2", "Selector:       app=web"]),
    ({"maxUnavailable": "25%", "selector": {"matchLabels": {"tier": "db", "app": "web"}}},
     ["Name:             web", "Namespace:        default", "Max unavailable:  25%",
      "Selector:         app=web,tier=db"]),
    ({"minAvailable": 1, "selector": {}},
     ["Name:           web", "Namespace:      default", "Min available:  1", "Selector:       "]),
])
def test_describe_pdb_as_kubectl(spec, head):
    """Name, Namespace, the budget, Selector; then Status counts indented two levels and Events (one tab block,
    as Go's tabwriter aligns them: the `Status:` line without a tab ends the first block)."""
    text = describe(_pdb(spec, STATUS), builtin_registry().lookup("pdb"), [], now=NOW)
    assert text.splitlines() == [
        *head,
        "Status:",
        "    Allowed disruptions:  1",
        "    Current:              3",
        "    Desired:              2",
        "    Total:                3",
        "Events:                   <none>",
    ]


@pytest.mark.parametrize("status, allowed", [({}, "0"), (STATUS, "1")])
def test_allowed_disruptions_column_reads_the_status(status, allowed):
    """ALLOWED DISRUPTIONS is status.disruptionsAllowed (0 before the controller has written it)."""
    row = TABLES["PodDisruptionBudget.policy"].row(_pdb({"minAvailable": 2}, status), False, NOW)
    assert row == ["web", "2", "N/A", allowed, "60m"]
