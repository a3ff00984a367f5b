"""Admission hooks (kctl.admission.hooks): matching, running, failures, and the example hooks."""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from kctl.admission import hooks
from kctl.admission.defaults import apply_defaults
from kctl.admission.hooks import (AdmissionRequest, matches, run_mutating, run_mutating_hooks,
                                  run_validating, run_validating_hooks)
from kctl.machinery.errors import Forbidden
from kctl.machinery.resources import builtin_registry

REGISTRY = builtin_registry()
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "hooks"
SECRET_VALUE = "c2VjcmV0LXZhbHVl-do-not-log"

PREAMBLE = f"""\
#!{sys.executable}
import json, os, sys, time
review = json.load(sys.stdin)
request = review["request"]

def respond(**response):
    response.setdefault("uid", request["uid"])
    json.dump({{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}}, sys.stdout)

def patch(ops):
    import base64
    respond(allowed=True, patchType="JSONPatch", patch=base64.b64encode(json.dumps(ops).encode()).decode())
"""


@pytest.fixture
def make_hook(tmp_path):
    """make_hook(name, body, kind=..., **spec) writes an executable hook script and returns its object."""

    def make(name: str, body: str, *, kind: str = "ValidatingAdmissionHook", executable: bool = True,
             preamble: str = PREAMBLE, **spec) -> dict:
        script = tmp_path / f"{name}.py"
        script.write_text(preamble + textwrap.dedent(body))
        if executable:
            script.chmod(script.stat().st_mode | stat.S_IXUSR)
        spec = {"command": [str(script)], "rules": [ALL_RULE], **spec}
        return apply_defaults({"apiVersion": "kctl.io/v1alpha1", "kind": kind, "metadata": {"name": name},
                               "spec": spec}, REGISTRY.lookup(kind))

    return make


ALL_RULE = {"operations": ["*"], "apiGroups": ["*"], "resources": ["*"]}


def deployment(image: str = "nginx:1.27", labels: dict | None = None) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": labels or {"app": "web"}},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "app", "image": image}]}}}}


def request_for(obj: dict | None, operation: str = "CREATE", old: dict | None = None, **kw) -> AdmissionRequest:
    target = obj if obj is not None else old
    assert target is not None
    meta = target.get("metadata", {})
    return AdmissionRequest("uid-1", operation, REGISTRY.for_object(target), meta.get("namespace"),
                            meta.get("name", ""), obj, old, **kw)


# --------------------------------------------------------------------------- review


def test_review_is_an_admission_review_v1():
    """review() builds the AdmissionReview request Kubernetes sends a webhook."""
    obj = deployment()
    review = request_for(obj, dry_run=True, user="alice").review()
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    request = review["request"]
    assert request["uid"] == "uid-1"
    assert request["kind"] == request["requestKind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert request["resource"] == request["requestResource"] == {
        "group": "apps", "version": "v1", "resource": "deployments"}
    assert "subResource" not in request
    assert (request["name"], request["namespace"], request["operation"]) == ("web", "default", "CREATE")
    assert request["userInfo"] == {"username": "alice"}
    assert request["object"] == obj and request["oldObject"] is None
    assert request["dryRun"] is True
    assert request["options"]["kind"] == "CreateOptions"


def test_review_of_cluster_scoped_delete():
    """A DELETE of a cluster-scoped object has no namespace and no object, only oldObject."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    request = request_for(None, "DELETE", old=ns).review()["request"]
    assert "namespace" not in request
    assert request["object"] is None and request["oldObject"] == ns
    assert request["options"]["kind"] == "DeleteOptions"


def test_user_defaults_to_the_os_user():
    """Without a user, the request names the OS user running kctl."""
    assert request_for(deployment()).user


# --------------------------------------------------------------------------- matching


def hook_with(**spec) -> dict:
    return {"apiVersion": "kctl.io/v1alpha1", "kind": "ValidatingAdmissionHook", "metadata": {"name": "h"},
            "spec": {"command": ["/bin/true"], **spec}}


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team", "labels": {"tier": "web"}}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"env": "prod"}}}
HOOK_OBJ = hook_with(rules=[ALL_RULE])
TEAM = {"env": "prod", "kubernetes.io/metadata.name": "team"}

# (id, hook spec, request args (obj, operation, old), namespace labels, expected)
MATCHING = [
    ("all", {"rules": [ALL_RULE]}, (POD, "CREATE", None), TEAM, True),
    ("no-rules", {}, (POD, "CREATE", None), TEAM, False),
    ("empty-rules", {"rules": []}, (POD, "CREATE", None), TEAM, False),
    ("operation", {"rules": [{**ALL_RULE, "operations": ["CREATE"]}]}, (POD, "CREATE", None), TEAM, True),
    ("other-operation", {"rules": [{**ALL_RULE, "operations": ["UPDATE", "DELETE"]}]},
     (POD, "CREATE", None), TEAM, False),
    ("core-group", {"rules": [{**ALL_RULE, "apiGroups": [""]}]}, (POD, "CREATE", None), TEAM, True),
    ("other-group", {"rules": [{**ALL_RULE, "apiGroups": ["apps"]}]}, (POD, "CREATE", None), TEAM, False),
    ("apps-group", {"rules": [{**ALL_RULE, "apiGroups": ["apps"]}]}, (deployment(), "CREATE", None), TEAM, True),
    ("version", {"rules": [{**ALL_RULE, "apiVersions": ["v1"]}]}, (POD, "CREATE", None), TEAM, True),
    ("other-version", {"rules": [{**ALL_RULE, "apiVersions": ["v2"]}]}, (POD, "CREATE", None), TEAM, False),
    ("resource", {"rules": [{**ALL_RULE, "resources": ["pods"]}]}, (POD, "CREATE", None), TEAM, True),
    ("other-resource", {"rules": [{**ALL_RULE, "resources": ["deployments"]}]}, (POD, "CREATE", None), TEAM, False),
    ("subresource-only", {"rules": [{**ALL_RULE, "resources": ["pods/status"]}]}, (POD, "CREATE", None), TEAM, False),
    ("any-of-rules", {"rules": [{**ALL_RULE, "resources": ["deployments"]}, {**ALL_RULE, "resources": ["pods"]}]},
     (POD, "CREATE", None), TEAM, True),
    ("scope-namespaced", {"rules": [{**ALL_RULE, "scope": "Namespaced"}]}, (NODE, "CREATE", None), None, False),
    ("scope-cluster", {"rules": [{**ALL_RULE, "scope": "Cluster"}]}, (NODE, "CREATE", None), None, True),
    ("ns-selector", {"rules": [ALL_RULE], "namespaceSelector": {"matchLabels": {"env": "prod"}}},
     (POD, "CREATE", None), TEAM, True),
    ("ns-selector-miss", {"rules": [ALL_RULE], "namespaceSelector": {"matchLabels": {"env": "dev"}}},
     (POD, "CREATE", None), TEAM, False),
    ("ns-selector-no-labels", {"rules": [ALL_RULE], "namespaceSelector": {"matchLabels": {"env": "prod"}}},
     (POD, "CREATE", None), None, False),
    ("ns-selector-In", {"rules": [ALL_RULE], "namespaceSelector": {"matchExpressions": [
        {"key": "env", "operator": "In", "values": ["prod", "stage"]}]}}, (POD, "CREATE", None), TEAM, True),
    ("ns-selector-NotIn", {"rules": [ALL_RULE], "namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["team"]}]}},
     (POD, "CREATE", None), TEAM, False),
    ("ns-selector-cluster-scoped", {"rules": [ALL_RULE], "namespaceSelector": {"matchLabels": {"env": "x"}}},
     (NODE, "CREATE", None), None, True),
    ("ns-selector-namespace-itself", {"rules": [ALL_RULE], "namespaceSelector": {"matchLabels": {"env": "prod"}}},
     (NAMESPACE, "CREATE", None), None, True),
    ("obj-selector", {"rules": [ALL_RULE], "objectSelector": {"matchLabels": {"tier": "web"}}},
     (POD, "CREATE", None), TEAM, True),
    ("obj-selector-miss", {"rules": [ALL_RULE], "objectSelector": {"matchLabels": {"tier": "db"}}},
     (POD, "CREATE", None), TEAM, False),
    ("obj-selector-Exists", {"rules": [ALL_RULE], "objectSelector": {"matchExpressions": [
        {"key": "tier", "operator": "Exists"}]}}, (POD, "CREATE", None), TEAM, True),
    ("obj-selector-DoesNotExist", {"rules": [ALL_RULE], "objectSelector": {"matchExpressions": [
        {"key": "tier", "operator": "DoesNotExist"}]}}, (POD, "CREATE", None), TEAM, False),
    ("obj-selector-delete-uses-old", {"rules": [ALL_RULE], "objectSelector": {"matchLabels": {"tier": "web"}}},
     (None, "DELETE", POD), TEAM, True),
    ("hook-objects-never", {"rules": [ALL_RULE]}, (HOOK_OBJ, "CREATE", None), None, False),
]


@pytest.mark.parametrize("spec, args, ns_labels, expected", [c[1:] for c in MATCHING],
                         ids=[c[0] for c in MATCHING])
def test_matches(spec, args, ns_labels, expected):
    """Rules, namespaceSelector and objectSelector decide whether a hook is called."""
    obj, operation, old = args
    assert matches(hook_with(**spec), request_for(obj, operation, old), ns_labels) is expected


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_malformed_selector_follows_failure_policy(policy, caplog):
    """A selector with an unknown operator is a hook failure: Forbidden, or skipped with Ignore."""
    hook = hook_with(rules=[ALL_RULE], failurePolicy=policy,
                     objectSelector={"matchExpressions": [{"key": "a", "operator": "Near"}]})
    if policy == "Fail":
        with pytest.raises(Forbidden, match='admission hook "h" failed: invalid selector'):
            matches(hook, request_for(POD), TEAM)
    else:
        assert matches(hook, request_for(POD), TEAM) is False
        assert "invalid selector" in caplog.text


# --------------------------------------------------------------------------- running


def test_allow(make_hook):
    """An allowing validating hook returns quietly."""
    run_validating(make_hook("ok", "respond(allowed=True)\n"), request_for(deployment()))


@pytest.mark.parametrize("body, message", [
    ('respond(allowed=False, status={"code": 403, "message": "no thanks"})\n',
     'admission hook "nope" denied the request: no thanks'),
    ("respond(allowed=False)\n", 'admission hook "nope" denied the request without explanation'),
], ids=["with-message", "without-message"])
def test_deny(make_hook, body, message):
    """A denying hook raises Forbidden carrying its status.message."""
    for run, kind in ((run_validating, "ValidatingAdmissionHook"), (run_mutating, "MutatingAdmissionHook")):
        with pytest.raises(Forbidden) as e:
            run(make_hook("nope", body, kind=kind), request_for(deployment()))
        assert str(e.value) == message


def test_mutate_with_json_patch(make_hook):
    """A mutating hook's JSONPatch is applied; the input object is left alone."""
    hook = make_hook("label", """
        patch([{"op": "add", "path": "/metadata/labels/added", "value": request["userInfo"]["username"]}])
    """, kind="MutatingAdmissionHook")
    obj = deployment()
    out = run_mutating(hook, request_for(obj, user="bob"))
    assert out is not None and out["metadata"]["labels"] == {"app": "web", "added": "bob"}
    assert obj["metadata"]["labels"] == {"app": "web"}


@pytest.mark.parametrize("body", [
    "respond(allowed=True)\n",
    "patch([])\n",
    'patch([{"op": "replace", "path": "/metadata/name", "value": "web"}])\n',
], ids=["no-patch", "empty-patch", "no-op-patch"])
def test_mutate_unchanged_is_none(make_hook, body):
    """A mutating hook that changes nothing returns None."""
    assert run_mutating(make_hook("same", body, kind="MutatingAdmissionHook"), request_for(deployment())) is None


def test_mutating_on_delete_returns_none(make_hook):
    """On DELETE there is no object to patch: a patch is ignored."""
    hook = make_hook("del", 'patch([{"op": "add", "path": "/x", "value": 1}])\n', kind="MutatingAdmissionHook")
    assert run_mutating(hook, request_for(None, "DELETE", old=deployment())) is None


def test_warnings_are_returned(make_hook):
    """response.warnings reach the caller's list, one line each."""
    found: list[str] = []
    hook = make_hook("warn", 'respond(allowed=True, warnings=["image is old", "two\\nlines"])\n')
    run_validating(hook, request_for(deployment()), warnings=found)
    assert found == ["image is old", "two lines"]


def test_large_object_does_not_deadlock(make_hook):
    """An object bigger than a pipe buffer goes through stdin and back."""
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "default"},
           "data": {"blob": "x" * (4 * 1024 * 1024)}}
    hook = make_hook("echo",
                     'respond(allowed=False, status={"message": str(len(request["object"]["data"]["blob"]))})\n')
    with pytest.raises(Forbidden, match=str(4 * 1024 * 1024)):
        run_validating(hook, request_for(obj))


def test_hook_that_does_not_read_stdin(make_hook):
    """A hook may answer without reading its input."""
    preamble = f"#!{sys.executable}\nimport json, sys\n"
    body = """
        uid = "uid-1"
        json.dump({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "response": {"uid": uid, "allowed": False, "status": {"message": "unread"}}}, sys.stdout)
    """
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "default"},
           "data": {"blob": "x" * (1024 * 1024)}}
    with pytest.raises(Forbidden, match="unread"):
        run_validating(make_hook("lazy", body, preamble=preamble), request_for(obj))


def test_environment_is_minimal(make_hook, monkeypatch):
    """A hook sees PATH, LANG and its spec.env only, nothing of kctl's environment, and runs in /."""
    monkeypatch.setenv("KCTL_TEST_SECRET", "s3cret")
    hook = make_hook("env", 'respond(allowed=False, status={"message": json.dumps([dict(os.environ), os.getcwd()])})\n',
                     env=[{"name": "HOOK_MODE", "value": "strict"}])
    with pytest.raises(Forbidden) as e:
        run_validating(hook, request_for(deployment()))
    env, cwd = json.loads(str(e.value).split("denied the request: ", 1)[1])
    assert "KCTL_TEST_SECRET" not in env
    env.pop("LC_CTYPE", None)  # the interpreter may add it itself
    assert env == {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOOK_MODE": "strict"}
    assert cwd == "/"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


HANG = """
    import subprocess
    child = subprocess.Popen(["sleep", "60"])
    open(os.environ["PID_FILE"], "w").write(str(child.pid))
    time.sleep(60)
"""


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_hang_times_out_and_the_process_group_is_killed(make_hook, tmp_path, policy, caplog):
    """A hook past timeoutSeconds is killed with its children; Fail refuses, Ignore logs and allows."""
    pid_file = tmp_path / "child.pid"
    hook = make_hook("slow", HANG, kind="MutatingAdmissionHook", timeoutSeconds=1, failurePolicy=policy,
                     env=[{"name": "PID_FILE", "value": str(pid_file)}])
    started = time.monotonic()
    if policy == "Fail":
        with pytest.raises(Forbidden) as e:
            run_mutating(hook, request_for(deployment()))
        assert str(e.value) == 'admission hook "slow" failed: timed out after 1s'
    else:
        with caplog.at_level(logging.WARNING, logger="kctl.admission"):
            assert run_mutating(hook, request_for(deployment())) is None
        assert 'admission hook "slow" failed: timed out after 1s' in caplog.text
        assert all(r.name == "kctl.admission" for r in caplog.records)
    assert time.monotonic() - started < 5
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 2
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


# (id, body or None for a special command, expected message after 'admission hook "bad" failed: ')
FAILURES = [
    ("crash", 'sys.stderr.write("boom: the config is missing\\nsecond line\\n"); sys.exit(3)\n',
     "exited with status 3: boom: the config is missing"),
    ("crash-silent", "sys.exit(1)\n", "exited with status 1"),
    ("killed", "os.kill(os.getpid(), 9)\n", "was killed by signal SIGKILL"),
    ("garbage", 'print("hello there")\n', "wrote invalid output: not JSON (Expecting value at line 1 column 1)"),
    ("empty", "pass\n", "wrote invalid output: nothing on stdout"),
    ("not-a-review", 'print(json.dumps({"allowed": True}))\n',
     "wrote invalid output: not an admission.k8s.io/v1 AdmissionReview"),
    ("no-response", 'print(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}))\n',
     "wrote invalid output: the AdmissionReview has no response"),
    ("wrong-uid", 'respond(uid="other", allowed=True)\n',
     "wrote invalid output: response.uid 'other' does not match the request's 'uid-1'"),
    ("allowed-not-bool", 'respond(allowed="yes")\n', "wrote invalid output: response.allowed must be true or false"),
    ("bad-patch-type", 'respond(allowed=True, patch="W10=", patchType="Merge")\n',
     'wrote invalid output: response.patchType must be "JSONPatch" with a patch'),
    ("bad-patch-base64", 'respond(allowed=True, patch="%%%", patchType="JSONPatch")\n',
     "wrote invalid output: response.patch is not base64 of a JSON Patch array"),
    ("patch-does-not-apply", 'patch([{"op": "remove", "path": "/spec/nothing"}])\n',
     "wrote a patch that cannot be applied: operation 0 (remove /spec/nothing): conflicts with the object"),
    ("patch-test-fails", 'patch([{"op": "test", "path": "/metadata/name", "value": "zzz"}])\n',
     "wrote a patch that cannot be applied: operation 0 (test /metadata/name): a test operation failed"),
    ("patch-renames", 'patch([{"op": "replace", "path": "/metadata/name", "value": "other"}])\n',
     "wrote a patch that changes metadata.name"),
    ("patch-changes-kind", 'patch([{"op": "replace", "path": "/kind", "value": "Pod"}])\n',
     "wrote a patch that changes kind"),
]


@pytest.mark.parametrize("body, expected", [c[1:] for c in FAILURES], ids=[c[0] for c in FAILURES])
def test_failure_with_policy_fail(make_hook, body, expected):
    """Each way a hook can fail refuses the write with one line naming the hook and the problem."""
    hook = make_hook("bad", body, kind="MutatingAdmissionHook")
    with pytest.raises(Forbidden) as e:
        run_mutating(hook, request_for(deployment()))
    assert str(e.value) == f'admission hook "bad" failed: {expected}'


@pytest.mark.parametrize("body, expected", [c[1:] for c in FAILURES], ids=[c[0] for c in FAILURES])
def test_failure_with_policy_ignore(make_hook, body, expected, caplog):
    """With failurePolicy Ignore a failing hook is logged (never the object) and the write goes on."""
    obj = deployment()
    obj["metadata"]["annotations"] = {"token": SECRET_VALUE}
    hook = make_hook("bad", body, kind="MutatingAdmissionHook", failurePolicy="Ignore")
    with caplog.at_level(logging.DEBUG, logger="kctl.admission"):
        assert run_mutating(hook, request_for(obj)) is None
        run_validating({**hook, "kind": "ValidatingAdmissionHook"}, request_for(obj))
    assert f'admission hook "bad" failed: {expected}' in caplog.text
    assert SECRET_VALUE not in caplog.text


@pytest.mark.parametrize("command, expected", [
    (["/nonexistent/kctl-hook"], "cannot run /nonexistent/kctl-hook: no such file (or its #! interpreter is missing)"),
    (["relative/hook"], "spec.command[0] must be an absolute path, not 'relative/hook'"),
    ([], "spec.command must be a non-empty list of strings"),
], ids=["not-found", "relative", "empty"])
def test_bad_command(command, expected):
    """A command that cannot be run is a hook failure."""
    hook = hook_with(rules=[ALL_RULE], command=command)
    with pytest.raises(Forbidden) as e:
        run_validating(hook, request_for(deployment()))
    assert str(e.value) == f'admission hook "h" failed: {expected}'


def test_not_executable(make_hook):
    """A hook file without the executable bit is a clear failure."""
    hook = make_hook("noexec", "respond(allowed=True)\n", executable=False)
    with pytest.raises(Forbidden, match=r"failed: cannot run .*noexec.py: permission denied \(is it executable\?\)"):
        run_validating(hook, request_for(deployment()))


def test_output_is_capped(make_hook, monkeypatch):
    """A hook writing more than the cap is killed and fails."""
    monkeypatch.setattr(hooks, "MAX_OUTPUT_BYTES", 1024 * 1024)
    hook = make_hook("chatty", 'sys.stdout.write("x" * (3 * 1024 * 1024))\n')
    with pytest.raises(Forbidden, match='admission hook "chatty" failed: wrote more than 1 MiB on stdout'):
        run_validating(hook, request_for(deployment()))


# --------------------------------------------------------------------------- several hooks


def test_mutating_hooks_chain_in_name_order(make_hook):
    """Mutating hooks run in name order, each seeing the previous one's output."""
    first = make_hook("a-first", 'patch([{"op": "add", "path": "/metadata/labels/step", "value": "1"}])\n',
                      kind="MutatingAdmissionHook")
    second = make_hook("b-second", """
        step = request["object"]["metadata"]["labels"]["step"]
        patch([{"op": "replace", "path": "/metadata/labels/step", "value": step + "2"}])
    """, kind="MutatingAdmissionHook")
    skipped = make_hook("c-other", 'patch([{"op": "add", "path": "/metadata/labels/x", "value": "x"}])\n',
                        kind="MutatingAdmissionHook", rules=[{**ALL_RULE, "resources": ["pods"]}])
    out = run_mutating_hooks([second, skipped, first], request_for(deployment()), namespace_labels={})
    assert out is not None and out["metadata"]["labels"] == {"app": "web", "step": "12"}


def test_validating_hooks_first_refusal_in_name_order(make_hook):
    """All matching validating hooks run; the first refusal by name is raised, warnings are kept."""
    found: list[str] = []
    ok = make_hook("a-ok", 'respond(allowed=True, warnings=["from a"])\n')
    no_b = make_hook("b-no", 'respond(allowed=False, status={"message": "b says no"})\n')
    no_c = make_hook("c-no", 'respond(allowed=False, status={"message": "c says no"})\n')
    with pytest.raises(Forbidden, match="b says no"):
        run_validating_hooks([no_c, no_b, ok], request_for(deployment()), namespace_labels={}, warnings=found)
    assert found == ["from a"]


# --------------------------------------------------------------------------- the examples


def example(name: str, kind: str) -> dict:
    """An example hook, run through this interpreter (its shebang needs python3 on the hook PATH)."""
    return apply_defaults({"apiVersion": "kctl.io/v1alpha1", "kind": kind, "metadata": {"name": name},
                           "spec": {"command": [sys.executable, str(EXAMPLES / f"{name}.py")],
                                    "rules": [ALL_RULE]}}, REGISTRY.lookup(kind))


@pytest.mark.parametrize("name", ["add-labels", "deny-latest"])
def test_examples_are_executable(name):
    """The example hooks carry the executable bit and a python3 shebang."""
    path = EXAMPLES / f"{name}.py"
    assert os.access(path, os.X_OK)
    assert path.read_text().startswith("#!/usr/bin/env python3\n")


@pytest.mark.skipif(not any(os.access(f"{d}/python3", os.X_OK) for d in hooks.HOOK_PATH.split(":")),
                    reason="no python3 on the hook PATH")
def test_examples_run_through_their_shebang():
    """Installed as hooks.yaml says (command = the script), the examples find python3 on the hook PATH."""
    hook = example("deny-latest", "ValidatingAdmissionHook")
    hook["spec"]["command"] = [str(EXAMPLES / "deny-latest.py")]
    with pytest.raises(Forbidden, match='container "app" image "nginx:latest"'):
        run_validating(hook, request_for(deployment("nginx:latest")))


def test_example_add_labels_on_deployment():
    """add-labels marks the object managed and gives template containers default requests."""
    obj = deployment()
    obj["spec"]["template"]["spec"]["containers"].append(
        {"name": "side", "image": "busybox:1.36", "resources": {"requests": {"cpu": "1"}}})
    out = run_mutating(example("add-labels", "MutatingAdmissionHook"), request_for(obj))
    assert out is not None
    assert out["metadata"]["labels"] == {"app": "web", "kctl.io/managed": "true"}
    containers = out["spec"]["template"]["spec"]["containers"]
    assert containers[0]["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"}}
    assert containers[1]["resources"] == {"requests": {"cpu": "1", "memory": "64Mi"}}


@pytest.mark.parametrize("obj, labels", [
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}},
     {"kctl.io/managed": "true"}),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "labels": {"a/b": "c"}},
      "spec": {"containers": [{"name": "x", "image": "i:1"}]}},
     {"a/b": "c", "kctl.io/managed": "true"}),
    ({"apiVersion": "v1", "kind": "ConfigMap"}, {"kctl.io/managed": "true"}),
], ids=["configmap-without-labels", "pod-with-slash-label", "without-metadata"])
def test_example_add_labels_on_other_kinds(obj, labels):
    """add-labels works on objects without labels and on Pods."""
    out = run_mutating(example("add-labels", "MutatingAdmissionHook"), request_for(obj))
    assert out is not None and out["metadata"]["labels"] == labels


def test_example_add_labels_is_idempotent():
    """Running add-labels on its own output changes nothing."""
    hook = example("add-labels", "MutatingAdmissionHook")
    once = run_mutating(hook, request_for(deployment()))
    assert once is not None and run_mutating(hook, request_for(once)) is None


@pytest.mark.parametrize("image, refused", [
    ("nginx:1.27", None),
    ("nginx@sha256:" + "a" * 64, None),
    ("localhost:5000/app:v1", None),
    ("nginx:latest", 'container "app" image "nginx:latest" uses the :latest tag'),
    ("nginx", 'container "app" image "nginx" has no tag'),
    ("localhost:5000/app", 'container "app" image "localhost:5000/app" has no tag'),
], ids=["tagged", "digest", "registry-port-tagged", "latest", "untagged", "registry-port-untagged"])
def test_example_deny_latest(image, refused):
    """deny-latest refuses :latest and untagged images, naming the container."""
    hook = example("deny-latest", "ValidatingAdmissionHook")
    if refused is None:
        run_validating(hook, request_for(deployment(image)))
    else:
        with pytest.raises(Forbidden, match=f'admission hook "deny-latest" denied the request: {refused}'):
            run_validating(hook, request_for(deployment(image)))


def test_example_manifest_installs_after_substitution():
    """hooks.yaml, with @HOOKS_DIR@ replaced as the README says, names the executable example scripts."""
    text = (EXAMPLES / "hooks.yaml").read_text().replace("@HOOKS_DIR@", str(EXAMPLES))
    docs = [d for d in YAML(typ="safe").load_all(text) if d]
    assert {(d["kind"], d["metadata"]["name"]) for d in docs} == {
        ("MutatingAdmissionHook", "add-labels"), ("ValidatingAdmissionHook", "deny-latest")}
    for doc in docs:
        command = doc["spec"]["command"]
        assert os.path.isabs(command[0]) and os.access(command[0], os.X_OK)
        assert REGISTRY.for_object(doc).plural in ("mutatingadmissionhooks", "validatingadmissionhooks")
