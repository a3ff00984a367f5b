"""Shell completion in real bash, zsh and fish: the script `kctl completion SHELL` prints is loaded and driven."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import pytest

SHELLS = ("bash", "zsh", "fish")
TIMEOUT = 120  # seconds; generous, the machine may be loaded

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object"}}}]},
}


def _pod(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def env(server, store_path, tmp_path):
    """Environment for a shell: `kctl` on PATH (this interpreter), a store with pods, a namespace and a CRD."""
    server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    server.create(_pod("api-1", "default"))
    server.create(_pod("api-2", "default"))
    server.create(_pod("web-1", "demo"))
    server.create(CRD)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "kctl"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m kctl "$@"\n')
    wrapper.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(home),
            "ZDOTDIR": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / "data"),
            "KCTL_STORE": str(store_path)}


def _words(line: str) -> list[str]:
    words = line.split()
    return words + [""] if line.endswith(" ") else words


def _run(argv: list[str], env: dict) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def complete_bash(line: str, env: dict) -> list[str]:
    """Load the script in bash, set COMP_WORDS/COMP_CWORD, call the function, read COMPREPLY."""
    words = _words(line)
    script = (f"source <(kctl completion bash) || exit 1\n"
              f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
              "_kctl_completion kctl\n"
              'for r in "${COMPREPLY[@]}"; do printf "%s\\n" "$r"; done\n')
    return _run(["bash", "--norc", "--noprofile", "-c", script], env).splitlines()


def complete_zsh(line: str, env: dict) -> list[str]:
    """Load the script after compinit, capture what it hands compadd/_describe for `words`/CURRENT."""
    words = _words(line)
    script = ("autoload -U compinit && compinit -D -u\n"
              "source <(kctl completion zsh) || exit 1\n"
              "compadd() { while (( $# )); do if [[ $1 == -a ]]; then print -rl -- ${(P)2}; shift; fi; shift; done }\n"
              "_describe() { local e; for e in ${(P)3}; do print -r -- ${e%%:*}; done }\n"
              f"words=({' '.join(shlex.quote(w) for w in words)}); CURRENT={len(words)}\n"
              "_kctl_completion\n")
    return _run(["zsh", "-f", "-c", script], env).splitlines()


def complete_fish(line: str, env: dict) -> list[str]:
    """Load the script in fish and ask `complete -C` for the line."""
    script = f"kctl completion fish | source; or exit 1; complete -C {shlex.quote(line)}"
    return [row.split("\t")[0] for row in _run(["fish", "--no-config", "-c", script], env).splitlines()]


DRIVERS = {"bash": complete_bash, "zsh": complete_zsh, "fish": complete_fish}


def _need(shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (tools/install-system-deps.sh installs it)")


CASES = [
    ("kctl g", ["get"]),
    ("kctl get dep", ["deployments"]),
    ("kctl get wid", ["widgets"]),
    ("kctl get pods ", ["api-1", "api-2"]),
    ("kctl get pods api-2", ["api-2"]),
    ("kctl get pods -n demo ", ["web-1"]),
    ("kctl -n demo get pods ", ["web-1"]),
    ("kctl get pod/", ["pod/api-1", "pod/api-2"]),
    ("kctl get -n ", ["default", "demo"]),
    ("kctl get pods --no-h", ["--no-headers"]),
    ("kctl rollout st", ["status"]),
    ("kctl logs ", ["api-1", "api-2"]),
    ("kctl completion z", ["zsh"]),
]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(("line", "expected"), CASES, ids=[c[0].strip().replace(" ", "_") for c in CASES])
def test_completion_in_shell(env, shell, line, expected):
    """Commands, resource types (CRDs too), names from the store (honouring -n), namespaces and flags complete."""
    _need(shell)
    assert DRIVERS[shell](line, env) == expected


@pytest.mark.parametrize("shell", SHELLS)
def test_verb_completion_offers_only_commands(env, shell):
    """`kctl <TAB>` offers the verbs, nothing of the protocol (no `plain`), and no traceback."""
    _need(shell)
    offered = DRIVERS[shell]("kctl ", env)
    assert {"get", "apply", "rollout", "completion"} <= set(offered)
    assert not any(o == "plain" or o.startswith("plain,") or "Traceback" in o for o in offered)


def test_completion_without_a_store_offers_kinds_and_creates_nothing(tmp_path):
    """With no store yet, types still complete and names are simply not offered; no store is created."""
    store = tmp_path / "none" / "kctl.db"
    env = {**os.environ, "KCTL_STORE": str(store), "_KCTL_COMPLETE": "bash_complete"}
    for words, expected in ((["kctl", "get", "configm"], "plain,configmaps"), (["kctl", "get", "pods", ""], "")):
        env.update(COMP_WORDS=" ".join(words), COMP_CWORD=str(len(words) - 1))
        done = subprocess.run([sys.executable, "-m", "kctl"], env=env, capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert (done.returncode, done.stdout.strip(), done.stderr) == (0, expected, "")
    assert not store.exists() and not store.parent.exists()


@pytest.mark.parametrize("shell", [*SHELLS, "powershell"])
def test_completion_prints_a_script(kctl, shell):
    """`kctl completion SHELL` prints a script that calls kctl back with _KCTL_COMPLETE."""
    result = kctl("completion", shell)
    assert result.code == 0 and "_KCTL_COMPLETE" in result.out and f"{shell}_complete" in result.out


def test_completion_unknown_shell(kctl):
    """An unknown shell is one error line and exit 1, as kubectl."""
    result = kctl("completion", "tcsh")
    assert (result.code, result.out, result.err) == (1, "", 'error: unsupported shell type "tcsh"\n')
