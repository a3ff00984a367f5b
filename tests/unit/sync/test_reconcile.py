"""kctl.sync.reconcile against real git repositories (kctl.testing.gitrepo) and a fresh store.

Each test commits manifests to a bare repository, reconciles a GitSource pointing at it,
and checks the cluster and the source's status: applies and prunes, a bad commit leaving
the last good state, force-pushes, the empty-render and prune-share guards, ownership
between sources, drift, dependencies, fetch failures and deletion. The last tests run the
GitSource controller in a ControllerManager.
"""

from __future__ import annotations

import shutil
import stat
import sys
import textwrap
import time

import pytest

from kctl.machinery.errors import NotFound
from kctl.sync.inventory import PRUNE_FINALIZER, REVISION_ANNOTATION, SOURCE_LABEL, SYNC_ANNOTATION
from kctl.sync.reconcile import reconcile, short_revision
from kctl.testing.gitrepo import GitRepo, configmap, deployment

GS = {"apiVersion": "kctl.io/v1alpha1", "kind": "GitSource"}


@pytest.fixture
def repo(tmp_path):
    return GitRepo.create(tmp_path / "repo")


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "git-cache"


def make_source(api, repo, name="app", namespace="default", **spec):
    return api.create({**GS, "metadata": {"name": name, "namespace": namespace},
                       "spec": {"url": repo.url, "prune": True, **spec}})


def set_spec(api, name="app", namespace="default", **spec):
    api.patch(api.resource("gitsources"), name, {"spec": spec}, patch_type="merge", namespace=namespace)


def sync(api, cache, key="default/app"):
    return reconcile(api, key, cache_dir=cache)


def source(api, name="app", namespace="default"):
    return api.get(api.resource("gitsources"), name, namespace=namespace)


def ready(api, name="app"):
    return next(c for c in source(api, name)["status"]["conditions"] if c["type"] == "Ready")


def cm(api, name, namespace="default"):
    try:
        return api.get(api.resource("configmaps"), name, namespace=namespace)
    except NotFound:
        return None


def actions(result):
    return {r.ref: r.action for r in result.results}


def test_commits_add_change_and_remove_manifests(api, repo, cache):
    """Created, then configured/unchanged/pruned as commits change; labels, revision and status follow."""
    repo.write("a.yaml", [configmap("a"), configmap("b")])
    repo.write("sub/c.yaml", configmap("c"))
    first = repo.commit("three")
    make_source(api, repo)
    result = sync(api, cache)
    assert result.ready and actions(result) == {"configmap/a": "created", "configmap/b": "created",
                                                "configmap/c": "created"}
    assert cm(api, "a")["metadata"]["labels"][SOURCE_LABEL] == "default.app"
    assert cm(api, "a")["metadata"]["annotations"][REVISION_ANNOTATION] == f"HEAD@{first}"
    status = source(api)["status"]
    assert status["lastAppliedRevision"] == f"HEAD@{first}" and status["observedGeneration"] == 1
    assert ready(api)["reason"] == "Applied" and ready(api)["message"] == f"Applied revision HEAD@{first[:12]}"
    assert len(status["inventory"]) == 3 and all(e["uid"] for e in status["inventory"])

    repo.write("a.yaml", [configmap("a"), configmap("b", k="changed")])
    repo.remove("sub")
    second = repo.commit("change b, drop c")
    result = sync(api, cache)
    assert actions(result) == {"configmap/a": "unchanged", "configmap/b": "configured", "configmap/c": "pruned"}
    assert cm(api, "c") is None and cm(api, "b")["data"] == {"k": "changed"}
    # the revision annotation names the commit that last changed each object
    assert cm(api, "a")["metadata"]["annotations"][REVISION_ANNOTATION] == f"HEAD@{first}"
    assert cm(api, "b")["metadata"]["annotations"][REVISION_ANNOTATION] == f"HEAD@{second}"
    assert [e["name"] for e in source(api)["status"]["inventory"]] == ["a", "b"]


def test_namespace_and_its_objects_in_one_commit(api, repo, cache):
    """A Namespace and objects in it apply together (the Namespace first), outside the source's namespace."""
    repo.write("all.yaml", [configmap("cfg", namespace="team"),
                            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}])
    repo.commit()
    make_source(api, repo)
    result = sync(api, cache)
    assert result.ready, result.error_line()
    assert cm(api, "cfg", "team") is not None
    assert set(actions(result)) == {"namespace/team", "team/configmap/cfg"}


def test_parse_error_keeps_last_good_state(api, repo, cache):
    """A document that does not parse stalls the source with its file and line; nothing changes."""
    repo.write("a.yaml", configmap("a"))
    good = repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready
    before = cm(api, "a")
    repo.write("a.yaml", [configmap("a", k="new")])
    repo.write("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n")
    bad = repo.commit("broken")
    result = sync(api, cache)
    assert not result.ready and result.reason == "RenderFailed"
    status = source(api)["status"]
    assert status["error"]["file"] == "bad.yaml" and isinstance(status["error"]["line"], int)
    assert result.error_line().startswith(f"bad.yaml:{status['error']['line']}: ")
    assert status["lastAppliedRevision"] == f"HEAD@{good}" and status["lastAttemptedRevision"] == f"HEAD@{bad}"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Stalled"]["status"] == "True" and conditions["Ready"]["status"] == "False"
    assert cm(api, "a") == before


def test_admission_denial_applies_nothing_of_the_revision(api, repo, cache, tmp_path):
    """One object refused (schema, or a validating hook) and no object of the revision is written."""
    repo.write("a.yaml", configmap("a"))
    repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready
    repo.write("a.yaml", configmap("a", k="new"))
    bad = deployment("web")
    bad["spec"]["replicas"] = "three"
    repo.write("apps.yaml", [configmap("b"), bad])
    repo.commit("bad replicas")
    result = sync(api, cache)
    assert result.reason == "ApplyFailed"
    error = source(api)["status"]["error"]
    assert error["file"] == "apps.yaml" and error["line"] > 1 and "spec.replicas" in error["message"]
    assert cm(api, "b") is None and cm(api, "a")["data"] == {"k": "a"}
    assert actions(result) == {"deployment.apps/web": "error"}

    # a validating hook that refuses ConfigMaps named "b"
    hook = tmp_path / "deny-b.py"
    hook.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys
        review = json.load(sys.stdin)
        request = review["request"]
        allowed = request["name"] != "b"
        json.dump({{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {{
            "uid": request["uid"], "allowed": allowed, "status": {{"message": "no b here"}}}}}}, sys.stdout)
        """))
    hook.chmod(hook.stat().st_mode | stat.S_IEXEC)
    api.create({"apiVersion": "kctl.io/v1alpha1", "kind": "ValidatingAdmissionHook", "metadata": {"name": "deny-b"},
                "spec": {"command": [str(hook)], "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                                                            "resources": ["configmaps"]}]}})
    repo.write("apps.yaml", [configmap("b")])
    repo.commit("b only")
    result = sync(api, cache)
    assert result.reason == "ApplyFailed" and "no b here" in result.error_line()
    assert result.error_line().startswith("apps.yaml:")
    assert cm(api, "b") is None and cm(api, "a")["data"] == {"k": "a"}


def test_force_push_is_followed(api, repo, cache):
    """The remote branch rewritten to an older commit: its state is applied, the newer objects pruned."""
    repo.write("a.yaml", [configmap("a"), configmap("b")])
    old = repo.commit()
    repo.write("c.yaml", configmap("c"))
    repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready and cm(api, "c") is not None
    repo.force_push(old)
    result = sync(api, cache)
    assert result.ready and actions(result)["configmap/c"] == "pruned"
    assert source(api)["status"]["lastAppliedRevision"] == f"HEAD@{old}"


def test_empty_render_is_refused_unless_allowed(api, repo, cache):
    """A revision with no object prunes nothing (EmptyRender); allowEmpty (with the limit lifted) prunes all."""
    repo.write("a.yaml", [configmap("a"), configmap("b")])
    repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready
    repo.remove("a.yaml")
    repo.write("README.md", "moved elsewhere\n")
    repo.commit("oops")
    result = sync(api, cache)
    assert result.reason == "EmptyRender" and "renders no object" in result.message
    assert cm(api, "a") is not None and cm(api, "b") is not None
    set_spec(api, allowEmpty=True, maxPrunePercent=100)
    result = sync(api, cache)
    assert result.ready and actions(result) == {"configmap/a": "pruned", "configmap/b": "pruned"}
    assert source(api)["status"].get("inventory") is None


def test_prune_share_over_the_limit_is_refused_then_forced(api, repo, cache):
    """Pruning 3 of 4 (> 50%) writes nothing at all; spec.force allows it once and is then cleared."""
    repo.write("a.yaml", [configmap(n) for n in "abcd"])
    repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready
    repo.write("a.yaml", [configmap("a", k="changed")])
    repo.commit("drop three")
    result = sync(api, cache)
    assert result.reason == "PruneLimitExceeded" and "3 of 4 objects (75%)" in result.message
    assert all(cm(api, n) is not None for n in "abcd") and cm(api, "a")["data"] == {"k": "a"}
    set_spec(api, force=True)
    result = sync(api, cache)
    assert result.ready, result.message
    assert [n for n in "abcd" if cm(api, n)] == ["a"] and cm(api, "a")["data"] == {"k": "changed"}
    gs = source(api)
    assert gs["spec"].get("force") in (None, False)
    assert gs["status"]["observedGeneration"] == gs["metadata"]["generation"]


def test_two_sources_never_prune_or_take_each_others_objects(api, repo, cache, tmp_path):
    """B cannot write A's object (ApplyFailed, owned by source default.a); each prunes only its own."""
    other = GitRepo.create(tmp_path / "other")
    repo.write("a.yaml", [configmap("shared"), configmap("a1"), configmap("a2")])
    repo.commit()
    other.write("b.yaml", [configmap("b1"), configmap("b2")])
    other.commit()
    make_source(api, repo, name="a")
    make_source(api, other, name="b")
    assert sync(api, cache, "default/a").ready and sync(api, cache, "default/b").ready
    api.create(configmap("by-hand"))
    other.write("b.yaml", [configmap("b1"), configmap("shared", k="b's")])
    other.commit("take shared")
    result = sync(api, cache, "default/b")
    assert result.reason == "ApplyFailed" and "owned by source default.a" in result.error_line()
    assert cm(api, "shared")["data"] == {"k": "shared"} and cm(api, "b2") is not None  # nothing of it applied
    repo.write("a.yaml", [configmap("shared"), configmap("a1")])
    repo.commit("drop a2")
    assert actions(sync(api, cache, "default/a"))["configmap/a2"] == "pruned"
    assert {n for n in ("b1", "b2", "by-hand", "shared", "a1") if cm(api, n)} == {"b1", "b2", "by-hand",
                                                                                  "shared", "a1"}
    # b2 moves from B to A: deleted by hand, re-created by A; B dropping it must not prune A's b2
    api.delete(api.resource("configmaps"), "b2", namespace="default")
    repo.write("a.yaml", [configmap("shared"), configmap("a1"), configmap("b2", k="a's")])
    repo.commit("take b2")
    assert sync(api, cache, "default/a").ready
    other.write("b.yaml", [configmap("b1")])
    other.commit("drop b2")
    result = sync(api, cache, "default/b")
    assert result.ready and actions(result)["configmap/b2"] == "skipped"
    assert cm(api, "b2")["data"] == {"k": "a's"}


def test_drift_is_corrected_at_the_next_reconcile(api, repo, cache):
    """A patch made out of band is seen (no fast path) and restored by the three-way apply."""
    repo.write("a.yaml", configmap("a", k="v1"))
    repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready
    assert sync(api, cache).fast_path
    api.patch(api.resource("configmaps"), "a", {"data": {"k": "edited"}}, patch_type="merge", namespace="default")
    result = sync(api, cache)
    assert not result.fast_path and actions(result) == {"configmap/a": "configured"}
    assert cm(api, "a")["data"] == {"k": "v1"}
    assert sync(api, cache).fast_path  # the new resourceVersion is recorded


def test_drift_left_alone_when_annotated_disabled(api, repo, cache):
    """kctl.io/sync: disabled: the object is skipped, keeps its edits, and is not pruned when dropped."""
    repo.write("a.yaml", [configmap("a"), configmap("b"), configmap("c")])
    repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready
    api.patch(api.resource("configmaps"), "a", {"metadata": {"annotations": {SYNC_ANNOTATION: "disabled"}},
                                                "data": {"k": "hand"}}, patch_type="merge", namespace="default")
    result = sync(api, cache)
    assert result.ready and actions(result)["configmap/a"] == "skipped"
    assert cm(api, "a")["data"] == {"k": "hand"}
    repo.write("a.yaml", [configmap("b"), configmap("c")])
    repo.commit("drop a")
    result = sync(api, cache)
    assert result.ready and actions(result)["configmap/a"] == "skipped" and cm(api, "a") is not None


def test_report_mode_reports_drift_and_writes_nothing(api, repo, cache):
    """mode Report: results "drifted" and DriftDetected for an edited, a missing and a prunable object."""
    repo.write("a.yaml", [configmap("a"), configmap("b"), configmap("c")])
    repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready
    set_spec(api, mode="Report")
    api.patch(api.resource("configmaps"), "a", {"data": {"k": "edited"}}, patch_type="merge", namespace="default")
    api.delete(api.resource("configmaps"), "b", namespace="default")
    repo.write("a.yaml", [configmap("a"), configmap("b")])
    repo.commit("drop c")
    result = sync(api, cache)
    assert result.reason == "DriftDetected" and not result.ready
    assert actions(result) == {"configmap/a": "drifted", "configmap/b": "drifted", "configmap/c": "drifted"}
    assert cm(api, "a")["data"] == {"k": "edited"} and cm(api, "b") is None and cm(api, "c") is not None
    set_spec(api, mode="Apply")
    assert sync(api, cache).ready and cm(api, "a")["data"] == {"k": "a"} and cm(api, "c") is None


def test_depends_on_waits_for_a_ready_dependency(api, repo, cache, tmp_path):
    """B waits (DependencyNotReady, 5 s) until A is Ready at its generation; then B applies."""
    other = GitRepo.create(tmp_path / "other")
    repo.write("ns.yaml", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    repo.commit()
    other.write("cfg.yaml", configmap("cfg", namespace="team"))
    other.commit()
    make_source(api, repo, name="base")
    make_source(api, other, name="apps", dependsOn=[{"name": "base"}])
    result = sync(api, cache, "default/apps")
    assert result.reason == "DependencyNotReady" and result.requeue == 5.0
    conditions = {c["type"]: c for c in source(api, "apps")["status"]["conditions"]}
    assert conditions["Reconciling"]["status"] == "True" and conditions["Reconciling"]["reason"] == "DependencyNotReady"
    assert cm(api, "cfg", "team") is None
    assert sync(api, cache, "default/base").ready
    set_spec(api, name="base", interval="2m")  # a new generation not yet reconciled: not ready again
    assert sync(api, cache, "default/apps").reason == "DependencyNotReady"
    assert sync(api, cache, "default/base").ready
    assert sync(api, cache, "default/apps").ready and cm(api, "cfg", "team") is not None


def test_fetch_failure_deletes_nothing(api, repo, cache):
    """The repository gone: FetchFailed (not stalled), objects and last applied revision kept."""
    repo.write("a.yaml", [configmap("a"), configmap("b")])
    good = repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready
    shutil.rmtree(repo.remote)
    result = sync(api, cache)
    assert result.reason == "FetchFailed" and not result.ready
    status = source(api)["status"]
    assert status["lastAppliedRevision"] == f"HEAD@{good}" and len(status["inventory"]) == 2
    assert "Stalled" not in {c["type"] for c in status["conditions"]}
    assert cm(api, "a") is not None and cm(api, "b") is not None


def test_pinned_revision_rolls_back(api, repo, cache):
    """spec.revision pins a commit (abbreviated) or a tag; the branch's newer commits are ignored."""
    repo.write("a.yaml", configmap("a", k="v1"))
    v1 = repo.commit()
    repo.tag("v1")
    repo.write("a.yaml", configmap("a", k="v2"))
    repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready and cm(api, "a")["data"] == {"k": "v2"}
    set_spec(api, revision=v1[:10])
    result = sync(api, cache)
    assert result.ready and cm(api, "a")["data"] == {"k": "v1"}
    assert source(api)["status"]["lastAppliedRevision"] == f"{v1[:10]}@{v1}"
    assert sync(api, cache).fast_path
    set_spec(api, revision="v1")
    assert sync(api, cache).revision == f"v1@{v1}"


def test_deleting_a_pruning_source_prunes_its_objects(api, repo, cache):
    """prune: true adds the kctl.io/sync-prune finalizer; on deletion the objects go, then the source."""
    repo.write("a.yaml", [configmap("a"), configmap("b")])
    repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready
    assert PRUNE_FINALIZER in source(api)["metadata"]["finalizers"]
    api.create(configmap("by-hand"))
    api.delete(api.resource("gitsources"), "app", namespace="default")
    assert source(api)["metadata"].get("deletionTimestamp")
    result = sync(api, cache)
    assert result.reason == "Pruned" and actions(result) == {"configmap/a": "pruned", "configmap/b": "pruned"}
    assert cm(api, "a") is None and cm(api, "by-hand") is not None
    with pytest.raises(NotFound):
        source(api)


def test_deleting_a_source_without_prune_leaves_its_objects(api, repo, cache):
    """prune: false: no finalizer, the source goes at once, its objects stay."""
    repo.write("a.yaml", configmap("a"))
    repo.commit()
    make_source(api, repo, prune=False)
    assert sync(api, cache).ready
    assert PRUNE_FINALIZER not in (source(api)["metadata"].get("finalizers") or [])
    api.delete(api.resource("gitsources"), "app", namespace="default")
    with pytest.raises(NotFound):
        source(api)
    assert cm(api, "a") is not None


def test_no_change_fast_path_writes_nothing(api, repo, cache):
    """Same commit, same generation, same object versions: no render, no write (status untouched)."""
    repo.write("a.yaml", [configmap("a"), deployment("web")])
    repo.commit()
    make_source(api, repo)
    assert sync(api, cache).ready
    rv = source(api)["metadata"]["resourceVersion"]
    revision = api.store.revision()
    result = sync(api, cache)
    assert result.fast_path and result.ready and actions(result) == {"configmap/a": "unchanged",
                                                                      "deployment.apps/web": "unchanged"}
    assert api.store.revision() == revision and source(api)["metadata"]["resourceVersion"] == rv
    repo.commit("empty", allow_empty=True)
    result = sync(api, cache)
    assert not result.fast_path and set(actions(result).values()) == {"unchanged"}
    assert short_revision(result.revision) == f"HEAD@{repo.head()[:12]}"


def test_custom_resource_with_its_crd_in_one_revision(api, repo, cache):
    """A CRD and an object of its kind in one commit: the CRD first, then the object."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "size": {"type": "integer"}}}}}}}]}}
    repo.write("crd.yaml", crd)
    repo.write("widget.yaml", {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                               "spec": {"size": 3}})
    repo.commit()
    make_source(api, repo)
    result = sync(api, cache)
    assert result.ready, result.error_line()
    assert api.get(api.resource("widgets"), "w", namespace="default")["spec"] == {"size": 3}
    assert sync(api, cache).fast_path


def test_secret_ref_missing_is_a_fetch_failure(api, repo, cache):
    """spec.secretRef naming no Secret: FetchFailed naming it, nothing applied."""
    repo.write("a.yaml", configmap("a"))
    repo.commit()
    make_source(api, repo, secretRef={"name": "creds"})
    result = sync(api, cache)
    assert result.reason == "FetchFailed" and 'secret "creds"' in result.message and cm(api, "a") is None


# -- the controller -------------------------------------------------------------------------

def wait_for(check, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_controller_syncs_dependents_and_honours_suspend(api, repo, tmp_path):
    """In a ControllerManager: B applies once A is Ready; a suspended source is never touched."""
    import threading

    from kctl.controllers.manager import ControllerManager
    from kctl.sync.controller import GitSourceController

    other = GitRepo.create(tmp_path / "other")
    repo.write("a.yaml", configmap("a"))
    repo.commit()
    other.write("b.yaml", configmap("b"))
    other.commit()
    make_source(api, other, name="b", dependsOn=[{"name": "a"}])
    make_source(api, repo, name="frozen", suspend=True)
    manager = ControllerManager(api, [GitSourceController()], workers=1, leader_election=False)
    stop = threading.Event()
    manager.start(stop)
    try:
        assert wait_for(lambda: (source(api, "b").get("status") or {}).get("conditions"))
        assert cm(api, "b") is None
        make_source(api, repo, name="a")
        assert wait_for(lambda: cm(api, "b") is not None), source(api, "b").get("status")
        assert cm(api, "a") is not None
        assert (tmp_path / "state" / "git-cache").is_dir()
        assert oct((tmp_path / "state" / "git-cache").stat().st_mode & 0o777) == "0o700"
        assert "status" not in source(api, "frozen")
    finally:
        stop.set()
        manager.stop()
