"""The CLI's shape: command modules mounted from main's table (no import loop), and a context object, not globals."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "kctl" / "cli"
MODULES = sorted(f"kctl.cli.{p.stem}" for p in CLI.glob("*.py") if p.stem not in ("__init__", "main"))


def test_no_cli_module_imports_main():
    """Importing any kctl.cli module (each in a fresh interpreter) does not import kctl.cli.main."""
    code = ("import importlib, sys\n"
            "bad = []\n"
            "for name in sys.argv[1:]:\n"
            "    importlib.import_module(name)\n"
            "    if 'kctl.cli.main' in sys.modules:\n"
            "        bad.append(name)\n"
            "        break\n"
            "print(','.join(bad))\n")
    for module in MODULES:  # one interpreter each: an earlier module must not hide a later one's import
        out = subprocess.run([sys.executable, "-c", code, module], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "", f"{module} imports kctl.cli.main"


@pytest.mark.parametrize("path", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_no_source_imports_main(path):
    """No kctl.cli module other than main names `kctl.cli.main` in an import, even inside a function."""
    if path.stem == "main":
        return
    lines = [line.strip() for line in path.read_text().splitlines()]
    assert not [line for line in lines if line.startswith(("from kctl.cli.main ", "import kctl.cli.main"))
                or line.startswith("from kctl.cli import") and " main" in line.split("import", 1)[1]]


def test_no_private_names_between_cli_modules():
    """No kctl.cli module imports another module's private (`_x`) name: what is shared is public."""
    import ast

    found = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kctl."):
                found += [f"{path.name}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert found == []


def test_command_table_is_what_the_modules_define():
    """main.COMMANDS names every command and group each module's own Typer app defines, and only those."""
    import importlib

    import typer
    import typer.main

    from kctl.cli.main import COMMANDS

    defined: dict[str, str] = {}
    for module in sorted(set(COMMANDS.values())):
        app = importlib.import_module(module).app
        assert isinstance(app, typer.Typer), module
        for info in app.registered_commands:
            defined[info.name or typer.main.get_command_name(info.callback.__name__)] = module
        for group in app.registered_groups:
            defined[typer.main.solve_typer_info_defaults(group).name] = module
    assert defined == COMMANDS


def test_one_verb_imports_one_command_module():
    """Building `kctl get` imports kctl.cli.get and no other command module."""
    code = ("import sys\n"
            "from kctl.cli.main import COMMANDS, command\n"
            "command(verb='get')\n"
            "print(sorted(m for m in set(COMMANDS.values()) if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['kctl.cli.get']"


def test_connect_has_no_module_globals():
    """kctl.cli.connect keeps no mutable module state: no STORE_PATH/SERVER_URL/IDENTITY, a frozen CLIContext."""
    from kctl.cli import connect

    for name in ("STORE_PATH", "SERVER_URL", "IDENTITY"):
        assert not hasattr(connect, name), name
    assert not hasattr(connect.api, "cache_clear"), "the API is kept per command (ctx.meta), not in a module cache"
    with pytest.raises(dataclasses.FrozenInstanceError):
        connect.CLIContext().store_path = "x"  # type: ignore[misc]
    assert connect.current() == connect.CLIContext()  # outside a command: the defaults


def test_store_follows_each_command_line(tmp_path):
    """Two command lines in one process with different --store each use their own store (nothing carried over)."""
    code = ("import sys\n"
            "from kctl.cli.main import main\n"
            "def run(*args):\n"
            "    try:\n"
            "        main(list(args))\n"
            "    except SystemExit as exc:\n"
            "        assert not exc.code, (args, exc.code)\n"
            "a, b = sys.argv[1:]\n"
            "run('--store', a, 'create', 'namespace', 'only-in-a')\n"
            "run('--store', b, 'create', 'namespace', 'only-in-b')\n"
            "run('--store', a, 'get', 'namespaces', '-o', 'name')\n")
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    out = subprocess.run([sys.executable, "-c", code, str(a), str(b)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "namespace/only-in-a" in out.stdout and "only-in-b" not in out.stdout.split("created")[-1]


def test_root_puts_the_context_on_ctx_obj(tmp_path):
    """The root callback gives commands a CLIContext with --store, --server and --identity as given."""
    import click

    from kctl.cli import connect
    from kctl.cli.main import command

    seen: list[connect.CLIContext] = []
    root = command(verb="version")
    root.commands["version"].callback = lambda **_: seen.append(connect.current())  # type: ignore[assignment]
    root.main(args=["--store", str(tmp_path / "s.db"), "--identity", "k", "version"], prog_name="kctl",
              standalone_mode=False)
    assert seen == [connect.CLIContext(store_path=str(tmp_path / "s.db"), server_url=None, identity="k")]
    assert click.get_current_context(silent=True) is None
