"""Kubernetes' timestamps: RFC 3339 text (Time "2026-12-02T16:00:00Z", MicroTime with
microseconds) to and from aware datetimes. One parser for every part of kctl."""

from __future__ import annotations

import datetime as dt


def parse_time(text: object) -> dt.datetime | None:
    """An RFC 3339 timestamp (fractions and offsets allowed) as an aware datetime; None if absent or bad."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def parse_seconds(text: object) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch; None if absent or bad."""
    value = parse_time(text)
    return None if value is None else value.timestamp()


def format_time(when: dt.datetime) -> str:
    """An aware datetime as Kubernetes' Time (whole seconds, UTC, "Z")."""
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def to_datetime(seconds: float) -> dt.datetime:
    """Seconds since the epoch as an aware UTC datetime."""
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)


__all__ = ["format_time", "parse_seconds", "parse_time", "to_datetime"]
