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


@pytest.mark.parametrize(("argv", "expected"), [
    ("version", ({}, None)),
    ("version -o json", ({}, "json")),
    ("version --output json", ({}, "json")),
    ("version --output=json", ({}, "json")),
    ("version -ojson", ({}, "json")),
    ("version -o=json", ({}, "json")),
    ("--store s version", ({"--store": "s"}, None)),
    ("version --store=s --store t -o json", ({"--store": "t"}, "json")),
    ("--server ssh://h/db --identity k version", ({"--server": "ssh://h/db", "--identity": "k"}, None)),
    ("version -o yaml", None),
    ("version -o", None),
    ("version --help", None),
    ("version -o json -o json", None),
    ("version extra", None),
    ("-n demo version", None),
    ("version --store", None),
    ("get pods", None),
    ("", None),
], ids=lambda v: v if isinstance(v, str) else None)
def test_plain_version(argv, expected):
    """plain_version accepts `kctl version [-o json]` with the root options anywhere, and nothing else."""
    from kctl.cli.argv import plain_version

    assert plain_version(argv.split()) == expected


def test_version_imports_neither_click_nor_typer(store_path):
    """`kctl version` runs (in a fresh interpreter) without importing Click or Typer."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from kctl.cli.main import main\n"
            "main(['version'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'typer')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "Client Version: v0.1.0"
    assert out.stdout.splitlines()[-1] == "[]"


@pytest.mark.parametrize("argv", [
    ["version"], ["version", "-o", "json"], ["version", "--output=json"], ["version", "-ojson"],
    ["--store", "{store}", "version"], ["version", "--store", "{store}", "-o", "json"],
    ["--store", "{missing}", "version"], ["--store", "{nofolder}", "version", "-o", "json"],
    ["--store", "", "version"],
], ids=["plain", "-o-json", "--output=json", "-ojson", "store-before", "store-after", "missing-store",
        "missing-folder", "empty-store"])
def test_version_without_click_prints_what_click_does(kctl, store_path, tmp_path, monkeypatch, argv):
    """Each line answered without Click has the output, errors and exit status of the Click path."""
    import kctl.cli.main as main

    other = tmp_path / "other" / "kctl.db"
    other.parent.mkdir()
    assert kctl("--store", str(other), "init").code == 0
    names = {"store": str(other), "missing": str(tmp_path / "other" / "none.db"),
             "nofolder": str(tmp_path / "none" / "kctl.db")}
    args = [a.format(**names) for a in argv]
    fast = kctl(*args)
    monkeypatch.setattr(main, "_answer_without_click", lambda _args: False)
    slow = kctl(*args)
    assert (fast.code, fast.out, fast.err) == (slow.code, slow.out, slow.err)
    assert fast.out or fast.err


def test_complete_var_is_completions():
    """main's name for the completion variable is kctl.cli.completion's (main reads it without importing Click)."""
    from kctl.cli.completion import COMPLETE_VAR
    from kctl.cli.main import COMPLETE_VAR as main_var

    assert main_var == COMPLETE_VAR


def test_apply_of_a_valid_pod_imports_no_jsonschema(store_path, tmp_path):
    """`kctl apply` of a valid Pod (a fresh interpreter) imports neither jsonschema nor the selector parser; an
    invalid one is still explained."""
    import subprocess
    import sys

    manifest = tmp_path / "pod.yaml"
    code = ("import sys\n"
            "from kctl.cli.main import main\n"
            "try:\n"
            "    main(['apply', '-f', sys.argv[1]])\n"
            "except SystemExit as exc:\n"
            "    print('exit', exc.code)\n"
            "print('jsonschema' in sys.modules or 'kctl.machinery.selectors' in sys.modules)\n")
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n"
                        "spec: {containers: [{name: c, image: busybox}]}\n")
    out = subprocess.run([sys.executable, "-c", code, str(manifest)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "pod/web created" and out.stdout.splitlines()[-1] == "False"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\n"
                        "spec: {containers: [{name: c, image: busybox, ports: [{containerPort: web}]}]}\n")
    out = subprocess.run([sys.executable, "-c", code, str(manifest)], capture_output=True, text=True, timeout=120)
    assert "containerPort" in out.stderr and "exit 0" not in out.stdout


def test_program_exit_skips_the_final_collection(store_path, kctl):
    """Run as the program, kctl collects its young objects less often and leaves them out of the exit's last GC;
    called with arguments (in a longer-lived process), it changes neither."""
    import gc
    import subprocess
    import sys

    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, gc.get_threshold()))\n"
            "sys.argv = ['kctl', 'get', 'pods']\n"
            "from kctl.cli.main import main\n"
            "main()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "frozen True (10000, 10, 10)"
    before = gc.get_freeze_count(), gc.get_threshold()
    assert kctl("get", "pods").code == 0
    assert (gc.get_freeze_count(), gc.get_threshold()) == before
