"""describe for ResourceQuota, LimitRange and PriorityClass: kubectl's describeQuota, describeLimitRange and
describePriorityClass layouts, aligned as kubectl's tabwriter aligns them (a line without tabs, as a scope's help
text, ends a block of aligned columns)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import builtin_registry
from kctl.output.describe import describe

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)

QUOTA_TEXT = """\
Name:       best
Namespace:  team
Scopes:     BestEffort
 * Matches all pods that do not have resource requirements set. These pods have a best effort quality of service.
Resource  Used   Hard
--------  ----   ----
memory    512Mi  1Gi
pods      1      2
"""

LIMITS_TEXT = """\
Name:       lr
Namespace:  team
Type        Resource  Min   Max  Default Request  Default Limit  Max Limit/Request Ratio
----        --------  ---   ---  ---------------  -------------  -----------------------
Container   cpu       100m  1    250m             500m           -
Container   memory    -     1Gi  -                -              -
Pod         cpu       -     2    -                -              4
"""

PC_TEXT = """\
Name:              high
Value:             1000
GlobalDefault:     true
PreemptionPolicy:  Never
Description:       for the web tier
Annotations:       <none>
Events:            <none>
"""

CASES = [
    ("resourcequotas",
     {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "best", "namespace": "team"},
      "spec": {"hard": {"pods": "2", "memory": "1Gi"}, "scopes": ["BestEffort"]},
      "status": {"hard": {"pods": "2", "memory": "1Gi"}, "used": {"pods": "1", "memory": "536870912"}}},
     QUOTA_TEXT),
    ("limitranges",
     {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": "team"},
      "spec": {"limits": [{"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "1", "memory": "1Gi"},
                           "defaultRequest": {"cpu": "250m"}, "default": {"cpu": "0.5"}},
                          {"type": "Pod", "max": {"cpu": "2"}, "maxLimitRequestRatio": {"cpu": "4"}}]}},
     LIMITS_TEXT),
    ("priorityclasses",
     {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
      "value": 1000, "globalDefault": True, "preemptionPolicy": "Never", "description": "for the web tier"},
     PC_TEXT),
]


@pytest.mark.parametrize("resource, obj, text", CASES, ids=["quota-with-scope", "limit-range", "priority-class"])
def test_layouts_are_kubectls(resource, obj, text):
    """Quota: scopes with help text, used written in hard's format; LimitRange: `-` where unset, quantities
    canonical; PriorityClass: its fields and events."""
    assert describe(obj, builtin_registry().lookup(resource), [], now=NOW) == text
