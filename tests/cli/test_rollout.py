"""`kctl rollout status|history|undo|restart|pause|resume` against a real store.

A thread stands in for the Deployment controller: it writes status while `rollout
status` watches, and the test asserts the lines printed and the exit status. history
and undo read ReplicaSets the test creates; undo is checked by what it writes.
"""

from __future__ import annotations

import datetime as dt
import json
import threading

import pytest

from kctl.apiserver.server import APIServer
from kctl.cli.rollout import daemonset_status, deployment_status

DEPLOY = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: httpd
        image: busybox:1.36
"""


@pytest.fixture
def background():
    """Run a function in a thread once the command watches; re-raise its error after the test."""
    threads: list[tuple[threading.Thread, list]] = []

    def start(fn, *args):
        errors: list = []

        def run():
            try:
                fn(*args)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        threads.append((t, errors))

    yield start
    for t, errors in threads:
        t.join(20)
        assert not t.is_alive(), "controller thread hung"
        if errors:
            raise errors[0]


def create_deployment(kctl, tmp_path, text: str = DEPLOY) -> None:
    f = tmp_path / "d.yaml"
    f.write_text(text)
    result = kctl("apply", "-f", str(f))
    assert result.code == 0, result.err


def set_status(server: APIServer, name: str, status: dict, *, kind: str = "deployments") -> None:
    rt = server.resource(kind)
    obj = server.get(rt, name, namespace="default")
    obj["status"] = status
    server.update_status(obj)


def status_of(generation: int, replicas: int, updated: int, available: int, **extra) -> dict:
    return {"observedGeneration": generation, "replicas": replicas, "updatedReplicas": updated,
            "readyReplicas": available, "availableReplicas": available, **extra}


# --- status -------------------------------------------------------------------------------

STATUS_CASES = [
    ({"generation": 2}, {"observedGeneration": 1}, "Waiting for deployment spec update to be observed...", False),
    ({}, status_of(1, 3, 1, 1), 'Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been '
     "updated...", False),
    ({}, status_of(1, 4, 3, 3), 'Waiting for deployment "web" rollout to finish: 1 old replicas are pending '
     "termination...", False),
    ({}, status_of(1, 3, 3, 2), 'Waiting for deployment "web" rollout to finish: 2 of 3 updated replicas are '
     "available...", False),
    ({}, status_of(1, 3, 3, 3), 'deployment "web" successfully rolled out', True),
]


@pytest.mark.parametrize("meta,status,line,done", STATUS_CASES,
                         ids=["generation-not-observed", "updating", "old-pending", "unavailable", "done"])
def test_deployment_status_lines(meta, status, line, done):
    """Each Deployment state gives kubectl's line and whether the rollout is over."""
    d = {"metadata": {"name": "web", "generation": 1, **meta}, "spec": {"replicas": 3}, "status": status}
    assert deployment_status(d) == (line, done)


def test_deployment_status_deadline_and_revision():
    """ProgressDeadlineExceeded and a pinned revision that differs are errors."""
    d = {"metadata": {"name": "web", "generation": 1, "annotations": {"deployment.kubernetes.io/revision": "2"}},
         "spec": {"replicas": 1},
         "status": {"observedGeneration": 1, "conditions": [
             {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}}
    with pytest.raises(ValueError, match='deployment "web" exceeded its progress deadline'):
        deployment_status(d)
    with pytest.raises(ValueError, match=r"desired revision \(3\) is different from the running revision \(2\)"):
        deployment_status(d, revision=3)


@pytest.mark.parametrize("status,line,done", [
    ({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 1},
     'Waiting for daemon set "agent" rollout to finish: 1 out of 2 new pods have been updated...', False),
    ({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 1},
     'Waiting for daemon set "agent" rollout to finish: 1 of 2 updated pods are available...', False),
    ({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2},
     'daemon set "agent" successfully rolled out', True),
], ids=["updating", "unavailable", "done"])
def test_daemonset_status_lines(status, line, done):
    """DaemonSet states give kubectl's daemon set lines."""
    ds = {"metadata": {"name": "agent", "generation": 1}, "spec": {"updateStrategy": {"type": "RollingUpdate"}},
          "status": status}
    assert daemonset_status(ds) == (line, done)


def test_status_follows_rollout_to_the_end(kctl, tmp_path, server, watching, background):
    """status prints each state the 'controller' writes, in order, then exits 0."""
    create_deployment(kctl, tmp_path)

    def controller():
        assert watching.wait(10)
        for st in (status_of(1, 3, 1, 0), status_of(1, 4, 3, 1), status_of(1, 3, 3, 1), status_of(1, 3, 3, 3)):
            set_status(server, "web", st)

    background(controller)
    result = kctl("rollout", "status", "deployment/web")
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        "Waiting for deployment spec update to be observed...",
        'Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated...',
        'Waiting for deployment "web" rollout to finish: 1 old replicas are pending termination...',
        'Waiting for deployment "web" rollout to finish: 1 of 3 updated replicas are available...',
        'deployment "web" successfully rolled out',
    ]


def test_status_fails_when_progress_deadline_exceeded(kctl, tmp_path, server, watching, background):
    """A Progressing condition with ProgressDeadlineExceeded ends status with kubectl's error and exit 1."""
    create_deployment(kctl, tmp_path)

    def controller():
        assert watching.wait(10)
        set_status(server, "web", status_of(1, 3, 1, 0))
        set_status(server, "web", status_of(1, 3, 1, 0, conditions=[
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]))

    background(controller)
    result = kctl("rollout", "status", "deploy", "web")
    assert result.code == 1
    assert result.err == 'error: deployment "web" exceeded its progress deadline\n'
    assert result.out.splitlines()[-1].endswith("1 out of 3 new replicas have been updated...")


def test_status_timeout_and_no_watch(kctl, tmp_path, server):
    """--timeout ends an unfinished rollout with exit 9; --no-watch prints the state once and exits 0."""
    create_deployment(kctl, tmp_path)
    set_status(server, "web", status_of(1, 3, 3, 1))
    once = kctl("rollout", "status", "deploy/web", "--no-watch")
    assert (once.code, once.out) == (0, 'Waiting for deployment "web" rollout to finish: 1 of 3 updated replicas '
                                        "are available...\n")
    result = kctl("rollout", "status", "deploy/web", "--timeout", "200ms")
    assert result.code == 9
    assert result.err == "error: timed out waiting for the condition\n"


def test_status_of_deleted_and_unsupported(kctl, tmp_path, server, watching, background):
    """A Deployment deleted mid-watch is an error; a ConfigMap has no status viewer."""
    create_deployment(kctl, tmp_path)

    def deleter():
        assert watching.wait(10)
        server.delete(server.resource("deployments"), "web", namespace="default")

    background(deleter)
    result = kctl("rollout", "status", "deploy/web")
    assert (result.code, result.err) == (1, "error: object has been deleted\n")
    kctl("create", "-f", "-", input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    other = kctl("rollout", "status", "configmap/c")
    assert (other.code, other.err) == (1, "error: no status viewer has been implemented for ConfigMap\n")


# --- history and undo ---------------------------------------------------------------------

def add_replica_set(server: APIServer, revision: int, image: str, *, cause: str | None = None) -> None:
    d = server.get(server.resource("deployments"), "web", namespace="default")
    template = json.loads(json.dumps(d["spec"]["template"]))
    template["metadata"]["labels"]["pod-template-hash"] = f"h{revision}"
    template["spec"]["containers"][0]["image"] = image
    annotations = {"deployment.kubernetes.io/revision": str(revision),
                   "deployment.kubernetes.io/desired-replicas": "3"}
    if cause:
        annotations["kubernetes.io/change-cause"] = cause
    server.create({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": f"web-h{revision}", "namespace": "default", "annotations": annotations,
                     "labels": {"app": "web", "pod-template-hash": f"h{revision}"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                          "uid": d["metadata"]["uid"], "controller": True}]},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web", "pod-template-hash": f"h{revision}"}},
                 "template": template}})


def with_revision_history(kctl, tmp_path, server) -> None:
    """web at revision 2 (busybox:1.36); revision 1 ran busybox:1.35."""
    create_deployment(kctl, tmp_path)
    add_replica_set(server, 1, "busybox:1.35", cause="first")
    add_replica_set(server, 2, "busybox:1.36")
    d = server.get(server.resource("deployments"), "web", namespace="default")
    d["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "2"}
    server.update(d)


def test_history_lists_revisions(kctl, tmp_path, server):
    """history prints kubectl's REVISION / CHANGE-CAUSE table of the owned ReplicaSets."""
    with_revision_history(kctl, tmp_path, server)
    result = kctl("rollout", "history", "deployment/web")
    assert result.code == 0, result.err
    assert result.out == ("deployment.apps/web \nREVISION  CHANGE-CAUSE\n1         first\n2         <none>\n\n")


def test_history_of_one_revision(kctl, tmp_path, server):
    """--revision N prints that revision's pod template; an unknown one is an error."""
    with_revision_history(kctl, tmp_path, server)
    result = kctl("rollout", "history", "deploy/web", "--revision", "1")
    assert result.code == 0, result.err
    assert result.out.startswith("deployment.apps/web with revision #1\nPod Template:\n")
    assert "busybox:1.35" in result.out and "pod-template-hash=h1" in result.out
    missing = kctl("rollout", "history", "deploy/web", "--revision", "9")
    assert (missing.code, missing.err) == (1, "error: unable to find the specified revision 9\n")


def test_history_without_replica_sets(kctl, tmp_path):
    """A Deployment the controller never rolled has no history."""
    create_deployment(kctl, tmp_path)
    assert kctl("rollout", "history", "deploy/web").out == "deployment.apps/web \nNo rollout history found.\n"


def test_undo_writes_previous_template(kctl, tmp_path, server):
    """undo copies revision 1's template (without pod-template-hash) and its annotations into the Deployment."""
    with_revision_history(kctl, tmp_path, server)
    result = kctl("rollout", "undo", "deployment/web")
    assert (result.code, result.out) == (0, "deployment.apps/web rolled back\n"), result.err
    d = server.get(server.resource("deployments"), "web", namespace="default")
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.35"
    assert d["spec"]["template"]["metadata"]["labels"] == {"app": "web"}
    assert d["metadata"]["annotations"]["kubernetes.io/change-cause"] == "first"
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"  # the controller's to bump
    assert "deployment.kubernetes.io/desired-replicas" not in d["metadata"]["annotations"]
    assert d["metadata"]["generation"] == 2


@pytest.mark.parametrize("args,code,out,err", [
    (["--to-revision", "2"], 0, "deployment.apps/web skipped rollback (current template already matches "
                                "revision 2)\n", ""),
    (["--to-revision", "7"], 1, "", "error: unable to find specified revision 7 in history\n"),
], ids=["already-current", "unknown-revision"])
def test_undo_to_revision(kctl, tmp_path, server, args, code, out, err):
    """--to-revision picks the revision; the current one is skipped, an unknown one refused."""
    with_revision_history(kctl, tmp_path, server)
    result = kctl("rollout", "undo", "deploy/web", *args)
    assert (result.code, result.out, result.err) == (code, out, err)


def test_undo_refuses_paused_and_without_history(kctl, tmp_path, server):
    """A paused Deployment cannot be rolled back; one revision alone has nothing to go back to."""
    create_deployment(kctl, tmp_path)
    add_replica_set(server, 1, "busybox:1.36")
    alone = kctl("rollout", "undo", "deploy/web")
    assert (alone.code, alone.err) == (1, 'error: no rollout history found for deployment "web"\n')
    kctl("rollout", "pause", "deploy/web")
    paused = kctl("rollout", "undo", "deploy/web")
    assert paused.code == 1 and "cannot rollback a paused deployment" in paused.err


# --- restart, pause, resume -------------------------------------------------------------------

def test_restart_sets_restarted_at(kctl, tmp_path, server):
    """restart stamps the template with kubectl.kubernetes.io/restartedAt (RFC 3339), bumping generation."""
    create_deployment(kctl, tmp_path)
    result = kctl("rollout", "restart", "deployment/web")
    assert (result.code, result.out) == (0, "deployment.apps/web restarted\n"), result.err
    d = server.get(server.resource("deployments"), "web", namespace="default")
    stamp = d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
    assert dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).tzinfo is not None
    assert d["metadata"]["generation"] == 2


def test_pause_resume(kctl, tmp_path, server):
    """pause/resume set and clear spec.paused, saying 'already' when nothing changes; restart refuses paused."""
    create_deployment(kctl, tmp_path)
    assert kctl("rollout", "pause", "deploy/web").out == "deployment.apps/web paused\n"
    assert kctl("rollout", "pause", "deploy/web").out == "deployment.apps/web already paused\n"
    assert server.get(server.resource("deployments"), "web", namespace="default")["spec"]["paused"] is True
    refused = kctl("rollout", "restart", "deploy/web")
    assert (refused.code, refused.err) == (1, "error: can't restart paused deployment (run rollout resume first)\n")
    assert kctl("rollout", "resume", "deploy/web").out == "deployment.apps/web resumed\n"
    assert kctl("rollout", "resume", "deploy/web").out == "deployment.apps/web already resumed\n"
    assert not server.get(server.resource("deployments"), "web", namespace="default")["spec"].get("paused")


def test_missing_deployment_is_not_found(kctl):
    """A name that does not exist exits 3 with the server's NotFound line."""
    result = kctl("rollout", "status", "deploy/nope")
    assert result.code == 3 and "not found" in result.err
