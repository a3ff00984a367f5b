"""kctl.output.cells: ages and durations as apimachinery's HumanDuration, selectors as metav1.FormatLabelSelector."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from kctl.output.cells import age, format_label_selector, format_labels, human_duration

NOW = datetime(2026, 12, 2, 17, 0, 0, tzinfo=timezone.utc)
CREATED = "2026-12-02T16:00:00Z"  # 60m before NOW


DURATIONS = [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (45, "45s"), (119, "119s"), (120, "2m"), (330, "5m30s"),
    (600, "10m"), (10799, "179m"), (3 * 3600 + 120, "3h2m"), (5 * 3600, "5h"), (8 * 3600, "8h"),
    (47 * 3600 + 59, "47h"), (48 * 3600, "2d"), (53 * 3600, "2d5h"), (8 * 86400, "8d"),
    (400 * 86400, "400d"), (730 * 86400, "2y"), (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y"),
]


@pytest.mark.parametrize("seconds,expected", DURATIONS, ids=[c[1] + f"-{c[0]}" for c in DURATIONS])
def test_human_duration(seconds, expected):
    """Ages read as kubectl's HumanDuration."""
    assert human_duration(seconds) == expected


AGES = [(CREATED, "60m"), ("2026-12-02T16:59:15.5Z", "44s"), ("2026-12-02T17:00:00+01:00", "60m"),
        (None, "<unknown>"), ("not a time", "<unknown>")]


@pytest.mark.parametrize("timestamp,expected", AGES, ids=[str(c[0]) for c in AGES])
def test_age(timestamp, expected):
    """AGE comes from an RFC 3339 creationTimestamp; missing or bad is `<unknown>`."""
    assert age(timestamp, NOW) == expected


SELECTORS = [
    ({"matchLabels": {"tier": "fe", "app": "web"}}, "app=web,tier=fe"),
    ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]},
                           {"key": "canary", "operator": "DoesNotExist"},
                           {"key": "zone", "operator": "Exists"},
                           {"key": "os", "operator": "NotIn", "values": ["win"]}]},
     "!canary,env in (dev,prod),os notin (win),zone"),
    ({}, "<none>"),
]


@pytest.mark.parametrize("selector,expected", SELECTORS, ids=["labels", "expressions", "empty"])
def test_format_label_selector(selector, expected):
    """Selectors print as kubectl's label selector strings, sorted by key."""
    assert format_label_selector(selector) == expected


@pytest.mark.parametrize("labels,expected", [({"b": "2", "a": "1"}, "a=1,b=2"), ({}, "<none>"), (None, "<none>")],
                         ids=["sorted", "empty", "none"])
def test_format_labels(labels, expected):
    """Label sets print as labels.FormatLabels: sorted `k=v` pairs, `<none>` when empty."""
    assert format_labels(labels) == expected
