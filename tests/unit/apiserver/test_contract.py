"""The API contract (kctl.apiserver.contract.API): both API forms implement it, and its new operations behave.

APIServer, RemoteAPIServer and RESTAPIClient (kctl.apiserver.rest) must have every member of the
Protocol with a compatible signature; the operations clients used to reach around the API for (find, get_by_uid,
revision, namespace_of, schema_of, update_status_all, the store's administration) answer
alike in process and over the wire (kctl.apiserver.serve on a socketpair).
"""

from __future__ import annotations

import inspect
import socket
import threading

import pytest

from kctl.apiserver import serve
from kctl.apiserver.server import APIServer
from kctl.apiserver.contract import API
from kctl.machinery.errors import BadRequest, Conflict, NotFound
from kctl.apiserver.remote import RemoteAPIServer
from kctl.apiserver.rest.client import RESTAPIClient
from kctl.store.sqlite import Store

WAIT = 30.0  # seconds a server thread may take to end


def _members() -> dict[str, object]:
    """The Protocol's public members: name -> function or property."""
    return {name: value for name, value in vars(API).items()
            if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))}


def _incompatible(expected: inspect.Signature, actual: inspect.Signature) -> list[str]:
    """How `actual` fails to accept every call `expected` allows (empty: compatible)."""
    problems = []
    want = list(expected.parameters.values())
    have = actual.parameters
    positional = [p.name for p in want if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    have_positional = [p.name for p in have.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if have_positional[:len(positional)] != positional:
        problems.append(f"positional parameters {have_positional} are not {positional}")
    for p in want:
        q = have.get(p.name)
        if q is None:
            problems.append(f"no parameter {p.name}")
        elif q.kind != p.kind:
            problems.append(f"{p.name} is {q.kind.description}, not {p.kind.description}")
        elif p.default is not inspect.Parameter.empty and q.default != p.default:
            problems.append(f"{p.name} defaults to {q.default!r}, not {p.default!r}")
    for name, q in have.items():
        if name not in expected.parameters and q.default is inspect.Parameter.empty \
                and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD):
            problems.append(f"extra required parameter {name}")
    return problems


@pytest.fixture
def served(tmp_path):
    """An in-process APIServer over a fresh store (closed afterwards)."""
    api = APIServer(Store(tmp_path / "kctl.db"), user="tester", audit_log=None)
    yield api
    api.close()


@pytest.fixture
def remote(served):
    """A RemoteAPIServer talking to `served` through kctl.apiserver.serve on a socketpair."""
    ends: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def channel():
        client, server_end = socket.socketpair()
        ends.extend((client, server_end))
        server = serve.Server(served, server_end.makefile("rb"), server_end.makefile("wb"), workers=2)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        threads.append(thread)

        class Channel:
            rfile, wfile = client.makefile("rb"), client.makefile("wb")

            def failure(self) -> str:
                return "the test server went away"

            def close(self) -> None:
                for sock in (client, server_end):
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        return Channel()

    api = RemoteAPIServer("test://served", channel_factory=channel)
    yield api
    api.close()
    for thread in threads:
        thread.join(WAIT)
    for sock in ends:
        sock.close()


@pytest.mark.parametrize("cls", [APIServer, RemoteAPIServer, RESTAPIClient])
@pytest.mark.parametrize("name", sorted(_members()))
def test_both_api_forms_have_every_member_with_a_compatible_signature(cls, name):
    """Every Protocol member exists on both API classes; methods accept every call the Protocol allows."""
    member = _members()[name]
    if isinstance(member, property):
        instance_attrs = {"APIServer": ("user",), "RemoteAPIServer": ("where",), "RESTAPIClient": ()}[cls.__name__]
        assert isinstance(getattr(cls, name, None), property) or name in instance_attrs, f"{cls.__name__}.{name}"
        return
    implementation = getattr(cls, name, None)
    assert callable(implementation), f"{cls.__name__} has no method {name}"
    assert _incompatible(inspect.signature(member), inspect.signature(implementation)) == []


def test_instances_satisfy_the_runtime_protocol(served, remote):
    """isinstance(api, API) holds for an APIServer and for a connected RemoteAPIServer."""
    assert isinstance(served, API)
    assert isinstance(remote, API)


def test_where_and_local_path_name_the_store(served, remote, tmp_path):
    """A local API names its store's file; the remote one its URL, and no local file."""
    assert served.where == served.local_path == str(tmp_path / "kctl.db")
    assert remote.where == "test://served" and remote.local_path is None


def _pod(name: str, **status) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}, "status": status}


@pytest.mark.parametrize("form", ["served", "remote"])
def test_update_status_all_writes_many_statuses_in_one_transaction(form, served, remote):
    """Each status is written alone (NotFound, pinned Conflict, unchanged), all in one batch."""
    api = {"served": served, "remote": remote}[form]
    pods = served.resource("pods")
    for name in ("a", "b", "c"):
        served.create(_pod(name))
    stale = served.get(pods, "c")
    served.update_status({**stale, "status": {"phase": "Pending"}})
    before = api.revision()
    same = served.get(pods, "b")
    results = api.update_status_all([
        {**_pod("a", phase="Running"), "spec": {"containers": []}},  # only status is written
        {**same, "metadata": {k: v for k, v in same["metadata"].items() if k != "resourceVersion"}},
        {**stale, "status": {"phase": "Running"}},  # pins an old resourceVersion
        _pod("ghost", phase="Running"),
    ])
    assert [r.action if r.error is None else type(r.error) for r in results] == \
        ["configured", "unchanged", Conflict, NotFound]
    assert served.get(pods, "a")["status"] == {"phase": "Running"}
    assert served.get(pods, "a")["spec"]["containers"][0]["name"] == "c"
    assert served.get(pods, "c")["status"] == {"phase": "Pending"}
    assert api.revision() == before + 1


@pytest.mark.parametrize("form", ["served", "remote"])
def test_find_get_by_uid_revision_and_kind_helpers(form, served, remote):
    """find answers None when absent, get_by_uid any kind, namespace_of and schema_of as the server."""
    api = {"served": served, "remote": remote}[form]
    cm = served.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}})
    cms, nodes = api.resource("configmaps"), api.resource("nodes")
    assert api.find(cms, "c") == cm and api.find(cms, "missing") is None
    assert api.get_by_uid(cm["metadata"]["uid"]) == cm and api.get_by_uid("nope") is None
    assert api.revision() == int(cm["metadata"]["resourceVersion"])
    assert api.namespace_of(cms, None, {}) == "default" and api.namespace_of(nodes, "x", {}) == ""
    with pytest.raises(BadRequest, match="does not match the namespace"):
        api.namespace_of(cms, "a", {"namespace": "b"})
    assert api.schema_of(api.resource("deployments")) is not None


def test_store_administration_is_local_only(served, remote, tmp_path):
    """backup, restore, vacuum and rotate_key work on a local API; the remote one refuses each in one line."""
    served.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}})
    rev = served.backup(tmp_path / "copy.db")
    assert rev == served.revision()
    before, after = served.vacuum()
    assert before > 0 and after > 0
    name, rows, key_file = served.rotate_key()
    assert name and rows == 0 and key_file.endswith(".keys")
    assert served.restore(tmp_path / "copy.db") >= rev
    for call in (lambda: remote.backup(tmp_path / "x.db"), lambda: remote.restore(tmp_path / "copy.db"),
                 remote.vacuum, remote.rotate_key):
        with pytest.raises(BadRequest, match="not supported with --server"):
            call()
