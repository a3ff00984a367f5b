"""A slow admission hook on a conflict-retry path never blocks another process's write.

Real processes: `kctl apply` (process 1) updates a Deployment through a validating hook
that sleeps HOOK_SECONDS; while the hook runs, this test changes the Deployment's status
(no hook on that path), so process 1's commit meets a Conflict and prepares again, the
hook running a second time. During that second run a `kctl apply` of a ConfigMap in a
third process must finish at once: no write lock is held while a hook runs.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time

from kctl.apiserver.server import APIServer
from kctl.store.sqlite import Store

HOOK_SECONDS = 3.0
#: what the unrelated write may take: typically ~0.1 s; generous for a loaded 2-core machine,
#: and still well under HOOK_SECONDS (a writer blocked by the hook takes at least the hook's rest)
WRITER_BOUND = 1.5
DEADLINE = 60.0

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: slow, labels: {round: "%s"}}
spec:
  replicas: 1
  selector: {matchLabels: {app: slow}}
  template:
    metadata: {labels: {app: slow}}
    spec: {containers: [{name: c, image: "busybox:1"}]}
"""

#: process 3: imports first, then waits for "go" on stdin, then times one `kctl apply`
WRITER = """\
import sys, time
from kctl.cli.main import main, _register
# imports out of the timing:
import kctl.apiserver.server, kctl.store.sqlite, kctl.cli.apply, kctl.manifests.sources  # noqa: F401
_register()
print("ready", flush=True)
sys.stdin.readline()
started = time.monotonic()
try:
    main(["apply", "-f", sys.argv[1]])
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(f"elapsed {time.monotonic() - started:.3f} code {code}", flush=True)
"""


def _wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_writer_is_not_blocked_by_a_hook_on_the_retry_path(tmp_path):
    """While the slow hook runs again after a Conflict, another process's apply takes < 1 s."""
    db = tmp_path / "kctl.db"
    calls = tmp_path / "hook-calls"
    hook = tmp_path / "slow-hook.py"
    hook.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys, time
        review = json.load(sys.stdin)
        with open({str(calls)!r}, "a") as f:
            f.write("start\\n")
        time.sleep({HOOK_SECONDS})
        with open({str(calls)!r}, "a") as f:
            f.write("end\\n")
        json.dump({{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "response": {{"uid": review["request"]["uid"], "allowed": True}}}}, sys.stdout)
        """))
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    api = APIServer(Store(db), user="test")
    kctl = [sys.executable, "-m", "kctl", "--store", str(db)]
    env = {**os.environ, "KCTL_STORE": str(db)}
    (tmp_path / "d1.yaml").write_text(DEPLOYMENT % "1")
    (tmp_path / "d2.yaml").write_text(DEPLOYMENT % "2")
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {a: b}\n")
    subprocess.run([*kctl, "apply", "-f", str(tmp_path / "d1.yaml")], env=env, check=True, capture_output=True)
    api.create({"apiVersion": "kctl.io/v1alpha1", "kind": "ValidatingAdmissionHook", "metadata": {"name": "slow"},
                "spec": {"command": [str(hook)], "timeoutSeconds": 30, "failurePolicy": "Fail", "rules": [
                    {"operations": ["UPDATE"], "apiGroups": ["apps"], "resources": ["deployments"]}]}})

    def started() -> int:
        return calls.read_text().count("start") if calls.exists() else 0

    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "cm.yaml")], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    slow = subprocess.Popen([*kctl, "apply", "-f", str(tmp_path / "d2.yaml")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready"
        _wait_for(lambda: started() >= 1, "the hook's first run")
        live = api.get(api.resource("deployments"), "slow")
        live["status"] = {"observedGeneration": 1, "replicas": 0}
        api.update_status(live)  # no hook on this path: process 1's commit will conflict
        _wait_for(lambda: started() >= 2, "the hook's second run (after the Conflict)")
        writer.stdin.write("go\n")
        writer.stdin.flush()
        line = writer.stdout.readline().split()
        while line and line[0] != "elapsed":  # apply's own output comes first
            line = writer.stdout.readline().split()
        still_running = calls.read_text().count("end") < 2
        out, err = slow.communicate(timeout=DEADLINE)
        assert slow.returncode == 0, err
        assert "deployment.apps/slow configured" in out
        assert line[:1] == ["elapsed"] and line[3] == "0", (line, writer.stderr.read())
        elapsed = float(line[1])
        print(f"unrelated apply while the hook ran: {elapsed:.3f} s")
        assert still_running, "the other apply finished only after the slow hook"
        assert elapsed < WRITER_BOUND, f"an unrelated apply took {elapsed:.2f} s while a hook ran"
        assert api.store.get("ConfigMap", "default", "other") is not None
        assert api.get(api.resource("deployments"), "slow")["metadata"]["labels"] == {"round": "2"}
    finally:
        for proc in (writer, slow):
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        api.store.close()


def test_patch_retry_runs_its_hook_outside_the_write_lock(tmp_path):
    """kctl patch's retry after a Conflict: a write from another connection meanwhile takes < 1 s."""
    import threading

    calls = tmp_path / "hook-calls"
    hook = tmp_path / "slow-hook.py"
    hook.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys, time
        review = json.load(sys.stdin)
        with open({str(calls)!r}, "a") as f:
            f.write("start\\n")
        time.sleep({HOOK_SECONDS})
        json.dump({{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "response": {{"uid": review["request"]["uid"], "allowed": True}}}}, sys.stdout)
        """))
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    api = APIServer(Store(tmp_path / "kctl.db"), user="test")
    other = APIServer(Store(tmp_path / "kctl.db"), user="other")
    deployments = api.resource("deployments")
    api.write_all([("apply", _yaml(DEPLOYMENT % "1"))])
    api.create({"apiVersion": "kctl.io/v1alpha1", "kind": "ValidatingAdmissionHook", "metadata": {"name": "slow"},
                "spec": {"command": [str(hook)], "timeoutSeconds": 30, "rules": [
                    {"operations": ["UPDATE"], "apiGroups": ["apps"], "resources": ["deployments"]}]}})
    errors: list[BaseException] = []

    def patch() -> None:
        try:
            api.patch(deployments, "slow", {"metadata": {"labels": {"round": "2"}}}, patch_type="merge")
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    patcher = threading.Thread(target=patch)
    patcher.start()
    try:
        _wait_for(lambda: calls.exists() and calls.read_text().count("start") >= 1, "the hook's first run")
        live = other.get(deployments, "slow")
        live["status"] = {"observedGeneration": 1, "replicas": 0}
        other.update_status(live)
        _wait_for(lambda: calls.read_text().count("start") >= 2, "the hook's second run")
        started = time.monotonic()
        other.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}})
        elapsed = time.monotonic() - started
    finally:
        patcher.join(DEADLINE)
    assert not errors, errors
    print(f"create while the patch's hook ran: {elapsed:.3f} s")
    assert elapsed < WRITER_BOUND, f"a create took {elapsed:.2f} s while the patch's hook ran"
    assert api.get(deployments, "slow")["metadata"]["labels"] == {"round": "2"}
    api.store.close()
    other.store.close()


def _yaml(text: str) -> dict:
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(text)
