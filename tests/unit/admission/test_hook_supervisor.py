"""No process of an admission hook outlives it (kctl.admission.hook_supervisor via hooks._execute).

Multi-process: each hook forks a grandchild that calls setsid() (and, for the daemon cases,
forks again and closes its standard streams), records its pid in a file and sleeps. After the
hook times out, or exits normally, that pid must be gone within a generous deadline.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from pathlib import Path

import pytest

from kctl.admission import hook_supervisor
from kctl.admission.defaults import apply_defaults
from kctl.admission.hooks import AdmissionRequest, run_validating
from kctl.machinery.errors import Forbidden
from kctl.machinery.resources import builtin_registry

REGISTRY = builtin_registry()
GONE_DEADLINE_SECONDS = 10.0

HOOK = f"""\
#!{sys.executable}
import json, os, sys, time
review = json.load(sys.stdin)
PID_FILE, MODE = os.environ["PID_FILE"], os.environ["MODE"]

def escape(double_fork, close_streams):
    child = os.fork()
    if child == 0:
        os.setsid()  # a new session: out of the hook's process group, as a daemon does
        if double_fork and os.fork() != 0:
            os._exit(0)
        if close_streams:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
        with open(PID_FILE + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(PID_FILE + ".tmp", PID_FILE)
        time.sleep(300)
        os._exit(0)
    if double_fork:
        os.waitpid(child, 0)
    while not os.path.exists(PID_FILE):
        time.sleep(0.01)

escape(double_fork=MODE != "keep-stdout", close_streams=MODE != "keep-stdout")
if MODE == "hang":
    time.sleep(300)
json.dump({{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "response": {{"uid": review["request"]["uid"], "allowed": True}}}}, sys.stdout)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def escaping_hook(tmp_path):
    """escaping_hook(mode, timeout) -> (hook object, pid file); kills any survivor afterwards."""
    pid_files: list[Path] = []

    def make(mode: str, timeout: int) -> tuple[dict, Path]:
        script = tmp_path / f"hook-{mode}.py"
        script.write_text(HOOK)
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        pid_file = tmp_path / f"{mode}.pid"
        pid_files.append(pid_file)
        spec = {"command": [str(script)], "timeoutSeconds": timeout, "failurePolicy": "Fail",
                "rules": [{"operations": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "env": [{"name": "PID_FILE", "value": str(pid_file)}, {"name": "MODE", "value": mode}]}
        hook = apply_defaults({"apiVersion": "kctl.io/v1alpha1", "kind": "ValidatingAdmissionHook",
                               "metadata": {"name": mode}, "spec": spec},
                              REGISTRY.lookup("ValidatingAdmissionHook"))
        return hook, pid_file

    yield make
    for pid_file in pid_files:  # a failed test must not leave its sleeper behind
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            continue
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _request() -> AdmissionRequest:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    return AdmissionRequest("uid-1", "CREATE", REGISTRY.for_object(obj), "default", "c", obj, None)


def test_setsid_grandchild_is_killed_when_the_hook_times_out(escaping_hook):
    """A hook past its timeout is refused, and its setsid() daemon grandchild is killed too."""
    hook, pid_file = escaping_hook("hang", 2)
    with pytest.raises(Forbidden, match="timed out after 2s"):
        run_validating(hook, _request())
    pid = int(pid_file.read_text())
    assert _gone_within(pid, GONE_DEADLINE_SECONDS), f"pid {pid} survived the hook's timeout"


@pytest.mark.parametrize("mode", ["daemon", "keep-stdout"])
def test_grandchild_is_killed_when_the_hook_exits(escaping_hook, mode):
    """A hook that answers and exits leaves no process behind, even one holding its stdout."""
    hook, pid_file = escaping_hook(mode, 20)
    started = time.monotonic()
    run_validating(hook, _request())  # allowed: no exception
    assert time.monotonic() - started < 15, "the run waited for the leftover process (timeout)"
    pid = int(pid_file.read_text())
    assert _gone_within(pid, GONE_DEADLINE_SECONDS), f"pid {pid} survived its hook"


def test_descendants_finds_the_whole_tree_from_proc():
    """descendants() lists children and grandchildren of a pid, found through /proc."""
    import subprocess

    shell = subprocess.Popen(["/bin/sh", "-c", "sleep 300 & sleep 300 & wait"])
    try:
        deadline = time.monotonic() + GONE_DEADLINE_SECONDS
        found: list[int] = []
        while len(found) < 2 and time.monotonic() < deadline:
            found = hook_supervisor.descendants(shell.pid)
            time.sleep(0.02)
        assert len(found) == 2 and shell.pid not in found
        assert all(json.loads(Path(f"/proc/{pid}/stat").read_text().split()[3]) == shell.pid
                   for pid in found)
    finally:
        for pid in hook_supervisor.descendants(shell.pid):
            os.kill(pid, signal.SIGKILL)
        shell.kill()
        shell.wait()


def test_supervisor_reports_a_missing_command(tmp_path):
    """A command that cannot be started is reported by errno on the status pipe, nothing run."""
    import errno
    import subprocess

    read, write = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", hook_supervisor.__file__, str(write),
                                 str(os.getpid()), "--", str(tmp_path / "missing")],
                                pass_fds=(write,), stdin=subprocess.DEVNULL)
        os.close(write)
        write = -1
        assert proc.wait(GONE_DEADLINE_SECONDS * 3) == 0
        assert os.read(read, 100).decode().strip() == f"spawn-error {errno.ENOENT}"
    finally:
        os.close(read)
        if write != -1:
            os.close(write)
