"""`kctl get`'s start-up: what it leaves unloaded, its garbage collection (kctl.cli.main),
and `kctl --help` still listing every command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: run as the program (sys.argv, main() with no arguments); prints, last, what a `get` left unloaded
_PROGRAM = """
import atexit, gc, json, sys
def report():
    print(json.dumps({"loaded": sorted(sys.modules), "collecting": gc.isenabled()}))
atexit.register(report)
sys.argv = ["kctl", *sys.argv[1:]]
from kctl.cli.main import main
main()
"""


def _program(*args: str, store: str) -> tuple[str, dict]:
    """Run `kctl ARGS` as the program in a fresh interpreter: (its output before the report, the report)."""
    import os

    env = {**{k: v for k, v in os.environ.items() if k != "KCTL_SERVER"}, "KCTL_STORE": store}
    out = subprocess.run([sys.executable, "-c", _PROGRAM, *args], capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stderr
    text, _, report = out.stdout.rstrip("\n").rpartition("\n")
    return text, json.loads(report)


@pytest.fixture
def pods(kctl, store_path):
    """Three pods in the test's store."""
    docs = "\n---\n".join(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\n"
                          "spec: {containers: [{name: c, image: busybox}]}" for i in range(3))
    assert kctl("apply", "-f", "-", input=docs).code == 0
    return str(store_path)


#: modules a table `get` must not load: kctl's own deferred imports
NOT_LOADED = ("yaml", "ruamel", "jsonschema", "sqlite_utils", "kctl.manifests", "kctl.machinery.selectors",
              "kctl.admission", "kctl.output.jsonpath", "kctl.output.gotemplate", "cryptography")


@pytest.mark.parametrize(("args", "absent"), [
    (["get", "pods"], NOT_LOADED), (["get", "pods", "-A", "-o", "wide"], NOT_LOADED),
    (["get", "pods", "-o", "json"], NOT_LOADED), (["describe", "pod", "p1"], ()),
], ids=["table", "wide", "json", "describe"])
def test_get_leaves_unused_modules_unloaded(pods, args, absent):
    """`kctl get` (and describe) prints as before and loads none of kctl's optional modules."""
    text, report = _program(*args, store=pods)
    assert "p1" in text
    assert not [m for m in report["loaded"] if m in absent or any(m.startswith(p + ".") for p in absent)]
    assert report["collecting"] is False  # a get makes no garbage cycles: collection stays paused


def test_other_verbs_resume_collection(pods):
    """A verb other than get/describe runs with garbage collection on (after start-up)."""
    _, report = _program("api-resources", store=pods)
    assert report["collecting"] is True


def test_help_lists_every_command_with_its_help(kctl):
    """`kctl --help` names every command of the lazy registry (but hidden ones) with the start of its own help."""
    import importlib

    import typer.main

    from kctl.cli.root import COMMANDS

    result = kctl("--help")
    assert result.code == 0
    lines = result.out.splitlines()
    for verb, module in COMMANDS.items():
        sub = importlib.import_module(module).app
        infos = [i for i in sub.registered_commands
                 if (i.name or typer.main.get_command_name(i.callback.__name__)) == verb]
        groups = [g for g in sub.registered_groups if typer.main.solve_typer_info_defaults(g).name == verb]
        assert infos or groups, verb
        if infos and infos[0].hidden:  # `serve`: hidden from --help on purpose
            assert not [line for line in lines if line.strip().startswith(verb + " ")]
            continue
        if infos:
            text = infos[0].help or (infos[0].callback.__doc__ or "")
        else:
            info = typer.main.solve_typer_info_defaults(groups[0])
            text = info.help or ""
        first = " ".join(text.strip().split("\n")[0].split())
        row = [line for line in lines if line.strip().startswith(verb + " ")]
        assert row, f"{verb} missing from kctl --help"
        assert first[:30] in " ".join(" ".join(lines).split()), verb


def test_watch_turns_collection_on(pods):
    """`kctl get -w` runs for long, with a thread: its watch collects garbage again."""
    import os
    import signal

    env = {**{k: v for k, v in os.environ.items() if k != "KCTL_SERVER"}, "KCTL_STORE": pods}
    proc = subprocess.Popen([sys.executable, "-c", _PROGRAM, "get", "pods", "-w"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = []
        while not any(line.startswith("p2 ") for line in lines):  # the list is printed: the watch runs
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    report = json.loads(out.strip().splitlines()[-1])
    assert report["collecting"] is True


@pytest.mark.parametrize("function", ["kctl.cli.get:get", "kctl.cli.get:describe", "kctl.cli.root:root"])
def test_command_annotations_are_evaluated_once(function):
    """The start-up path's command signatures hold evaluated annotations: Typer does not eval strings on each read."""
    import importlib

    module, _, name = function.partition(":")
    annotations = getattr(importlib.import_module(module), name).__annotations__
    assert annotations and not [k for k, v in annotations.items() if isinstance(v, str)]
