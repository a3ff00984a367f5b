"""`kctl wait --for=condition|delete|jsonpath` against a real store.

A thread changes the object once the command watches (standing in for a controller or
node agent), so each test shows the wait ending on a change it saw through the watch.
"""

from __future__ import annotations

import threading

import pytest

from kctl.apiserver.server import APIServer
from kctl.cli.wait import Condition, Deleted, JSONPathValue, parse_for

POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app: web}}}}
spec:
  containers:
  - {{name: c, image: busybox:1.36}}
"""
DEPLOY = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, image: busybox:1.36}
"""


@pytest.fixture
def after_watch(watching):
    """Run a function in a thread once the command watches; re-raise its error after the test."""
    threads: list[tuple[threading.Thread, list]] = []

    def start(fn):
        errors: list = []

        def run():
            try:
                assert watching.wait(10), "the command never watched"
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        threads.append((t, errors))

    yield start
    for t, errors in threads:
        t.join(20)
        assert not t.is_alive()
        if errors:
            raise errors[0]


def create(kctl, text: str) -> None:
    result = kctl("create", "-f", "-", input=text)
    assert result.code == 0, result.err


def write_status(server: APIServer, kind: str, name: str, status: dict) -> None:
    obj = server.get(server.resource(kind), name, namespace="default")
    obj["status"] = status
    server.update_status(obj)


READY = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


@pytest.mark.parametrize("text,expected", [
    ("delete", Deleted()),
    ("condition=Available", Condition("Available", "True")),
    ("condition=Ready=false", Condition("Ready", "false")),
    ("jsonpath={.status.phase}=Running", JSONPathValue("{.status.phase}", "Running")),
    ("jsonpath=.status.phase", JSONPathValue("{.status.phase}", None)),
    ('jsonpath={.status.conditions[?(@.type=="Ready")].status}=True',
     JSONPathValue('{.status.conditions[?(@.type=="Ready")].status}', "True")),
], ids=["delete", "condition", "condition-status", "jsonpath", "jsonpath-exists", "jsonpath-filter"])
def test_parse_for(text, expected):
    """kubectl's --for forms parse into the matching check."""
    assert parse_for(text) == expected


@pytest.mark.parametrize("obj,met", [
    ({"metadata": {"generation": 2}, "status": {"observedGeneration": 1, "conditions": [
        {"type": "Available", "status": "True"}]}}, False),
    ({"metadata": {"generation": 2}, "status": {"observedGeneration": 2, "conditions": [
        {"type": "Available", "status": "True"}]}}, True),
    ({"metadata": {"generation": 2}, "status": {"conditions": [
        {"type": "available", "status": "true", "observedGeneration": 1}]}}, False),
    ({"metadata": {}, "status": {"conditions": [{"type": "Available", "status": "False"}]}}, False),
    ({"metadata": {}}, False),
], ids=["stale-generation", "observed", "stale-condition-generation", "false", "no-status"])
def test_condition_waits_for_observed_generation(obj, met):
    """A condition counts only once status (or the condition) has observed the current generation."""
    assert Condition("Available").met(obj) is met


def test_wait_condition_met_after_controller_writes(kctl, server, after_watch):
    """wait blocks on a stale status and ends when the new generation is observed Available."""
    create(kctl, DEPLOY)
    stale = {"observedGeneration": 0, "conditions": [{"type": "Available", "status": "True"}]}
    write_status(server, "deployments", "web", stale)
    after_watch(lambda: write_status(server, "deployments", "web", {**stale, "observedGeneration": 1}))
    result = kctl("wait", "deployment/web", "--for=condition=Available", "--timeout", "20s")
    assert (result.code, result.out) == (0, "deployment.apps/web condition met\n"), result.err


def test_wait_timeout_on_stale_status(kctl, server):
    """A condition true only for an older generation times out with kubectl's message and exit 9."""
    create(kctl, DEPLOY)
    write_status(server, "deployments", "web",
                 {"observedGeneration": 0, "conditions": [{"type": "Available", "status": "True"}]})
    result = kctl("wait", "deploy/web", "--for", "condition=Available", "--timeout", "200ms")
    assert result.code == 9
    assert result.err == "error: timed out waiting for the condition on deployments/web\n"


def test_wait_for_delete(kctl, server, after_watch):
    """--for=delete ends when the object goes; an object already gone is success at once."""
    create(kctl, POD.format(name="p"))
    after_watch(lambda: server.delete(server.resource("pods"), "p", namespace="default"))
    result = kctl("wait", "pod/p", "--for=delete")
    assert (result.code, result.out) == (0, "pod/p condition met\n"), result.err
    gone = kctl("wait", "pod/p", "--for=delete")
    assert (gone.code, gone.out, gone.err) == (0, "", "")


def test_wait_jsonpath_value(kctl, server, after_watch):
    """--for=jsonpath=...=VALUE ends when the path has that value (a filter expression too)."""
    create(kctl, POD.format(name="p"))
    after_watch(lambda: write_status(server, "pods", "p", READY))
    result = kctl("wait", "pod/p", '--for=jsonpath={.status.conditions[?(@.type=="Ready")].status}=True')
    assert (result.code, result.out) == (0, "pod/p condition met\n"), result.err


def test_wait_selector_waits_for_each(kctl, server, after_watch):
    """-l waits for every matching object and prints a line for each."""
    create(kctl, POD.format(name="a"))
    create(kctl, POD.format(name="b"))
    write_status(server, "pods", "a", READY)

    def ready_b():
        write_status(server, "pods", "b", {"phase": "Pending"})
        write_status(server, "pods", "b", READY)

    after_watch(ready_b)
    result = kctl("wait", "pods", "-l", "app=web", "--for", "condition=Ready")
    assert (result.code, result.out) == (0, "pod/a condition met\npod/b condition met\n"), result.err


@pytest.mark.parametrize("args,code,err", [
    (["pods", "-l", "app=none", "--for=condition=Ready"], 1, "error: no matching resources found\n"),
    (["pod/p", "--for=bogus"], 1, 'error: unrecognized condition: "bogus"\n'),
    (["pod/p"], 1, "error: --for must be set: delete, condition=TYPE[=STATUS] or jsonpath={.path}[=VALUE]\n"),
    (["pod/p", "--for=jsonpath={.status.phase}=Running", "--timeout", "0"], 9,
     "error: timed out waiting for the condition on pods/p\n"),
], ids=["no-match", "bad-for", "no-for", "timeout-zero-checks-once"])
def test_wait_errors(kctl, args, code, err):
    """Refusals and a zero timeout give kubectl's one-line errors."""
    create(kctl, POD.format(name="p"))
    result = kctl("wait", *args)
    assert (result.code, result.err) == (code, err)


def test_wait_missing_object(kctl):
    """Waiting for a condition of an object that does not exist is NotFound (exit 3)."""
    result = kctl("wait", "deploy/nope", "--for=condition=Available")
    assert result.code == 3 and "not found" in result.err
