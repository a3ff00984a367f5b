"""kctl's own CLI against kctl's HTTPS API (`kctl --kubeconfig K ...`): the same commands, the same output.

The `kubeapi` fixture serves a fresh store over HTTPS in process; each test runs the real `kctl`
entry point (kctl.cli.main.main) with --kubeconfig, --context or --server https://..., and compares
with what the local store path prints, or checks the objects on the server.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "web"
#: generous bound for a subprocess on a loaded machine
WAIT = 60.0


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def kctl(capsys, monkeypatch, tmp_path):
    """kctl(*args, input=None) -> Result, through kctl.cli.main.main; no KUBECONFIG/KCTL_* from the outer shell."""
    from kctl.cli.main import main

    for name in ("KUBECONFIG", "KCTL_KUBECONFIG", "KCTL_SERVER", "KCTL_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    def run(*args: str, input: str | None = None) -> Result:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((input or "").encode())))
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def test_apply_get_delete_over_https_print_as_with_a_local_store(kctl, kubeapi, tmp_path):
    """apply -f, get -A, apply again, delete: the lines a local store gives for the same manifests."""
    k = ["--kubeconfig", str(kubeapi.kubeconfig)]
    local = ["--store", str(tmp_path / "local.db")]
    first, first_local = kctl(*k, "apply", "-f", str(EXAMPLES)), kctl(*local, "apply", "-f", str(EXAMPLES))
    assert first.code == 0 == first_local.code, first.err
    assert first.out == first_local.out
    again, again_local = kctl(*k, "apply", "-f", str(EXAMPLES)), kctl(*local, "apply", "-f", str(EXAMPLES))
    assert again.out == again_local.out and "unchanged" in again.out
    names = kctl(*k, "get", "deploy,svc,cm", "-A", "-o", "name")
    assert names.code == 0 and names.out == kctl(*local, "get", "deploy,svc,cm", "-A", "-o", "name").out
    table = kctl(*k, "get", "deployments", "-A")
    assert table.out.splitlines()[0].split() == ["NAMESPACE", "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    gone = kctl(*k, "delete", "configmap", "web-content", "-n", "demo")
    assert (gone.code, gone.out) == (0, 'configmap "web-content" deleted\n')
    cms = kubeapi.api.resource("configmaps")
    assert kubeapi.api.find(cms, "web-content", namespace="demo") is None


@pytest.mark.parametrize("args,code,line", [
    (["get", "pod", "ghost"], 3, 'Error from server (NotFound): pods "ghost" not found'),
    (["get", "frobs"], 1, "error: the server doesn't have a resource type \"frobs\""),
    (["delete", "namespace", "default"], 7,
     'Error from server (Forbidden): namespace "default" is forbidden: this namespace may not be deleted'),
], ids=["not-found", "unknown-kind", "forbidden"])
def test_errors_print_as_with_a_local_store(kctl, kubeapi, tmp_path, args, code, line):
    """A refusal is the same one line and exit status over HTTPS as against a local store."""
    over = kctl("--kubeconfig", str(kubeapi.kubeconfig), *args)
    assert kctl("--store", str(tmp_path / "local.db"), "init").code == 0
    local = kctl("--store", str(tmp_path / "local.db"), *args)
    assert (over.code, over.err.strip()) == (local.code, local.err.strip())
    assert (over.code, over.err.strip()) == (code, line)


def test_context_namespace_is_the_commands_default_namespace(kctl, kubeapi, tmp_path):
    """With a context whose namespace is `team`, `get`/`apply` without -n work there, as kubectl."""
    kubeapi.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    text = kubeapi.kubeconfig.read_text()
    config = tmp_path / "team.yaml"
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    data = yaml.load(text)
    data["contexts"].append({"name": "team", "context": {**data["contexts"][0]["context"], "namespace": "team"}})
    with config.open("w") as f:
        yaml.dump(data, f)
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: here}\n"
    made = kctl("--kubeconfig", str(config), "--context", "team", "apply", "-f", "-", input=manifest)
    assert made.code == 0, made.err
    assert kubeapi.api.find(kubeapi.api.resource("configmaps"), "here", namespace="team") is not None
    listed = kctl("--kubeconfig", str(config), "--context", "team", "get", "configmaps", "-o", "name")
    assert "configmap/here" in listed.out.split()


def test_server_flag_with_credential_flags_needs_no_kubeconfig(kctl, kubeapi, tmp_path):
    """--server https://... with --certificate-authority, --client-certificate and --client-key."""
    kubeapi.api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}})
    pki = kubeapi.pki
    out = kctl("--server", kubeapi.url, "--certificate-authority", str(pki.ca.crt), "--client-certificate",
               str(pki.admin.crt), "--client-key", str(pki.admin.key), "get", "cm", "-o", "name")
    assert (out.code, out.out) == (0, "configmap/c\n"), out.err
    anonymous = kctl("--server", kubeapi.url, "--certificate-authority", str(pki.ca.crt), "get", "cm")
    assert (anonymous.code, anonymous.err) == (1, "error: You must be logged in to the server (Unauthorized)\n")


def test_kubeconfig_env_alone_keeps_the_local_store(kctl, kubeapi, monkeypatch, tmp_path):
    """$KUBECONFIG does not switch kctl to HTTPS (the local store stays the default); $KCTL_KUBECONFIG does."""
    kubeapi.api.create({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "remote", "namespace": "default"}})
    monkeypatch.setenv("KCTL_STORE", str(tmp_path / "local.db"))
    kctl("create", "-f", "-", input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeapi.kubeconfig))
    assert "configmap/local" in kctl("get", "cm", "-o", "name").out.split()
    monkeypatch.setenv("KCTL_KUBECONFIG", str(kubeapi.kubeconfig))
    assert "configmap/remote" in kctl("get", "cm", "-o", "name").out.split()
    monkeypatch.delenv("KCTL_KUBECONFIG")
    assert "configmap/remote" in kctl("--context", "kctl", "get", "cm", "-o", "name").out.split()


@pytest.mark.parametrize("args,message", [
    (["--kubeconfig", "/nonexistent/kubeconfig", "get", "pods"],
     "error: kubeconfig /nonexistent/kubeconfig: no such file"),
    (["--server", "http://127.0.0.1:1", "get", "pods"], "error: --server: server 'http://127.0.0.1:1' is not an "
                                                          "https://host[:port] URL"),
    (["--server", "https://127.0.0.1:1", "get", "pods"], "Unable to connect to the server at https://127.0.0.1:1"),
    (["--server", "ssh://root@h/x.db", "--context", "c", "get", "pods"], "cannot be used with --kubeconfig"),
    (["--kubeconfig", "KUBECONFIG", "audit"], "the audit log is kept beside the store on the control host"),
    (["--kubeconfig", "KUBECONFIG", "port-forward", "pod/x", "80"], "use `kubectl port-forward`"),
    (["--kubeconfig", "KUBECONFIG", "init"], "cannot be used with --server, --kubeconfig or --context"),
], ids=["missing-file", "http", "refused", "ssh-and-context", "audit", "port-forward", "init"])
def test_bad_connections_and_local_only_commands_are_one_line(kctl, kubeapi, args, message):
    """Each is one error line naming what is wrong, and a non-zero exit."""
    args = [str(kubeapi.kubeconfig) if a == "KUBECONFIG" else a for a in args]
    out = kctl(*args)
    assert out.code != 0
    assert len(out.err.strip().splitlines()) == 1 and message in out.err, out.err
    assert "Traceback" not in out.err


def test_get_watch_prints_changes_as_they_happen(kubeapi, tmp_path):
    """`kctl get -w` over HTTPS prints the list, then a line per change (a subprocess, stopped afterwards)."""
    import queue
    import threading

    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KCTL_STORE", "KCTL_SERVER")}
    watch = subprocess.Popen([sys.executable, "-m", "kctl", "--kubeconfig", str(kubeapi.kubeconfig), "get", "cm",
                              "-w"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in watch.stdout], daemon=True)
    reader.start()

    def wait_for(name: str) -> list[str]:
        seen: list[str] = []
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                continue
            if seen[-1].split()[:1] == [name]:
                return seen
        raise AssertionError(f"kctl get -w printed no line for {name}: {seen}")

    def cm(name: str) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}

    try:
        kubeapi.api.create(cm("first"))  # listed or watched: either way one line
        wait_for("first")
        kubeapi.api.create(cm("second"))  # after the list was printed: only the watch can show it
        wait_for("second")
    finally:
        watch.terminate()
        try:
            watch.wait(WAIT)
        except subprocess.TimeoutExpired:
            watch.kill()
            watch.wait()
        reader.join(WAIT)
        for stream in (watch.stdout, watch.stderr):
            stream.close()


def test_version_and_short_server_flag_reach_the_https_api(kctl, kubeapi):
    """`kctl --kubeconfig K version -o json` (answered without Click) names the server; `-s URL` is --server."""
    import json

    out = kctl("--kubeconfig", str(kubeapi.kubeconfig), "version", "-o", "json")
    assert out.code == 0, out.err
    assert json.loads(out.out)["store"]["path"] == kubeapi.url
    pki = kubeapi.pki
    short = kctl("-s", kubeapi.url, "--certificate-authority", str(pki.ca.crt), "--client-certificate",
                 str(pki.admin.crt), "--client-key", str(pki.admin.key), "get", "namespaces", "-o", "name")
    assert short.code == 0 and "namespace/default" in short.out.split(), short.err
