"""Duration flags as kubectl reads them (`--timeout=30s`, `1m30s`, `0`, `-1s`): Click parameter types.

Every duration-taking option of the CLI (delete/wait/rollout status/drain/node remove `--timeout`,
logs `--since`, apply `--debounce`, the daemon's periods) converts its text with
kctl.machinery.times.parse_duration, the one parser; options declare `click_type=DURATION` (or
`duration(min=...)`), or call `parse_timeout` on a text value.
"""

from __future__ import annotations

from typing import Any

import click

#: kubectl's "a negative timeout means a week" (`kubectl wait --timeout=-1s`)
WEEK = 7 * 24 * 3600.0


class Duration(click.ParamType):
    """A Go duration (or bare seconds) as float seconds; `min` bounds it, negative means a week if `forever`."""

    name = "duration"

    def __init__(self, *, min: float | None = None, negative_is_forever: bool = False) -> None:
        self.min = min
        self.negative_is_forever = negative_is_forever

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        else:
            from kctl.machinery.times import parse_duration

            try:
                seconds = parse_duration(str(value))
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
        if seconds < 0 and self.negative_is_forever:
            return WEEK
        if self.min is not None and seconds < self.min:
            self.fail(f"{value} is less than the minimum of {self.min:g}s", param, ctx)
        return seconds

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "DURATION"


def duration(*, min: float | None = None) -> Duration:
    """A duration type with a lower bound (the daemon's periods)."""
    return Duration(min=min)


#: `--timeout`-style durations: 30s, 1m30s, 0; negative means a week, as kubectl's wait
DURATION = Duration(negative_is_forever=True)


def parse_timeout(text: str, *, option: str = "--timeout") -> float:
    """A `--timeout` given as text: seconds, a negative value is a week; BadParameter naming the option if bad."""
    try:
        return DURATION.convert(text, None, None)
    except click.BadParameter as exc:
        raise click.BadParameter(exc.message, param_hint=f"'{option}'") from None


__all__ = ["DURATION", "WEEK", "Duration", "duration", "parse_timeout"]
