"""What a table cell says for times and labels, as kubectl prints them: ages, durations, label sets, selectors.

apimachinery's HumanDuration and kubectl's translateTimestampSince, labels.FormatLabels and
metav1.FormatLabelSelector. Called by the per-kind rows (kctl.output.tables), the printers
(`--show-labels`), CRD printer columns (kctl.output.crdcolumns) and describe.
"""

from __future__ import annotations

from datetime import datetime

from kctl.machinery.times import parse_time

__all__ = ["human_duration", "age", "format_labels", "format_label_selector"]


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery's HumanDuration: 45s, 5m30s, 3h2m, 2d5h, 400d, 2y30d."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        s = secs % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def age(timestamp: object, now: datetime) -> str:
    """kubectl's translateTimestampSince: the human duration since `timestamp`, `<unknown>` if none."""
    parsed = parse_time(timestamp)
    if parsed is None:
        return "<unknown>"
    return human_duration((now - parsed).total_seconds())


def format_labels(labels: dict | None) -> str:
    """labels.FormatLabels: `a=1,b=2` sorted by key, `<none>` if empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_label_selector(selector: dict | None, *, empty: str = "<none>") -> str:
    """metav1.FormatLabelSelector: `app=web,tier in (a,b),!canary`, sorted by key."""
    if not selector:
        return empty
    reqs: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        reqs.append((key, f"{key}={value}"))
    for expr in selector.get("matchExpressions") or ():
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = ",".join(sorted(expr.get("values") or ()))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                "Exists": key, "DoesNotExist": f"!{key}"}.get(op, f"{key} {op} ({values})")
        reqs.append((key, text))
    if not reqs:
        return empty
    return ",".join(text for _, text in sorted(reqs, key=lambda r: r[0]))
