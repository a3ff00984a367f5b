"""The remote API (kctl.apiserver.remote <-> kctl.apiserver.serve) over a socketpair, the server in a thread.

What is verified: every method answers as the in-process APIServer does, errors come back
as the same kctl.machinery.errors classes, many threads share one connection, watches stream
and are cancelled, a dead server gives a clear ServerUnavailable and the next call
connects again; and the ssh command line is built safely.
"""

from __future__ import annotations

import shlex
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

from kctl.apiserver import serve, wire
from kctl.apiserver.contract import Binding, WriteResult
from kctl.apiserver.server import APIServer
from kctl.machinery.errors import AlreadyExists, BadRequest, Conflict, Forbidden, Gone, Invalid, NotFound
from kctl.apiserver.remote import RemoteAPIServer, SSHChannel, ssh_command
from kctl.machinery.selectors import parse_field_selector, parse_label_selector
from kctl.apiserver.wire import ServerUnavailable

WAIT = 30.0  # seconds a background thread may take before a test fails


class SocketChannel:
    """A Channel whose far end is a kctl.apiserver.serve.Server on a thread of this process."""

    def __init__(self, api: APIServer) -> None:
        self._client, self._server = socket.socketpair()
        self.rfile, self.wfile = self._client.makefile("rb"), self._client.makefile("wb")
        self.server = serve.Server(api, self._server.makefile("rb"), self._server.makefile("wb"), workers=4)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def kill(self) -> None:
        """The server end goes away, as when ssh dies."""
        self._server.shutdown(socket.SHUT_RDWR)

    def failure(self) -> str:
        return "the test server went away"

    def close(self) -> None:
        for sock in (self._client, self._server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(WAIT)
        for f in (self.rfile, self.wfile):
            try:
                f.close()
            except OSError:
                pass
        self._client.close()
        self._server.close()


@pytest.fixture
def served(store):
    """The APIServer the remote side serves (its warnings go back with the responses)."""
    return APIServer(store, user="control", warn=serve.warn)


@pytest.fixture
def channels():
    return []


@pytest.fixture
def remote(served, channels):
    """A RemoteAPIServer whose every connection is a new SocketChannel to `served`."""
    warnings: list[str] = []

    def connect() -> SocketChannel:
        channel = SocketChannel(served)
        channels.append(channel)
        return channel

    client = RemoteAPIServer("test://control", channel_factory=connect, warn=warnings.append)
    client.warnings = warnings
    yield client
    client.close()
    for channel in channels:
        channel.close()


def cm(name: str, ns: str = "default", **labels) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": {"k": name}}


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]},
}


# -- every method ------------------------------------------------------------------------------

def test_hello_names_the_server(remote):
    """The first call connects; the server's user and protocol are known afterwards."""
    assert remote.user == "control"
    assert remote.server_info["protocol"] == wire.PROTOCOL


def test_reads_match_the_local_api(remote, served):
    """get, list (label and field selectors), find, get_by_uid, revision: the same answers as in-process."""
    for i, tier in enumerate(("web", "web", "db")):
        served.create(cm(f"c{i}", tier=tier))
    rt = remote.resource("configmaps")
    assert remote.get(rt, "c1") == served.get(rt, "c1")
    labels = parse_label_selector("tier in (web),tier!=db")
    fields = parse_field_selector("metadata.name!=c0")
    items, rev = remote.list(rt, namespace="default", label_selector=labels, field_selector=fields)
    assert [o["metadata"]["name"] for o in items] == ["c1"]
    assert (items, rev) == served.list(rt, namespace="default", label_selector=labels, field_selector=fields)
    assert remote.list(rt, label_selector=parse_label_selector("tier"))[0] == served.list(rt)[0]
    assert remote.revision() == served.revision() == served.store.revision()
    assert remote.find(rt, "c2") == served.find(rt, "c2") == served.store.get("ConfigMap", "default", "c2")
    uid = items[0]["metadata"]["uid"]
    assert remote.get_by_uid(uid)["metadata"]["name"] == "c1" == served.get_by_uid(uid)["metadata"]["name"]
    assert remote.find(rt, "none") is None and served.find(rt, "none") is None
    assert remote.get_by_uid("no-such-uid") is None


def test_writes_reach_the_store(remote, served):
    """create, update, update_status, patch (merge and json), delete: stored as the API writes them."""
    rt_cm, rt_pod = remote.resource("cm"), remote.resource("pods")
    created = remote.create(cm("a"))
    assert served.get(rt_cm, "a") == created
    created["data"] = {"k": "changed"}
    assert remote.update(created)["data"] == {"k": "changed"}
    assert remote.patch(rt_cm, "a", {"data": {"m": "1"}}, patch_type="merge")["data"] == {"k": "changed", "m": "1"}
    patched = remote.patch(rt_cm, "a", [{"op": "remove", "path": "/data/k"}], patch_type="json")
    assert served.get(rt_cm, "a")["data"] == {"m": "1"} == patched["data"]
    p = remote.create(pod("p"))
    p["status"] = {"phase": "Running"}
    assert remote.update_status(p)["status"]["phase"] == "Running"
    assert remote.update(served.get(rt_pod, "p"), subresource="status", dry_run=True)["status"]["phase"] == "Running"
    remote.delete(rt_cm, "a", propagation="Background")
    with pytest.raises(NotFound):
        served.get(rt_cm, "a")
    assert remote.create(cm("dry"), dry_run=True)["metadata"]["name"] == "dry"
    with pytest.raises(NotFound):
        served.get(rt_cm, "dry")


def test_apply_and_write_all_return_write_results(remote, served):
    """apply gives a WriteResult; write_all reports each object, errors as typed exceptions."""
    first = remote.apply(cm("x"))
    assert isinstance(first, WriteResult) and first.action == "created" and first.error is None
    assert remote.apply(cm("x")).action == "unchanged"
    bad = pod("bad")
    bad["spec"]["containers"] = []
    results = remote.write_all([("apply", cm("y")), ("create", bad)], atomic=True)
    assert [r.action for r in results][0] in ("created", "")
    assert isinstance(results[1].error, Invalid) and results[1].error.causes
    with pytest.raises(NotFound):
        served.get(served.resource("cm"), "y")  # atomic: nothing written
    results = remote.write_all([("apply", cm("y")), ("apply", cm("z"))])
    assert [r.action for r in results] == ["created", "created"]


def test_bind_and_bind_all(remote, served):
    """pods/binding over the wire: a Binding binds, a second binding of the same pod conflicts."""
    served.create(pod("p1"))
    served.create(pod("p2"))
    assert remote.bind("default", "p1", "n1")["spec"]["nodeName"] == "n1"
    results = remote.bind_all([Binding("default", "p2", "n2"), Binding("default", "p1", "n2")])
    assert results[0].obj["spec"]["nodeName"] == "n2"
    assert isinstance(results[1].error, Conflict)


def test_kinds_of_custom_resources_resolve_on_the_server(remote, served):
    """A CRD's kind is known through resource, resource_for and registry; built-ins need no round trip."""
    served.create(CRD)
    rt = remote.resource("wd")
    assert rt == served.resource("widgets") and rt.crd_schema == served.resource("widgets").crd_schema
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}}
    assert remote.resource_for(widget) == rt
    assert remote.create(widget)["spec"]["size"] == 3
    assert remote.get(rt, "w")["spec"]["size"] == 3
    assert "widgets.example.com" in [t.group_resource for t in remote.registry]
    assert remote.namespace_of(rt, None, {}) == served.namespace_of(rt, None, {}) == "default"
    assert remote.schema_of(remote.resource("deployments")) == served.schema_of(served.resource("deployments"))


def test_admission_warnings_come_back(remote, served, tmp_path):
    """A hook's warning on the control host reaches the client's warn callback."""
    script = tmp_path / "warner.py"
    script.write_text(f"#!{sys.executable}\nimport json, sys\nreview = json.load(sys.stdin)\n"
                      "json.dump({'apiVersion': 'admission.k8s.io/v1', 'kind': 'AdmissionReview', 'response': "
                      "{'uid': review['request']['uid'], 'allowed': True, 'warnings': ['mind the gap']}},"
                      " sys.stdout)\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    served.create({"apiVersion": "kctl.io/v1alpha1", "kind": "ValidatingAdmissionHook", "metadata": {"name": "w"},
                   "spec": {"command": [str(script)], "rules": [
                       {"operations": ["CREATE"], "apiGroups": [""], "resources": ["configmaps"]}]}})
    remote.create(cm("warned"))
    assert remote.warnings == ["mind the gap"]
    assert remote.write_all([("create", cm("warned2"))])[0].warnings == ["mind the gap"]


# -- errors ------------------------------------------------------------------------------------

def _raise_not_found(api):
    api.get(api.resource("pods"), "missing")


def _raise_already_exists(api):
    if api.find(api.resource("cm"), "dup") is None:
        api.create(cm("dup"))
    api.create(cm("dup"))


def _raise_conflict(api):
    if api.find(api.resource("cm"), "stale") is None:
        api.create(cm("stale"))
    obj = api.get(api.resource("cm"), "stale")
    obj["metadata"]["resourceVersion"] = "1"
    api.update(obj)


def _raise_invalid(api):
    bad = pod("bad")
    bad["spec"]["containers"] = [{"name": "c"}]
    api.create(bad)


def _raise_bad_request(api):
    api.resource("nosuchkind")


def _raise_forbidden(api):
    api.delete(api.resource("namespaces"), "default")


def _raise_gone(api):
    list(api.watch(api.resource("pods"), since=0, timeout=0))


ERRORS = [(_raise_not_found, NotFound), (_raise_already_exists, AlreadyExists), (_raise_conflict, Conflict),
          (_raise_invalid, Invalid), (_raise_bad_request, BadRequest), (_raise_forbidden, Forbidden),
          (_raise_gone, Gone)]


@pytest.mark.parametrize("cause,error", ERRORS, ids=[e.__name__ for _, e in ERRORS])
def test_errors_are_the_same_class_and_message(remote, served, cause, error):
    """Each typed error is raised client-side as the same class, message, reason and exit status."""
    for i in range(5):
        served.create(cm(f"filler{i}"))
    served.store.compact(keep=0)
    with pytest.raises(error) as local:
        cause(served)
    with pytest.raises(error) as far:
        cause(remote)
    assert (far.value.message, far.value.reason, far.value.exit_code, far.value.code) == \
        (local.value.message, local.value.reason, local.value.exit_code, local.value.code)
    assert getattr(far.value, "causes", None) == getattr(local.value, "causes", None)


def test_unknown_method_and_bad_line_are_bad_requests(remote, channels):
    """The server answers only its METHODS, and says so for anything else."""
    remote.revision()
    conn = remote._connection()
    reply = conn.call("store", {})
    assert wire.decode_error(reply["error"]).reason == "BadRequest"
    reply = conn.call("watch", {"rt": None, "since": 0, "_stop": True})
    assert wire.decode_error(reply["error"]).reason == "BadRequest"
    assert isinstance(wire.decode_error(conn.call("get", {"nope": 1})["error"]), BadRequest)


def test_a_bug_on_the_server_is_an_internal_error(remote, served, monkeypatch):
    """A non-API exception there becomes an APIError (InternalError) here, not a hang."""
    monkeypatch.setattr(served, "get", lambda *a, **k: 1 / 0)
    with pytest.raises(Exception) as err:
        remote.get(remote.resource("pods"), "x")
    assert err.value.reason == "InternalError" and "ZeroDivisionError" in err.value.message


# -- concurrency -------------------------------------------------------------------------------

def test_threads_share_one_connection(remote, served, channels):
    """Eight threads creating and reading at once each get their own answers, over one connection."""
    errors: list[BaseException] = []
    rt = remote.resource("cm")

    def work(t: int) -> None:
        try:
            for i in range(15):
                name = f"t{t}-{i}"
                assert remote.create(cm(name))["metadata"]["name"] == name
                assert remote.get(rt, name)["data"] == {"k": name}
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not errors
    assert len(served.list(rt)[0]) == 8 * 15
    assert len(channels) == 1


# -- watches -----------------------------------------------------------------------------------

def _until(check, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_watch_streams_in_order_and_stops(remote, served, channels):
    """Events arrive in order; setting the stop event ends the watch here and cancels it there."""
    rt = remote.resource("cm")
    rev = served.store.revision()
    stop = threading.Event()
    seen: list[tuple[str, str]] = []
    ended = threading.Event()

    def follow() -> None:
        for change_type, obj in remote.watch(rt, since=rev, stop=stop):
            seen.append((change_type, obj["metadata"]["name"]))
        ended.set()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    served.create(cm("w1"))
    served.create(cm("w2"))
    served.delete(served.resource("cm"), "w1")
    served.create(pod("not-a-configmap"))
    _until(lambda: len(seen) == 3, "three events")
    assert seen == [("ADDED", "w1"), ("ADDED", "w2"), ("DELETED", "w1")]
    stop.set()
    assert ended.wait(WAIT)
    _until(lambda: not channels[0].server._watches, "the server to drop the watch")


def test_watch_selectors_known_and_timeout(remote, served):
    """Selectors filter there (an object leaving them is DELETED); a timeout ends the stream."""
    rt = remote.resource("cm")
    kept = served.create(cm("a", tier="web"))
    rev = served.store.revision()
    kept["metadata"]["labels"] = {"tier": "db"}
    served.update(kept)
    served.create(cm("b", tier="web"))
    events = [(t, o["metadata"]["name"]) for t, o in remote.watch(
        rt, since=rev, label_selector=parse_label_selector("tier=web"), known={("default", "a")}, timeout=0.3)]
    assert events == [("DELETED", "a"), ("ADDED", "b")]


def test_leaving_a_watch_cancels_it_there(remote, served, channels):
    """Breaking out of the loop (the generator closed) tells the server to stop the watch."""
    rt = remote.resource("cm")
    rev = served.store.revision()
    served.create(cm("one"))
    for _ in remote.watch(rt, since=rev):
        break
    _until(lambda: not channels[0].server._watches, "the server to drop the watch")
    assert remote.get(rt, "one")["metadata"]["name"] == "one"  # the connection is still fine


def test_watch_gone_is_raised(remote, served):
    """A watch from a compacted revision raises Gone, as in-process."""
    for i in range(3):
        served.create(cm(f"g{i}"))
    served.store.compact(keep=0)
    with pytest.raises(Gone):
        next(iter(remote.watch(remote.resource("cm"), since=1)))


# -- the server going away ---------------------------------------------------------------------

def test_server_death_is_a_clear_error_then_reconnects(remote, served, channels):
    """A call in flight (a watch) and a call made after the death raise ServerUnavailable; later calls reconnect."""
    rt = remote.resource("cm")
    rev = remote.revision()
    failures: list[BaseException] = []

    def follow() -> None:
        try:
            for _ in remote.watch(rt, since=rev):
                pass
        except BaseException as exc:  # checked below
            failures.append(exc)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    _until(lambda: channels[0].server._watches, "the watch to start")
    channels[0].kill()
    thread.join(WAIT)
    assert len(failures) == 1 and isinstance(failures[0], ServerUnavailable)
    assert "lost the connection to the control plane at test://control: the test server went away" in \
        failures[0].message
    assert failures[0].exit_code == 1
    served.create(cm("after"))
    assert remote.get(rt, "after")["metadata"]["name"] == "after"  # a new connection
    assert len(channels) == 2


def test_unreachable_server_says_so(store):
    """When the channel cannot even start (no ssh), the error names the control plane."""

    def fail():
        raise FileNotFoundError("ssh: not found")

    client = RemoteAPIServer("test://nowhere", channel_factory=fail)
    with pytest.raises(ServerUnavailable, match="cannot reach the control plane at test://nowhere: ssh: not found"):
        client.get(client.resource("pods"), "x")


def test_protocol_mismatch_is_refused(remote, monkeypatch):
    """A server speaking another protocol is refused with a clear message."""
    monkeypatch.setattr(serve._Methods, "hello", lambda self: {"protocol": 99})
    with pytest.raises(ServerUnavailable, match="speaks protocol 99"):
        remote.revision()


# -- the ssh command ---------------------------------------------------------------------------

def test_ssh_command_quotes_each_remote_word():
    """One argv, host keys checked, each remote word quoted for the remote shell, no shell here."""
    argv = ssh_command("ssh://ops@ctl.example:2222/srv/kctl state/kctl.db", identity="/k/id",
                       known_hosts="/k/known", remote_command="'/opt/kctl env/bin/kctl' --x")
    assert argv[0] == "ssh" and "StrictHostKeyChecking=yes" in argv and "BatchMode=yes" in argv
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-i") + 1] == "/k/id"
    assert "UserKnownHostsFile=/k/known" in argv
    assert argv[-3:-1] == ["--", "ops@ctl.example"]
    assert shlex.split(argv[-1]) == ["/opt/kctl env/bin/kctl", "--x", "serve", "--stdio", "--store",
                                     "/srv/kctl state/kctl.db"]


def test_ssh_command_without_a_path_uses_the_default_store():
    """No path in the URL: no --store, the control host's default store."""
    assert shlex.split(ssh_command("ssh://ops@ctl")[-1]) == ["kctl", "serve", "--stdio"]
    assert shlex.split(ssh_command("ssh://ops@ctl/")[-1]) == ["kctl", "serve", "--stdio"]


@pytest.mark.parametrize("url", ["http://ctl/x.db", "ctl:/x.db", "ssh:///x.db"], ids=["http", "scp-like", "no-host"])
def test_bad_server_url_is_a_bad_request(url):
    """Anything but ssh://[user@]host[:port][/path] is refused before ssh runs."""
    with pytest.raises(BadRequest, match="not an ssh://"):
        RemoteAPIServer(url)


def test_messages_never_show_a_password():
    """A password put in the URL does not appear where the URL is shown."""
    client = RemoteAPIServer("ssh://ops:hunter2@ctl:22/x.db")
    assert "hunter2" not in client.where and client.where == "ssh://ops@ctl:22/x.db"


# -- `kctl serve --stdio` as a process ---------------------------------------------------------

def _serve_process(store_path) -> RemoteAPIServer:
    """A client of a real `kctl serve --stdio` subprocess (what ssh runs on the control host)."""
    argv = [sys.executable, "-m", "kctl", "serve", "--stdio", "--store", str(store_path)]
    return RemoteAPIServer("test://process", channel_factory=lambda: SSHChannel(argv))


def test_serve_command_answers_on_stdio(store, served):
    """The command serves the store named by --store; closing the client ends the process."""
    client = _serve_process(store.path)
    try:
        assert client.create(cm("via-process"))["metadata"]["name"] == "via-process"
        assert served.get(served.resource("cm"), "via-process")["data"] == {"k": "via-process"}
        process = client._conn.channel.process
    finally:
        client.close()
    assert process.wait(timeout=WAIT) == 0


def test_serve_refuses_a_store_that_does_not_exist(tmp_path):
    """A wrong path in --server is an error naming it, not a new empty store."""
    client = _serve_process(tmp_path / "typo.db")
    with pytest.raises(ServerUnavailable, match=r"ssh exited with status 1: error: no kctl store at .*typo\.db"):
        client.revision()
    assert not (tmp_path / "typo.db").exists()


def test_serve_needs_stdio():
    """Without --stdio the command explains itself and exits 2."""
    result = subprocess.run([sys.executable, "-m", "kctl", "serve"], capture_output=True, text=True, timeout=WAIT)
    assert result.returncode == 2 and "needs --stdio" in result.stderr
