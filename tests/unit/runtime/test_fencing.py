"""The fence's commands (kctl.runtime.fencing): built only from integers and a checked socket path, run here with
sh (as a host would run them) for their order and refusals, and what fence_host makes of a host's answers."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from kctl.runtime import fencing
from kctl.runtime.fencing import (EXIT_FENCED, FencedError, check_socket_path, fence_host, fence_key,
                                  fence_script, guarded_argv, probe_script,
                                  remove_local_fence)
from kctl.runtime.interface import ExecResult, RuntimeError_


@pytest.mark.parametrize("path, ok", [
    ("/run/podman/podman.sock", True),
    ("/run/user/1000/podman/podman.sock", True),
    ("/tmp/kctl-it-x_1/a+b@c%d=e,f:g.sock", True),
    ("run/podman.sock", False),
    ("/run/pod man.sock", False),
    ("/run/$(reboot).sock", False),
    ("/run/`id`.sock", False),
    ("/run/a;rm -rf x", False),
    ("/run/'quoted'.sock", False),
    ("/run/../etc/passwd", False),
    ("/run/a\n.sock", False),
    ("", False),
], ids=["system", "rootless", "plain-punctuation", "relative", "space", "dollar", "backtick", "semicolon",
        "quote", "dotdot", "newline", "empty"])
def test_only_plain_absolute_socket_paths_reach_a_shell(path, ok):
    """A socket path with shell or path tricks is refused with one line before any command is built."""
    if ok:
        assert check_socket_path(path) == path and path in fence_script(1, path)
    else:
        with pytest.raises(ValueError, match="not a plain absolute path"):
            fence_script(1, path)


@pytest.mark.parametrize("term", [-1, True, "2", 1.5, None], ids=["negative", "bool", "text", "float", "none"])
def test_a_term_is_a_non_negative_integer(term):
    """Only a non-negative int becomes a term in a command."""
    with pytest.raises(ValueError, match="non-negative integer"):
        fence_script(term, "/run/podman/podman.sock")  # type: ignore[arg-type]


def test_the_script_links_the_new_term_before_it_removes_lower_ones():
    """The new term's link is renamed in place before any lower link goes (calls never find no link at all)."""
    script = fence_script(7, "/run/podman/podman.sock")
    assert script.index("flock -x") < script.index('-gt 7') < script.index('term-7.sock"') < script.index("-lt 7")
    assert fence_key("/run/podman/podman.sock") in script


@pytest.fixture
def fence_dir():
    """A socket path of its own (so its fence folder is too), and that folder removed after."""
    socket_path = f"/tmp/kctl-fence-test-{uuid.uuid4().hex}/podman.sock"
    yield socket_path
    remove_local_fence(socket_path)


def sh(script: str) -> tuple[int, str]:
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout.strip()


def test_fencing_in_order_keeps_only_the_newest_and_refuses_older_terms(fence_dir):
    """Fences 1, 2, 5 leave only term-5's link; fencing 3 (older) is refused; 5 again is fine; the probe says 5."""
    for term in (1, 2, 5):
        code, out = sh(fence_script(term, fence_dir))
        assert code == 0 and out.startswith("fenced /")
    folder = Path(out.split()[1])
    assert sorted(p.name for p in folder.iterdir()) == ["term-5.sock"]
    assert os.readlink(folder / "term-5.sock") == fence_dir
    assert sh(fence_script(3, fence_dir)) == (fencing.EXIT_NEWER_TERM, f"newer 5 {folder}")
    assert sh(fence_script(5, fence_dir))[0] == 0
    assert sh(probe_script(fence_dir)) == (0, f"high 5 {folder}")
    assert oct(folder.stat().st_mode & 0o777) == "0o700"


def test_a_guarded_host_command_runs_only_while_its_terms_link_is_there(fence_dir):
    """guarded_argv runs the command with its words intact under term 2's link, and refuses it for term 1."""
    out = sh(fence_script(2, fence_dir))[1]
    folder = out.split()[1]
    ran = subprocess.run(guarded_argv(["printf", "%s|", "two words", "$(id)"], 2, folder), capture_output=True,
                         text=True, timeout=30)
    assert ran.returncode == 0 and ran.stdout == "two words|$(id)|"
    assert subprocess.run(guarded_argv(["true"], 1, folder), timeout=30).returncode == EXIT_FENCED


@pytest.mark.parametrize("code, stdout, raises, message", [
    (0, b"fenced /run/kctl/fence/abc\n", None, ""),
    (3, b"newer 9 /run/kctl/fence/abc\n", FencedError, r"10\.0\.0\.9:22: fenced by a newer leader \(term 9\)"),
    (127, b"", RuntimeError_, r"flock\(1\)"),
    (0, b"fenced /run/x;reboot\n", RuntimeError_, "fence folder"),
    (4, b"unusable /tmp/kctl-0/fence/abc\n", RuntimeError_, r"failed \(exit 4: unusable"),
], ids=["fenced", "newer-term", "no-flock", "odd-folder", "folder-not-owned"])
def test_fence_host_reads_the_hosts_answer(monkeypatch, code, stdout, raises, message):
    """fence_host returns the term's link, or one line: FencedError for a newer term, RuntimeError_ otherwise."""
    calls = []

    def run_on_host(base_url, argv, **kwargs):
        calls.append(argv)
        return ExecResult(exit_code=code, stdout=stdout, stderr=b"")

    monkeypatch.setattr("kctl.runtime.hostexec.run_on_host", run_on_host)
    url = "ssh://root@10.0.0.9:22/run/podman/podman.sock"
    if raises is None:
        assert fence_host(url, 4) == "/run/kctl/fence/abc/term-4.sock"
    else:
        with pytest.raises(raises, match=message) as caught:
            fence_host(url, 4)
        assert getattr(caught.value, "newer", None) == (9 if raises is FencedError else None)  # the host's term
    assert calls[0][:2] == ["sh", "-c"] and len(calls[0]) == 3


def test_a_connection_without_keep_alive_asks_for_close_and_a_revoked_one_stays_shut(tmp_path):
    """keep_alive=False clients send Connection: close; revoke() fails every call, and resume() does not undo it."""
    from kctl.runtime.podman.connection import ServiceConnection

    connection = ServiceConnection(f"unix://{tmp_path}/podman.sock", identity=None, known_hosts=None, timeout=5,
                                   keep_alive=False)
    assert connection.client().api.headers["Connection"] == "close"
    kept = ServiceConnection(f"unix://{tmp_path}/podman.sock", identity=None, known_hosts=None, timeout=5)
    assert kept.client().api.headers.get("Connection") != "close"
    connection.revoke("fenced by a newer leader (term 3)", error=FencedError)
    connection.resume()
    for _ in range(2):
        with pytest.raises(FencedError, match=r"term 3"):
            connection.client()
    connection.close()
    kept.close()


def test_a_revoked_fenced_runtime_refuses_every_call_without_touching_the_host(monkeypatch):
    """After revoke(), Podman calls, host commands and pings fail at once with FencedError (no ssh is started)."""
    from kctl.runtime.fencing import FencedPodmanRuntime

    def no_ssh(*args, **kwargs):
        raise AssertionError("a revoked runtime started ssh")

    monkeypatch.setattr("subprocess.Popen", no_ssh)
    monkeypatch.setattr("subprocess.run", no_ssh)
    runtime = FencedPodmanRuntime("ssh://root@10.0.0.9:22/run/podman/podman.sock", term=3)
    assert runtime.base_url.endswith("/run/podman/podman.sock")  # the heartbeat still probes the real socket
    runtime.revoke("this daemon no longer leads (its term 3 ended)")
    for call in (runtime.ping, lambda: runtime.list_pods({}), lambda: runtime.run_on_host(["true"]),
                 lambda: runtime.remove_pod("x")):
        with pytest.raises(FencedError, match="no longer leads"):
            call()
    runtime.close()


def test_the_first_call_fences_a_failed_fence_is_retried_later_and_a_newer_term_revokes(monkeypatch):
    """A runtime is made without the host; its first call fences; a failed fence is repeated without ssh for
    CHECK_INTERVAL, then tried again; a newer term on the host revokes the runtime for good."""
    from kctl.runtime.fencing import FencedPodmanRuntime

    now = [1000.0]
    answers = [RuntimeError_("fencing 10.0.0.9:22 for term 3 failed (exit 255: cannot reach)"),
               FencedError("10.0.0.9:22: fenced by a newer leader (term 4); this daemon's term 3 may no longer "
                           "drive it")]
    calls = []

    def fake_fence(base_url, term, **kwargs):
        calls.append(term)
        raise answers.pop(0)

    monkeypatch.setattr(fencing, "fence_host", fake_fence)
    monkeypatch.setattr(fencing.time, "monotonic", lambda: now[0])
    runtime = FencedPodmanRuntime("ssh://root@10.0.0.9:22/run/podman/podman.sock", term=3)
    assert calls == []  # made without touching the host
    for _ in range(2):
        with pytest.raises(RuntimeError_, match="cannot reach"):
            runtime.list_pods({})
    assert calls == [3]  # the second failure repeated the first, no ssh
    now[0] += fencing.CHECK_INTERVAL + 1
    for _ in range(2):
        with pytest.raises(FencedError, match=r"fenced by a newer leader \(term 4\)"):
            runtime.list_pods({})
    assert calls == [3, 3]  # revoked: no further fence
    runtime.close()


@pytest.mark.parametrize("answer, told", [
    (FencedError("10.0.0.9:22: fenced by a newer leader (term 7); this daemon's term 3 may no longer drive it",
                 newer=7), [7]),
    (FencedError("10.0.0.9:22: this daemon's term 3 is no longer fenced in"), []),
    (RuntimeError_("fencing 10.0.0.9:22 for term 3 failed (exit 255: cannot reach)"), []),
], ids=["refused-by-a-higher-term", "fenced-without-the-hosts-term", "fence-failed"])
def test_a_refused_fence_tells_on_refused_the_hosts_term_once(monkeypatch, answer, told):
    """The host's term of a refused fence goes to the runtime's on_refused, once (the runtime is revoked after);
    other failures tell nothing."""
    from kctl.runtime.fencing import FencedPodmanRuntime

    def fake_fence(base_url, term, **kwargs):
        raise answer

    monkeypatch.setattr(fencing, "fence_host", fake_fence)
    heard: list[int] = []
    runtime = FencedPodmanRuntime("ssh://root@10.0.0.9:22/run/podman/podman.sock", term=3)
    runtime.on_refused = heard.append
    for _ in range(2):
        with pytest.raises(type(answer)):
            runtime.fence()
    assert heard == told and runtime.link == ""
    runtime.close()
