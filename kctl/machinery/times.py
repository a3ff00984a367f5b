"""Kubernetes' timestamps: RFC 3339 text (Time "2026-12-02T16:00:00Z", MicroTime with
microseconds) to and from aware datetimes. One parser for every part of kctl. Also Go
durations ("1m30s"), as kubectl reads them."""

from __future__ import annotations

import datetime as dt
import re


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


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_BARE_SECONDS = re.compile(r"\d+(?:\.\d*)?|\.\d+")


def parse_duration(text: str) -> float:
    """Go's time.ParseDuration, in seconds: 10s, 5m, 1h30m, 1.5h, 500ms, 0, -1s.

    The one duration parser of kctl: every `--timeout`, `--since`, `--interval`, `--debounce`
    and the daemon's periods read their value with it. A bare number is seconds (`30`, `0.5`),
    which Go refuses ("missing unit") but kctl has always taken; ValueError with Go's wording else.
    """
    if not isinstance(text, str):
        raise ValueError(f"time: invalid duration {text!r}")
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body[1:] if body[:1] in "+-" else body
    if not body:
        raise ValueError(f'time: invalid duration "{text}"')
    if _BARE_SECONDS.fullmatch(body):
        return sign * float(body)
    pos, total = 0, 0.0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None:
            raise ValueError(f'time: invalid duration "{text}"')
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    return sign * total


__all__ = ["format_time", "parse_duration", "parse_seconds", "parse_time", "to_datetime"]
