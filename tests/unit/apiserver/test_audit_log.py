"""The audit log (kctl.apiserver.audit): one Metadata-level event per answered write, no object data."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import stat
import sys
import textwrap
import threading

import pytest

from kctl.apiserver import audit
from kctl.apiserver.server import APIServer
from kctl.machinery.errors import AlreadyExists, Conflict, Forbidden, Invalid
from kctl.store.sqlite import Store

PLAIN = "correct-horse-battery-staple"
ENCODED = base64.b64encode(PLAIN.encode()).decode()


def _cm(name: str = "c", **data) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _events(api: APIServer) -> list[dict]:
    return list(audit.read_events(api.audit_log.path))


def _summary(api: APIServer) -> list[tuple]:
    return [(e["verb"], e["objectRef"]["resource"], e["objectRef"].get("subresource", ""), e["objectRef"]["name"],
             e["responseStatus"]["code"]) for e in _events(api)]


def test_log_sits_beside_the_store_private(api, store):
    """<folder>/<store>.audit/audit.log, folder 0700, file 0600."""
    api.create(_cm())
    path = api.audit_log.path
    assert path == store.path.parent / "kctl.audit" / "audit.log"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_event_shape_is_audit_k8s_io_v1_metadata(api):
    """An event carries Kubernetes' Metadata-level fields, the user, the client and the new version."""
    stored = api.create(_cm())
    (event,) = _events(api)
    assert event["apiVersion"] == "audit.k8s.io/v1" and event["kind"] == "Event"
    assert event["level"] == "Metadata" and event["stage"] == "ResponseComplete"
    assert event["verb"] == "create" and event["user"] == {"username": "tester"}
    assert event["objectRef"] == {"resource": "configmaps", "namespace": "default", "name": "c", "apiGroup": "",
                                  "apiVersion": "v1", "resourceVersion": stored["metadata"]["resourceVersion"]}
    assert event["responseStatus"] == {"metadata": {}, "code": 201}
    assert event["requestURI"] == "/api/v1/namespaces/default/configmaps/c"
    assert event["userAgent"].startswith("kctl/")
    assert event["auditID"] and event["requestReceivedTimestamp"] <= event["stageTimestamp"]
    assert "requestObject" not in event and "responseObject" not in event


def test_every_write_verb_is_recorded_once(api):
    """create, apply (create/patch), update, status, patch, delete, bind, write_all: one event each."""
    cms = api.resource("cm")
    api.create(_cm("a", k="1"))
    api.apply(_cm("b", k="1"))
    api.apply(_cm("b", k="2"))
    api.apply(_cm("b", k="2"))  # unchanged: nothing written, nothing recorded
    live = api.get(cms, "a")
    live["data"] = {"k": "3"}
    api.update(live)
    api.patch(cms, "a", {"data": {"k": "4"}}, patch_type="merge")
    api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    pod = api.get(api.resource("pods"), "p")
    pod["status"] = {"phase": "Pending"}
    api.update_status(pod)
    api.bind("default", "p", "n1")
    api.write_all([("create", _cm("w")), ("apply", _cm("a", k="5"))])
    api.delete(cms, "a")
    api.create(_cm("dry"), dry_run=True)  # dry runs write nothing and are not recorded
    assert _summary(api) == [
        ("create", "configmaps", "", "a", 201),
        ("create", "configmaps", "", "b", 201),
        ("patch", "configmaps", "", "b", 200),
        ("update", "configmaps", "", "a", 200),
        ("patch", "configmaps", "", "a", 200),
        ("create", "pods", "", "p", 201),
        ("update", "pods", "status", "p", 200),
        ("create", "pods", "binding", "p", 201),
        ("create", "configmaps", "", "w", 201),
        ("patch", "configmaps", "", "a", 200),
        ("delete", "configmaps", "", "a", 200),
    ]


def _deny_hook(api: APIServer, tmp_path) -> None:
    script = tmp_path / "deny.py"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys
        review = json.load(sys.stdin)
        json.dump({{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "response": {{"uid": review["request"]["uid"], "allowed": False,
                                "status": {{"message": "no configmaps named x"}}}}}}, sys.stdout)
        """))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    api.create({"apiVersion": "kctl.io/v1alpha1", "kind": "ValidatingAdmissionHook", "metadata": {"name": "deny-x"},
                "spec": {"command": [str(script)], "objectSelector": {"matchLabels": {"deny": "yes"}},
                         "rules": [{"operations": ["CREATE"], "apiGroups": [""], "resources": ["configmaps"]}]}})


def test_failed_writes_are_recorded_with_code_and_reason(api, tmp_path):
    """Forbidden by a hook, Invalid, Conflict, AlreadyExists: each recorded with its code and reason."""
    _deny_hook(api, tmp_path)
    refused = _cm("x")
    refused["metadata"]["labels"] = {"deny": "yes"}
    with pytest.raises(Forbidden):
        api.create(refused)
    with pytest.raises(Invalid):
        api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "data": {"k": 1}})
    stale = api.create(_cm("c"))
    api.patch(api.resource("cm"), "c", {"data": {"a": "b"}}, patch_type="merge")
    with pytest.raises(Conflict):
        api.update(stale)
    with pytest.raises(AlreadyExists):
        api.create(_cm("c"))
    results = api.write_all([("create", _cm("c"))])
    assert isinstance(results[0].error, AlreadyExists)
    failures = [e for e in _events(api) if e["responseStatus"]["code"] >= 400]
    assert [(e["verb"], e["objectRef"]["name"], e["responseStatus"]["code"], e["responseStatus"]["reason"])
            for e in failures] == [
        ("create", "x", 403, "Forbidden"), ("create", "bad", 422, "Invalid"), ("update", "c", 409, "Conflict"),
        ("create", "c", 409, "AlreadyExists"), ("create", "c", 409, "AlreadyExists")]
    assert {(e["objectRef"]["resource"], e["objectRef"]["namespace"]) for e in failures} == {("configmaps", "default")}
    assert 'admission hook "deny-x" denied' in failures[0]["responseStatus"]["message"]
    assert failures[0]["annotations"] == {"kctl.io/admission-hooks": "deny-x"}


def test_no_secret_data_in_the_log(api):
    """Secrets written, patched, refused: neither the value nor its base64 is ever in the log."""
    secrets_rt = api.resource("secrets")
    api.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"pw": PLAIN}})
    api.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"}, "data": {"pw": ENCODED}})
    for patch_type, patch in [("json", [{"op": "test", "path": "/data/pw", "value": "x"}]),
                              ("json", [{"op": "copy", "from": "/data/pw", "path": "/metadata/labels"}]),
                              ("merge", {"data": {"pw": 5}})]:
        with pytest.raises(Exception):
            api.patch(secrets_rt, "s", patch, patch_type=patch_type)
    api.patch(secrets_rt, "s", {"data": {"other": ENCODED}}, patch_type="merge")
    api.delete(secrets_rt, "t")
    text = api.audit_log.path.read_text()
    assert PLAIN not in text and ENCODED not in text
    assert len(_events(api)) == 7


def test_written_after_the_transaction(api, monkeypatch):
    """When the log is written the transaction has committed: another connection sees the object."""
    seen = []
    original = audit.AuditLog.record

    def record(self, events):
        other = Store(api.store.path)
        try:
            seen.append((api.store._local.depth, other.get("ConfigMap", "default", "c") is not None))
        finally:
            other.close()
        original(self, events)

    monkeypatch.setattr(audit.AuditLog, "record", record)
    api.create(_cm())
    api.write_all([("apply", _cm(k="v"))])
    assert seen == [(0, True), (0, True)]


def test_client_names_the_writer(api):
    """audit.client() names the client; a daemon thread adds its component to the process's name."""
    with audit.client("git-sync/src"):
        api.create(_cm("a"))
    worker = threading.Thread(target=lambda: api.create(_cm("b")), name="replicaset-worker-0")
    worker.start()
    worker.join()
    agents = [e["userAgent"] for e in _events(api)]
    assert agents[0] == "git-sync/src"
    assert agents[1].startswith("kctl/") and agents[1].endswith("/replicaset)")


def test_ssh_source_is_recorded(api, monkeypatch):
    """Over SSH (SSH_CONNECTION set, as sshd does), the client's address is in sourceIPs."""
    monkeypatch.setenv("SSH_CONNECTION", "10.77.0.5 51022 10.77.0.11 22")
    api.create(_cm())
    assert _events(api)[0]["sourceIPs"] == ["10.77.0.5"]


@pytest.mark.parametrize("setting, expected", [("off", None), ("none", None), ("", "default")],
                         ids=["off", "none", "unset"])
def test_log_can_be_turned_off(store, monkeypatch, setting, expected):
    """KCTL_AUDIT_LOG=off: no log; unset: beside the store."""
    monkeypatch.setenv(audit.ENV_PATH, setting)
    path = audit.path_for_store(store.path)
    assert (path is None) == (expected is None)


def test_rotation_bounds_the_size(tmp_path):
    """Past max size the log rotates; at most max_backups old files are kept, each under the size."""
    log = audit.AuditLog(tmp_path / "a" / "audit.log", max_bytes=4096, max_backups=2)
    ref = audit.ObjectRef(resource="configmaps", namespace="default", name="c", api_version="v1")
    for i in range(200):
        log.record([audit.event(verb="update", user="u", ref=ref, code=200, received=audit.now(),
                                resource_version=str(i))])
    log.close()
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == ["audit.log", "audit.log.1", "audit.log.2"]
    assert all((tmp_path / "a" / name).stat().st_size <= 4096 for name in files)
    rvs = [int(e["objectRef"]["resourceVersion"]) for e in audit.read_events(tmp_path / "a" / "audit.log")]
    assert rvs == sorted(rvs) and rvs[-1] == 199


def test_rotation_settings_from_the_environment(tmp_path, monkeypatch):
    """KCTL_AUDIT_LOG_MAXSIZE (MiB) and KCTL_AUDIT_LOG_MAXBACKUP set the bounds; defaults 10 MiB x 2."""
    assert (audit.AuditLog(tmp_path / "x").max_bytes, audit.AuditLog(tmp_path / "x").max_backups) == (10 * 2**20, 2)
    monkeypatch.setenv(audit.ENV_MAXSIZE, "1")
    monkeypatch.setenv(audit.ENV_MAXBACKUP, "5")
    log = audit.AuditLog(tmp_path / "x")
    assert (log.max_bytes, log.max_backups) == (2**20, 5)


def _append_many(path: str, worker: int) -> None:
    log = audit.AuditLog(path, max_bytes=64 * 1024, max_backups=50)
    ref = audit.ObjectRef(resource="configmaps", namespace="default", name=f"w{worker}", api_version="v1")
    for i in range(300):
        log.record([audit.event(verb="update", user=f"w{worker}", ref=ref, code=200, received=audit.now(),
                                resource_version=str(i))])
    log.close()


def test_processes_append_and_rotate_without_losing_lines(tmp_path):
    """4 processes x 300 events with rotation under way: every line whole, none lost."""
    path = str(tmp_path / "audit.log")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(path, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 4
    lines = [line for f in audit.log_files(path) for line in f.read_text().splitlines()]
    assert len(lines) == 1200
    per_worker: dict[str, list[int]] = {}
    for line in lines:
        event = json.loads(line)
        per_worker.setdefault(event["user"]["username"], []).append(int(event["objectRef"]["resourceVersion"]))
    assert all(sorted(v) == list(range(300)) for v in per_worker.values()) and len(per_worker) == 4
    assert len(audit.log_files(path)) > 2


def test_unwritable_log_never_fails_a_write(api, tmp_path, caplog):
    """A log that cannot be written is a warning; the write itself succeeds."""
    api.audit_log = audit.AuditLog(tmp_path / "file-not-folder" / "audit.log")
    (tmp_path / "file-not-folder").write_text("in the way")
    api.create(_cm())
    assert api.store.get("ConfigMap", "default", "c") is not None
    assert "cannot write" in caplog.text


def test_served_requests_record_the_server_user_and_client(store, tmp_path):
    """Through kctl serve: the server's user (the SSH login), the client's own name."""
    import socket

    from kctl.apiserver import serve
    from kctl.apiserver.remote import RemoteAPIServer

    served = APIServer(store, user="sshuser", warn=serve.warn)
    a, b = socket.socketpair()

    class Channel:
        rfile, wfile = a.makefile("rb"), a.makefile("wb")

        def failure(self) -> str:
            return "gone"

        def close(self) -> None:
            a.shutdown(socket.SHUT_RDWR)  # the client's reader sees the end at once (as when ssh exits)
            a.close()

    server = serve.Server(served, b.makefile("rb"), b.makefile("wb"), workers=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    client = RemoteAPIServer("test://control", channel_factory=Channel)
    try:
        with audit.client("kctl/test (apply)"):
            client.create(_cm())
    finally:
        client.close()
        for sock in (a, b):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        thread.join(30)
        b.close()
    (event,) = _events(served)
    assert event["user"] == {"username": "sshuser"}
    assert event["userAgent"] == "kctl/test (apply)"


def test_env_var_path(tmp_path, monkeypatch):
    """KCTL_AUDIT_LOG=PATH puts the log there."""
    monkeypatch.setenv(audit.ENV_PATH, str(tmp_path / "elsewhere" / "a.log"))
    api = APIServer(Store(tmp_path / "s" / "kctl.db"), user="u")
    api.create(_cm())
    assert (tmp_path / "elsewhere" / "a.log").exists()
    assert os.stat(tmp_path / "elsewhere").st_mode & 0o077 == 0
    api.store.close()


def test_resource_metrics_writes_are_not_audited(api):
    """The agents' PodMetrics writes (Kubernetes never stores them) stay out of the log; other writes stay in."""
    api.create({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                "metadata": {"name": "web", "namespace": "default"}, "timestamp": "2026-12-04T00:00:00Z",
                "window": "15s", "containers": [{"name": "web", "usage": {"cpu": "1m", "memory": "1Mi"}}]})
    api.create(_cm())
    assert [(verb, resource) for verb, resource, *_ in _summary(api)] == [("create", "configmaps")]
