"""Every command has help text and a section in the CLI reference (docs/cli.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kctl.cli.main import _register, app

_register()
COMMANDS = sorted(c.name or c.callback.__name__ for c in app.registered_commands)
REFERENCE = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()


@pytest.mark.parametrize("name", COMMANDS, ids=COMMANDS)
def test_command_documented(name, kctl):
    """`kctl NAME --help` works, has a description, and docs/cli.md has `## kctl NAME`."""
    result = kctl(name, "--help")
    assert result.code == 0 and f"Usage: kctl {name}" in result.out
    assert len([line for line in result.out.splitlines()[1:] if line.strip()]) >= 2
    assert f"## kctl {name}\n" in REFERENCE
