"""Command-line usage errors as one line, kubectl-style. Called once by kctl.cli.main.main.

Click prints a usage error as four lines (the usage, a "Try ... --help" hint, a blank line,
`Error: ...`). kctl prints one, as its other errors: `error: MESSAGE See 'kctl get --help'
for usage.` (kubectl prints the same two sentences on two lines). The exit status stays 2.
"""

from __future__ import annotations

from typing import IO, Any

import click

#: the command a usage error names when Click gives it no context (errors of the option parser)
_fallback_path = "kctl"


def _show(self: click.UsageError, file: IO[Any] | None = None) -> None:
    """Print a usage error as one line on stderr."""
    message = " ".join(self.format_message().split())
    if message and message[-1] not in ".?!":
        message += "."
    path = self.ctx.command_path if self.ctx is not None else _fallback_path
    click.echo(f"error: {message} See '{path} --help' for usage.", file=file, err=file is None)


def one_line_usage_errors(*, command_path: str = "kctl") -> None:
    """Make every Click usage error print as one line; `command_path` is named when Click knows none."""
    global _fallback_path
    _fallback_path = command_path
    click.UsageError.show = _show  # type: ignore[method-assign]


__all__ = ["one_line_usage_errors"]
