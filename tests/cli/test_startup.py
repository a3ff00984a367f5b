"""Start-up cost of the CLI: a command line builds only the Click command it names (kctl.cli.main, argv)."""

from __future__ import annotations

import pytest

ARGVS = [
    "get pods --no-headers=true", "get pods --store X", "-n demo get pods", "delete cm x --wait=false",
    "rollout status deploy/x --store=s -n d", "exec p -- kctl --store x --wait=false",
    "daemon --store x --server ssh://h/db", "--store y daemon --store x", "node add h --ssh root@h --identity k",
    "nosuch --store x", "-n demo version", "-n=demo get pods", "set image deploy/x web=img:2",
]


@pytest.mark.parametrize(("argv", "verb"), [
    ("get pods", "get"),
    ("--store s get pods", "get"),
    ("--store=s --server ssh://h/db -n demo rollout status", "rollout"),
    ("-n=demo get pods", "get"),
    ("--identity k node add h", "node"),
    ("", None),
    ("--help", None),
    ("-h get", None),
    ("--store", None),
    ("-- get", None),
    ("--verbose get", None),
    ("nosuch", "nosuch"),
])
def test_verb_of(argv, verb):
    """verb_of finds the verb past the root's options and -n, and gives None when unsure."""
    from kctl.cli.argv import verb_of

    assert verb_of(argv.split()) == verb


def test_named_command_builds_only_itself(kctl, monkeypatch):
    """`kctl get pods` converts only `get` into a Click command; `kctl --help` still lists every command."""
    import typer.main

    built: list[str] = []
    convert = typer.main.get_command_from_info

    def counting(command_info, **kwargs):
        command = convert(command_info, **kwargs)
        built.append(command.name)
        return command

    monkeypatch.setattr(typer.main, "get_command_from_info", counting)
    assert kctl("get", "pods").code == 0
    assert built == ["get"]
    built.clear()
    result = kctl("--help")
    assert result.code == 0 and "apply" in result.out and "rollout" in result.out
    assert len(built) > 20


@pytest.mark.parametrize("argv", ARGVS)
def test_partial_tree_parses_as_the_whole(argv):
    """A line rewritten against the one-command tree is the line rewritten against every command."""
    from kctl.cli.argv import normalise, verb_of
    from kctl.cli.main import command

    args = argv.split()
    assert normalise(command(verb=verb_of(args)), args) == normalise(command(), args)


def test_partial_tree_has_the_same_commands():
    """Every verb's command from the one-command tree has the same help, options and Examples as in the whole."""
    import click

    from kctl.cli.main import command

    whole = command()
    for name, full in whole.commands.items():
        one = command(verb=name)
        assert list(one.commands) == [name]
        with click.Context(one.commands[name], info_name=name) as ctx_one, \
                click.Context(full, info_name=name) as ctx_full:
            assert one.commands[name].get_help(ctx_one) == full.get_help(ctx_full), name
