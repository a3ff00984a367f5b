"""`--store etcd://...`: everyday commands on a real etcd, backup/restore across backends, the etcd flags' errors.

The real etcd is the session's single-member TLS cluster (tests/conftest.py `etcd_cluster`); every
test uses a prefix of its own (`etcd://127.0.0.1:PORT/t-<random>`) and a state folder in its tmp_path.
`kctl logs` needs a daemon and a container runtime: it is not tested here (tests/e2e/test_ha.py runs the
daemon on etcd).
"""

from __future__ import annotations

import base64
import json
import os
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

SECRET_VALUE = "s3cr3t-v4lue-never-in-clear"
MANIFEST = f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: localhost/busybox:latest}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: 8080}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings}}
data: {{mode: fast}}
---
apiVersion: v1
kind: Secret
metadata: {{name: token}}
stringData: {{password: {SECRET_VALUE}}}
"""


def configmap(name: str, **data: str) -> str:
    """A ConfigMap manifest."""
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})


def etcd_environment(cluster, state: Path) -> dict[str, str]:
    """The environment selecting a fresh prefix of `cluster` with its TLS files and a state folder."""
    return {"KCTL_STORE": f"{cluster.address}/t-{secrets.token_hex(6)}", "KCTL_ETCD_CAFILE": str(cluster.ca_file),
            "KCTL_ETCD_CERTFILE": str(cluster.client_cert_file), "KCTL_ETCD_KEYFILE": str(cluster.client_key_file),
            "KCTL_ETCD_STATE_DIR": str(state)}


@pytest.fixture
def on_etcd(kctl, etcd_cluster, tmp_path, monkeypatch):
    """kctl (in-process) with KCTL_STORE naming a fresh etcd prefix; returns (kctl, its environment)."""
    environment = etcd_environment(etcd_cluster, tmp_path / "etcd-state")
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    return kctl, environment


def raw_values(cluster, prefix: str) -> list[bytes]:
    """Every value etcd holds under `prefix`, as stored (read through the gateway, not through kctl)."""
    start = prefix.encode()
    end = start[:-1] + bytes([start[-1] + 1])
    session = cluster.session()
    try:
        answer = session.post(f"{cluster.client_urls[0]}/v3/kv/range", timeout=10,
                              json={"key": base64.b64encode(start).decode(),
                                    "range_end": base64.b64encode(end).decode()}).json()
    finally:
        session.close()
    return [base64.b64decode(kv.get("value", "")) for kv in answer.get("kvs", [])]


def prefix_of(environment: dict[str, str]) -> str:
    """The key prefix of the KCTL_STORE address."""
    return "/" + environment["KCTL_STORE"].split("/", 3)[3]


def secret_value(kctl) -> str:
    """The Secret token's password, decoded, as `kctl get` returns it."""
    done = kctl("get", "secret", "token", "-o", "jsonpath={.data.password}")
    assert done.code == 0, done.err
    return base64.b64decode(done.out).decode()


def test_everyday_commands(on_etcd):
    """apply, get (table and yaml), describe, patch, rollout restart/pause/resume/history and delete on etcd."""
    kctl, _ = on_etcd
    done = kctl("apply", "-f", "-", input=MANIFEST)
    assert done.code == 0, done.err
    assert done.out.splitlines() == ["deployment.apps/web created", "service/web created",
                                     "configmap/settings created", "secret/token created"]
    done = kctl("get", "deployments,services,configmaps,secrets")
    assert done.code == 0, done.err
    names = [line.split()[0] for line in done.out.splitlines() if line and not line.startswith("NAME")]
    assert {"deployment.apps/web", "service/web", "configmap/settings", "secret/token"} <= set(names)
    stored = yaml.safe_load(kctl("get", "configmap", "settings", "-o", "yaml").out)
    assert stored["data"] == {"mode": "fast"} and int(stored["metadata"]["resourceVersion"]) > 0
    done = kctl("describe", "deployment", "web")
    assert done.code == 0 and "Replicas:" in done.out and "web" in done.out, done.err
    done = kctl("patch", "configmap", "settings", "--type", "merge", "-p", '{"data":{"mode":"slow"}}')
    assert done.code == 0 and done.out.strip() == "configmap/settings patched", done.err
    assert kctl("get", "configmap", "settings", "-o", "jsonpath={.data.mode}").out == "slow"
    assert secret_value(kctl) == SECRET_VALUE
    for verb, said in [("restart", "restarted"), ("pause", "paused"), ("resume", "resumed")]:
        done = kctl("rollout", verb, "deployment/web")
        assert done.code == 0 and done.out.strip() == f"deployment.apps/web {said}", done.err
    assert kctl("rollout", "history", "deployment/web").code == 0
    done = kctl("delete", "configmap", "settings", "--wait=false")
    assert done.code == 0 and done.out.strip() == 'configmap "settings" deleted', done.err
    done = kctl("get", "configmap", "settings")
    assert done.code != 0 and 'configmaps "settings" not found' in done.err


def add_replica_set(server, revision: int, image: str) -> None:
    """A ReplicaSet of Deployment web at `revision` running `image`, as the deployment controller writes one."""
    d = server.get(server.resource("deployments"), "web", namespace="default")
    template = json.loads(json.dumps(d["spec"]["template"]))
    template["metadata"]["labels"]["pod-template-hash"] = f"h{revision}"
    template["spec"]["containers"][0]["image"] = image
    server.create({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": f"web-h{revision}", "namespace": "default",
                     "annotations": {"deployment.kubernetes.io/revision": str(revision)},
                     "labels": {"app": "web", "pod-template-hash": f"h{revision}"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                          "uid": d["metadata"]["uid"], "controller": True}]},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web", "pod-template-hash": f"h{revision}"}},
                 "template": template}})


def test_rollout_history_and_undo(on_etcd, etcd_cluster, tmp_path):
    """`rollout history` lists the owned ReplicaSets (etcd's owner index) and `rollout undo` writes the previous
    template, with the ReplicaSets a deployment controller would have made written beside (no daemon here)."""
    from kctl.apiserver.server import APIServer
    from kctl.store.open import open_store

    kctl, environment = on_etcd
    assert kctl("apply", "-f", "-", input=MANIFEST).code == 0
    server = APIServer(open_store(environment["KCTL_STORE"], tls=etcd_cluster.tls, state_dir=tmp_path / "etcd-state"))
    try:
        add_replica_set(server, 1, "localhost/busybox:1")
        add_replica_set(server, 2, "localhost/busybox:2")
        done = kctl("rollout", "history", "deployment/web")
        assert done.code == 0 and done.out.split()[-4:] == ["1", "<none>", "2", "<none>"], done.err
        done = kctl("rollout", "undo", "deployment/web", "--to-revision", "1")
        assert (done.code, done.out) == (0, "deployment.apps/web rolled back\n"), done.err
        d = server.get(server.resource("deployments"), "web", namespace="default")
        assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "localhost/busybox:1"
    finally:
        server.close()


def test_version_and_audit_name_the_etcd_store(on_etcd, tmp_path):
    """`kctl version` names the etcd:// address; the audit log of a write is in the etcd state folder."""
    kctl, environment = on_etcd
    assert kctl("apply", "-f", "-", input=configmap("audited")).code == 0
    done = kctl("version")
    assert done.code == 0 and environment["KCTL_STORE"].split("/t-")[1] in done.out, done.err
    assert "etcd://" in done.out
    done = kctl("audit", "-o", "json")
    assert done.code == 0 and "audited" in done.out, done.err
    assert any((tmp_path / "etcd-state").iterdir())


def test_init_on_etcd_makes_the_key_file_in_the_state_folder(on_etcd, tmp_path):
    """`kctl init` with an etcd:// store opens it with its TLS files and makes the key file in the state folder."""
    kctl, environment = on_etcd
    done = kctl("init")
    key_file = tmp_path / "etcd-state" / "kctl.keys"
    assert done.code == 0 and done.out.strip().endswith(f"key file {key_file}"), done.err
    assert done.out.startswith(f"store {environment['KCTL_STORE']} ready") and key_file.stat().st_mode & 0o777 == 0o600


def test_vacuum_and_rotate_key_on_etcd(on_etcd):
    """`kctl vacuum` compacts and defragments etcd (no file size to show); `encryption rotate-key` re-seals there."""
    kctl, environment = on_etcd
    assert kctl("apply", "-f", "-", input=MANIFEST).code == 0
    done = kctl("vacuum")
    assert done.code == 0 and done.out.strip() == (f"vacuumed {environment['KCTL_STORE']}: compacted and "
                                                   "defragmented every member"), done.err
    done = kctl("encryption", "rotate-key")
    assert done.code == 0 and "re-encrypted" in done.out, done.err
    assert secret_value(kctl) == SECRET_VALUE


def test_get_watch_sees_an_added_object(etcd_cluster, tmp_path):
    """`kctl get configmaps -w` in its own process on etcd prints a ConfigMap another process creates; Ctrl-C
    (SIGINT) ends it with kubectl's status 130."""
    environment = {**os.environ, **etcd_environment(etcd_cluster, tmp_path / "state")}
    kctl = [sys.executable, "-m", "kctl"]
    first = subprocess.run([*kctl, "apply", "-f", "-"], input=configmap("first"), env=environment,
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    proc = subprocess.Popen([*kctl, "get", "configmaps", "-w"], env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    try:
        assert lines.get(timeout=30).split()[:2] == ["NAME", "DATA"]
        assert lines.get(timeout=30).split()[0] == "first"
        second = subprocess.run([*kctl, "apply", "-f", "-"], input=configmap("second", k="v"), env=environment,
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 0, second.stderr
        assert lines.get(timeout=30).split()[:2] == ["second", "1"]
        proc.send_signal(signal.SIGINT)  # Ctrl-C ends the watch (its etcd stream closed, not hung on)
        assert proc.wait(20) == 130
    finally:
        proc.kill()
        proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()


def test_backup_restore_sqlite_to_etcd_and_back(kctl, store_path, etcd_cluster, tmp_path, monkeypatch):
    """A SQLite store's backup restores into etcd (Secret sealed there, never in clear) and etcd's backup
    restores into a new SQLite store, the Secret's value intact all the way."""
    assert kctl("apply", "-f", "-", input=MANIFEST).code == 0
    sqlite_backup, etcd_backup = tmp_path / "from-sqlite.db", tmp_path / "from-etcd.db"
    done = kctl("backup", str(sqlite_backup))
    assert done.code == 0, done.err
    source_keys = store_path.with_name(store_path.name + ".keys")

    environment = etcd_environment(etcd_cluster, tmp_path / "etcd-state")
    (tmp_path / "etcd-state").mkdir(mode=0o700)
    shutil.copy2(source_keys, tmp_path / "etcd-state" / "kctl.keys")  # the source's key file at etcd's key path
    etcd = [f"--store={environment['KCTL_STORE']}", f"--etcd-cafile={environment['KCTL_ETCD_CAFILE']}",
            f"--etcd-certfile={environment['KCTL_ETCD_CERTFILE']}",
            f"--etcd-keyfile={environment['KCTL_ETCD_KEYFILE']}", f"--etcd-state-dir={tmp_path / 'etcd-state'}"]
    done = kctl(*etcd, "restore", str(sqlite_backup))
    assert done.code == 0 and done.out.startswith(f"restored {sqlite_backup}"), done.err
    assert kctl(*etcd, "get", "deployment", "web").code == 0
    assert secret_value(lambda *args: kctl(*etcd, *args)) == SECRET_VALUE
    values = raw_values(etcd_cluster, prefix_of(environment))
    assert values and not any(SECRET_VALUE.encode() in value or base64.b64encode(SECRET_VALUE.encode()) in value
                              for value in values)
    assert kctl(*etcd, "apply", "-f", "-", input=configmap("made-on-etcd")).code == 0
    done = kctl(*etcd, "backup", str(etcd_backup))
    assert done.code == 0, done.err

    second = tmp_path / "second" / "kctl.db"
    second.parent.mkdir(mode=0o700)
    shutil.copy2(source_keys, second.with_name("kctl.db.keys"))
    monkeypatch.setenv("KCTL_STORE", str(second))
    done = kctl("restore", str(etcd_backup))
    assert done.code == 0, done.err
    assert kctl("get", "configmap", "made-on-etcd").code == 0
    assert secret_value(kctl) == SECRET_VALUE


def test_restore_into_etcd_without_the_key_file_names_the_state_path(kctl, etcd_cluster, tmp_path):
    """A backup whose Secrets the etcd store's key file cannot open: one line naming the key path there, nothing
    restored."""
    assert kctl("apply", "-f", "-", input=MANIFEST).code == 0
    backup = tmp_path / "b.db"
    assert kctl("backup", str(backup)).code == 0
    environment = etcd_environment(etcd_cluster, tmp_path / "etcd-state")
    etcd = [f"--store={environment['KCTL_STORE']}", f"--etcd-cafile={environment['KCTL_ETCD_CAFILE']}",
            f"--etcd-certfile={environment['KCTL_ETCD_CERTFILE']}",
            f"--etcd-keyfile={environment['KCTL_ETCD_KEYFILE']}", f"--etcd-state-dir={tmp_path / 'etcd-state'}"]
    own = "apiVersion: v1\nkind: Secret\nmetadata: {name: own}\nstringData: {a: b}\n"
    assert kctl(*etcd, "apply", "-f", "-", input=own).code == 0  # a key file of the etcd store's own
    done = kctl(*etcd, "restore", str(backup))
    assert done.code != 0 and len(done.err.strip().splitlines()) == 1
    assert str(tmp_path / "etcd-state" / "kctl.keys") in done.err and SECRET_VALUE not in done.err
    assert kctl(*etcd, "get", "deployment", "web").code != 0


@pytest.mark.parametrize("args,expected", [
    (["--store", "etcd://"], "error: --store etcd://: no etcd member given"),
    (["--store", "etcd://host:99999"], "error: --store etcd://host:99999: "),
    (["--store", "etcd://127.0.0.1:2379", "--etcd-certfile", "FILE"],
     "error: --etcd-certfile and --etcd-keyfile go together"),
    (["--store", "etcd://127.0.0.1:2379", "--etcd-cafile", "/nonexistent/ca.crt"],
     "error: --etcd-cafile /nonexistent/ca.crt: no such file"),
], ids=["no-endpoints", "bad-port", "cert-without-key", "missing-ca"])
def test_bad_etcd_options_are_one_line(kctl, tmp_path, args, expected):
    """A bad etcd:// address or TLS flag: one error line, exit 1, no state folder made."""
    (tmp_path / "client.crt").write_text("not used")
    args = [str(tmp_path / "client.crt") if arg == "FILE" else arg for arg in args]
    done = kctl(*args, "--etcd-state-dir", str(tmp_path / "state"), "get", "pods")
    assert done.code == 1 and done.err.splitlines() == [done.err.strip()] and done.err.startswith(expected), done.err
    assert not (tmp_path / "state").exists()


def test_unreachable_etcd_is_one_line_naming_it(tmp_path):
    """A closed port: `kctl get` says in one line, within seconds, that the member does not answer."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KCTL_")}
    environment["XDG_DATA_HOME"] = str(tmp_path / "data")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kctl", "--store", f"etcd://127.0.0.1:{port}/t", "get", "pods"],
                          env=environment, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - started
    assert done.returncode != 0 and done.stderr.splitlines() == [done.stderr.strip()], done.stderr
    assert f"127.0.0.1:{port}" in done.stderr and "Traceback" not in done.stderr
    assert elapsed < 30, f"took {elapsed:.1f}s"


def _daemon_context(kctl, monkeypatch, *args):
    """The CLIContext the daemon opens its store with (the store is not opened: connect.api is a stand-in)."""
    from kctl.cli import connect
    from kctl.cli import daemon as daemon_cli

    seen: list = []

    def fake_api():
        seen.append(connect.current())
        raise SystemExit(0)

    monkeypatch.setattr(connect, "api", fake_api)
    monkeypatch.setattr(daemon_cli, "configure_logging", lambda level: None)
    result = kctl(*args)
    return result, seen


@pytest.mark.parametrize("given,expected", [([], 300.0), (["--etcd-compaction-interval", "30s"], 30.0),
                                            (["--etcd-compaction-interval", "0"], None)],
                         ids=["default-5m", "30s", "off"])
def test_daemon_compaction_interval_reaches_the_store(kctl, monkeypatch, given, expected):
    """`kctl daemon --etcd-compaction-interval` (default 5m, 0 off) is the etcd store's compaction_interval."""
    result, seen = _daemon_context(kctl, monkeypatch, "--store", "etcd://127.0.0.1:2379/t", "daemon", *given)
    assert result.code == 0 and len(seen) == 1, result.err
    assert seen[0].etcd and seen[0].etcd_compaction_interval == expected


def test_daemon_compaction_interval_with_its_own_store_flag(kctl, monkeypatch):
    """`kctl daemon --store etcd://...` (the daemon's own flag) gets the interval too; on SQLite it is unused."""
    result, seen = _daemon_context(kctl, monkeypatch, "daemon", "--store", "etcd://127.0.0.1:2379/t",
                                   "--etcd-compaction-interval", "1m")
    assert result.code == 0 and seen[0].etcd and seen[0].etcd_compaction_interval == 60.0, result.err
    result, seen = _daemon_context(kctl, monkeypatch, "daemon", "--etcd-compaction-interval", "30s")
    assert result.code == 0 and not seen[0].etcd and seen[0].etcd_compaction_interval is None, result.err


def test_bad_compaction_interval_is_a_usage_error(kctl, monkeypatch):
    """A value that is not a duration: one usage line naming the flag, exit 2, no store opened."""
    result, seen = _daemon_context(kctl, monkeypatch, "--store", "etcd://127.0.0.1:2379/t", "daemon",
                                   "--etcd-compaction-interval", "soon")
    assert result.code == 2 and not seen and "--etcd-compaction-interval" in result.err


@pytest.mark.parametrize("line,verb", [
    (["--etcd-cafile", "ca", "--etcd-certfile", "c", "--etcd-keyfile", "k", "get", "pods"], "get"),
    (["--etcd-state-dir=/s", "--store", "etcd://h:1", "version"], "version"),
], ids=["separate-values", "joined-value"])
def test_etcd_flags_before_the_verb(line, verb):
    """The --etcd-* root flags (with their values) may stand before the verb: the verb is still found."""
    from kctl.cli.argv import verb_of

    assert verb_of(line) == verb


def test_audit_names_the_command_past_etcd_flags():
    """The audit log's client name skips the --etcd-* flags' values (`kctl/V (get)`, not the CA's path)."""
    from kctl.apiserver.audit import _command_agent

    agent = _command_agent(["--etcd-cafile", "/x/ca.crt", "--etcd-state-dir", "/s", "get", "pods"], cli=True)
    assert agent.endswith("(get)")


def test_completion_offers_names_from_the_etcd_store(on_etcd):
    """`kctl get configmaps <TAB>` with KCTL_STORE=etcd://... offers the ConfigMaps stored there."""
    kctl, environment = on_etcd
    assert kctl("apply", "-f", "-", input=configmap("completed-here")).code == 0
    words = ["kctl", "get", "configmaps", ""]
    env = {**os.environ, **environment, "_KCTL_COMPLETE": "bash_complete", "COMP_WORDS": " ".join(words),
           "COMP_CWORD": str(len(words) - 1)}
    done = subprocess.run([sys.executable, "-m", "kctl"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "plain,completed-here" in done.stdout.splitlines(), done.stdout + done.stderr


def test_serve_stdio_serves_the_etcd_store(kctl, monkeypatch, tmp_path):
    """`kctl --store etcd://... serve --stdio` serves that cluster with the global TLS files and state folder."""
    from kctl.apiserver import serve as serving

    served: list = []
    monkeypatch.setattr(serving, "serve_stdio", lambda target, *, store_options: served.append((target,
                                                                                                store_options)))
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    done = kctl("--store", "etcd://127.0.0.1:2379/t", "--etcd-cafile", str(ca), "--etcd-state-dir",
                str(tmp_path / "s"), "serve", "--stdio")
    assert done.code == 0, done.err
    [(target, options)] = served
    assert target == "etcd://127.0.0.1:2379/t" and options["state_dir"] == str(tmp_path / "s")
    assert options["tls"].ca_file == str(ca) and options["tls"].cert_file is None
