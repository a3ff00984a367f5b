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


def _tree():
    from kctl.cli.examples import walk
    from kctl.cli.main import command

    root = command()
    return root, walk(root)


PATHS = [path for path, _ in _tree()[1]]


@pytest.mark.parametrize("path", PATHS, ids=[p or "kctl" for p in PATHS])
def test_help_has_examples(path, kctl):
    """`kctl PATH --help` (sub-command groups too) ends with an Examples section, as kubectl's."""
    result = kctl(*path.split(), "--help")
    assert result.code == 0, result.err
    section = result.out[result.out.index("\nExamples:\n") + 1:]
    assert section.splitlines()[1].startswith("  # ") and "\n  kctl" in section


def _example_commands() -> list[tuple[str, str]]:
    import re

    from kctl.cli.examples import EXAMPLES

    found = []
    for path, body in EXAMPLES.items():
        for line in body.splitlines():
            match = re.search(r"(?:^|[|(] *)(kctl [^|>)]*)", line)
            if match:
                found.append((path, match.group(1).strip()))
    return found


EXAMPLE_LINES = _example_commands()


@pytest.mark.parametrize(("path", "line"), EXAMPLE_LINES, ids=[line for _, line in EXAMPLE_LINES])
def test_example_parses(path, line):
    """Every example names an existing command path, and its flags and arguments parse."""
    import shlex

    from kctl.cli.argv import normalise

    root, _ = _tree()
    args = normalise(root, shlex.split(line)[1:])
    ctx = root.make_context("kctl", args)
    while True:
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not hasattr(ctx.command, "resolve_command") or not rest:
            break
        name, cmd, rest = ctx.command.resolve_command(ctx, rest)
        ctx = cmd.make_context(name, rest, parent=ctx)
    used = ctx.command_path.removeprefix("kctl").strip()
    assert used == path or (used.startswith(path + " ") if path else used), (used, path)


HIDDEN = {path for path, cmd in _tree()[1] if getattr(cmd, "hidden", False)}


@pytest.mark.parametrize("path", [p for p in PATHS if p and p not in HIDDEN],
                         ids=[p for p in PATHS if p and p not in HIDDEN])
def test_every_command_path_in_reference(path):
    """Every command path, sub-command groups' too (`kctl node trust`), has a heading in docs/cli.md."""
    top = path.split()[0]
    assert f"## kctl {top}\n" in REFERENCE
    if " " in path:
        assert f"### kctl {path}\n" in REFERENCE or f"## kctl {path}\n" in REFERENCE, \
            f"docs/cli.md has no `### kctl {path}` heading"
