"""Git sync in a real `kctl daemon` on real Podman: a commit is running within one interval.

The daemon fixture (tests/integration/agent/conftest.py) runs the whole daemon (node agent,
controllers with the GitSource controller, scheduler) on the session's private Podman.
A GitSource with interval 3s points at a bare repository the test commits to: the first
commit's Deployment gets a Running pod; a commit that changes replicas and a pod label is
applied within one interval and its pods run. Deleting the source (prune: true) removes the
Deployment; the fixtures remove every container, the daemon and the store.
"""

from __future__ import annotations

import time

import pytest

from kctl.machinery.errors import NotFound
from kctl.runtime.interface import LABEL_MANAGED
from kctl.testing.gitrepo import GitRepo, deployment

from .agent.conftest import api, daemon, kctl, store_file, wait_for  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration

INTERVAL = 3.0
#: what "within one interval" allows on top: the daemon's reconcile and the store's watch
APPLY_SLACK = 5.0
#: and for pods to be created, scheduled and started on Podman
POD_SLACK = 45.0


def running_pods(runtime) -> set[str]:
    """Names of the kctl pods whose app container runs on Podman."""
    return {c.labels.get("io.kctl.pod.name", "") for c in runtime.list_containers({LABEL_MANAGED: "true"})
            if c.state == "running" and c.labels.get("io.kctl.container.name") == "app"}


def ready_revision(api) -> str | None:
    """The source's lastAppliedRevision while it is Ready."""
    try:
        source = api.get(api.resource("gitsources"), "web", namespace="default")
    except NotFound:
        return None
    status = source.get("status") or {}
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or ())
    return status.get("lastAppliedRevision") if ready else None


def pods_with(api, label: str, value: str) -> list[dict]:
    pods, _ = api.list(api.resource("pods"), namespace="default")
    return [p for p in pods if (p["metadata"].get("labels") or {}).get(label) == value
            and not p["metadata"].get("deletionTimestamp")]


def test_commit_is_running_within_one_interval(api, daemon, runtime, tmp_path):  # noqa: F811
    """First commit -> a Running pod; a commit changing replicas and a label -> applied within 3 s, pods run."""
    repo = GitRepo.create(tmp_path / "repo")
    repo.write("web.yaml", deployment("web", replicas=1, command=["sh", "-c", "exec sleep 3600"]))
    first = repo.commit("web, one replica")
    api.create({"apiVersion": "kctl.io/v1alpha1", "kind": "GitSource",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"url": repo.url, "branch": "main", "interval": f"{INTERVAL:g}s", "prune": True}})
    try:
        wait_for(lambda: ready_revision(api) == f"main@{first}", what="the first commit applied", daemon=daemon)
        wait_for(lambda: len(running_pods(runtime)) == 1, what="one pod running", daemon=daemon)
        pod = pods_with(api, "app", "web")[0]
        wait_for(lambda: (api.get(api.resource("pods"), pod["metadata"]["name"], namespace="default")
                          .get("status") or {}).get("phase") == "Running", what="the pod Running", daemon=daemon)

        repo.write("web.yaml", deployment("web", replicas=2, command=["sh", "-c", "exec sleep 3600"],
                                          labels={"track": "v2"}))
        second = repo.commit("two replicas, label track=v2")
        committed = time.monotonic()
        wait_for(lambda: ready_revision(api) == f"main@{second}", what="the second commit applied",
                 timeout=INTERVAL + APPLY_SLACK, daemon=daemon)
        applied_after = time.monotonic() - committed
        deploy = api.get(api.resource("deployments"), "web", namespace="default")
        assert deploy["spec"]["replicas"] == 2, f"applied after {applied_after:.1f} s"
        assert deploy["spec"]["template"]["metadata"]["labels"]["track"] == "v2"
        wait_for(lambda: len(pods_with(api, "track", "v2")) == 2
                 and {p["metadata"]["name"] for p in pods_with(api, "track", "v2")} <= running_pods(runtime),
                 what="two track=v2 pods running on Podman", timeout=INTERVAL + POD_SLACK, daemon=daemon)
    finally:
        # prune: true -> the finalizer makes the daemon delete the Deployment before the source goes
        try:
            api.delete(api.resource("gitsources"), "web", namespace="default")
        except NotFound:
            pass
    wait_for(lambda: ready_revision(api) is None and not _exists(api, "gitsources", "web"),
             what="the GitSource deleted", daemon=daemon)
    assert not _exists(api, "deployments", "web")
    wait_for(lambda: not running_pods(runtime), what="the pods stopped", daemon=daemon)


def _exists(api, resource: str, name: str) -> bool:
    try:
        api.get(api.resource(resource), name, namespace="default")
        return True
    except NotFound:
        return False
