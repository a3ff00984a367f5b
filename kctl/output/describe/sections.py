"""The sections kubectl describe shares between kinds: name header, labels, annotations,
tolerations, taints, the controller, the Events table, and Go's RFC1123Z timestamps.

Each `write_*` function writes its section to a PrefixWriter exactly as kubectl does (an empty
one as `<none>`; annotations without last-applied-configuration, long values folded). Called
by the describers of this package (pods, workloads, nodes, networking, config, generic).
"""

from __future__ import annotations

from datetime import datetime, timezone

from kctl.machinery.times import parse_time
from kctl.output.cells import age
from kctl.output.describe.writer import PrefixWriter

__all__ = ["LAST_APPLIED", "controller_of", "rfc1123z", "write_annotations", "write_events", "write_header",
           "write_labels", "write_taints", "write_tolerations"]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_MAX_ANNOTATION_LEN = 140
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def rfc1123z(timestamp: object) -> str:
    """Go's time.RFC1123Z in the local zone (`Wed, 02 Dec 2026 16:00:00 +0000`), as kubectl prints."""
    parsed = parse_time(timestamp)
    if parsed is None:
        return "Mon, 01 Jan 0001 00:00:00 +0000"
    local = parsed.astimezone()
    return (f"{_DAYS[local.weekday()]}, {local.day:02d} {_MONTHS[local.month - 1]} {local.year:04d} "
            f"{local.hour:02d}:{local.minute:02d}:{local.second:02d} {local.strftime('%z')}")


def write_header(w: PrefixWriter, meta: dict, *, namespace: bool = True) -> None:
    """`Name:` and (for a namespaced kind) `Namespace:`."""
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    if namespace:
        w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")


def write_labels(w: PrefixWriter, title: str, labels: dict | None) -> None:
    """`title:` then one `key=value` a line, sorted by key (also used for node selectors)."""
    w.write(0, f"{title}:\t")
    if not labels:
        w.write(0, "<none>\n")
        return
    for i, key in enumerate(sorted(labels)):
        if i:
            w.write(0, "\t")
        w.write(0, f"{key}={labels[key]}\n")


def write_annotations(w: PrefixWriter, title: str, annotations: dict | None) -> None:
    """`title:` then `key: value` lines, sorted; long or multi-line values folded and cut as kubectl does."""
    w.write(0, f"{title}:\t")
    keys = sorted(k for k in annotations or {} if k != LAST_APPLIED)
    if not keys:
        w.write(0, "<none>\n")
        return
    for i, key in enumerate(keys):
        if i:
            w.write(0, "\t")
        value = str(annotations[key]).removesuffix("\n")
        if len(value) + len(key) + 2 > _MAX_ANNOTATION_LEN or "\n" in value:
            w.write(0, f"{key}:\n")
            for line in value.split("\n"):
                limit = _MAX_ANNOTATION_LEN - 2
                w.write(0, f"\t  {line[:limit] + '...' if len(line) > limit else line}\n")
        else:
            w.write(0, f"{key}: {value}\n")


def write_tolerations(w: PrefixWriter, title: str, tolerations: list | None) -> None:
    """`title:` then one toleration a line (`key=value:Effect op=Exists for 300s`), sorted by key."""
    w.write(0, f"{title}:\t")
    if not tolerations:
        w.write(0, "<none>\n")
        return
    for i, t in enumerate(sorted(tolerations, key=lambda t: t.get("key") or "")):
        if i:
            w.write(0, "\t")
        text = t.get("key") or ""
        if t.get("value"):
            text += f"={t['value']}"
        if t.get("effect"):
            text += f":{t['effect']}"
        if t.get("operator") == "Exists" and not t.get("value"):
            text += " op=Exists" if (t.get("key") or t.get("effect")) else "op=Exists"
        if t.get("tolerationSeconds") is not None:
            text += f" for {t['tolerationSeconds']}s"
        w.write(0, text + "\n")


def write_taints(w: PrefixWriter, title: str, taints: list | None) -> None:
    """`title:` then one `key=value:Effect` a line, sorted by effect then key."""
    w.write(0, f"{title}:\t")
    if not taints:
        w.write(0, "<none>\n")
        return
    ordered = sorted(taints, key=lambda t: f"{t.get('effect', '')},{t.get('key', '')}")
    for i, t in enumerate(ordered):
        if i:
            w.write(0, "\t")
        text = t.get("key", "") + (f"={t['value']}" if t.get("value") else "")
        w.write(0, f"{text}:{t.get('effect', '')}\n")


def controller_of(obj: dict) -> str:
    """`Kind/name` of the object's controller owner reference, or ``."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return f"{ref.get('kind', '')}/{ref.get('name', '')}"
    return ""


def write_events(w: PrefixWriter, events: list[dict], now: datetime) -> None:
    """kubectl's DescribeEvents: a table sorted by lastTimestamp; `5m (x3 over 10m)` when repeated."""
    if not events:
        w.write(0, "Events:\t<none>\n")
        return
    w.flush()

    def last_seen(e: dict) -> str:
        return (e.get("lastTimestamp") or (e.get("series") or {}).get("lastObservedTime")
                or e.get("eventTime") or e.get("firstTimestamp") or "")

    w.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
    w.write(1, "----\t------\t----\t----\t-------\n")
    for e in sorted(events, key=lambda e: parse_time(last_seen(e)) or datetime.min.replace(
            tzinfo=timezone.utc)):
        first = age(e.get("eventTime") or e.get("firstTimestamp"), now)
        series = e.get("series")
        if series:
            interval = f"{age(series.get('lastObservedTime'), now)} (x{series.get('count', 0)} over {first})"
        elif (e.get("count") or 0) > 1:
            interval = f"{age(e.get('lastTimestamp'), now)} (x{e['count']} over {first})"
        else:
            interval = first
        source = (e.get("source") or {}).get("component") or e.get("reportingComponent") or ""
        message = (e.get("message") or "").strip()
        w.write(1, f"{e.get('type', '')}\t{e.get('reason', '')}\t{interval}\t{source}\t{message}\n")
