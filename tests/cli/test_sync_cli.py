"""`kctl sync`, `kctl sync status|delete`, `kctl diff --source`, `kctl get gitsources` against real git repositories.

The `kctl` fixture runs the real command in-process on a fresh store; one test runs it as
a subprocess to check the exit status and the one-line error a user sees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kctl.cli.sync import source_name
from kctl.testing.gitrepo import GitRepo, configmap


@pytest.fixture
def repo(tmp_path):
    return GitRepo.create(tmp_path / "repo")


@pytest.mark.parametrize("url,name", [
    ("https://github.com/org/web-app.git", "web-app"), ("git@host:org/My_Repo.git", "my-repo"),
    ("file:///srv/repos/app/", "app"), ("/tmp/x/remote.git", "remote"), ("/", "source")],
    ids=["https", "scp-like", "file-slash", "path", "root"])
def test_source_name_from_url(url, name):
    """The default GitSource name: the URL's last part, without .git, DNS-1123 sanitized."""
    assert source_name(url) == name


def test_sync_prints_one_line_per_object_then_the_revision(kctl, repo):
    """Created, then unchanged (no-change re-sync), then configured/pruned after a commit."""
    repo.write("a.yaml", [configmap("a"), configmap("b")])
    first = repo.commit()
    result = kctl("sync", repo.url, "--name", "app", "--prune", "--once")
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["configmap/a created", "configmap/b created",
                                       f"synced app at HEAD@{first[:12]}"]
    again = kctl("sync", repo.url, "--name", "app", "--prune", "--once")
    assert again.code == 0 and again.out.splitlines()[:2] == ["configmap/a unchanged", "configmap/b unchanged"]
    repo.write("a.yaml", [configmap("a", k="new")])
    second = repo.commit()
    result = kctl("sync", repo.url, "--name", "app", "--prune", "--once")
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["configmap/a configured", "configmap/b pruned",
                                       f"synced app at HEAD@{second[:12]}"]
    got = json.loads(kctl("get", "gitsource", "app", "-o", "json").out)
    assert got["spec"]["suspend"] is True and got["spec"]["prune"] is True
    assert kctl("get", "configmap", "b").code == 3


def test_without_once_the_daemon_owns_the_source(kctl, repo):
    """No --once: suspend is removed (the daemon polls every interval); flags not given are kept."""
    repo.write("a.yaml", configmap("a"))
    repo.commit()
    assert kctl("sync", repo.url, "--name", "app", "--once", "--interval", "5m").code == 0
    assert kctl("sync", repo.url, "--name", "app", "--branch", "main").code == 0
    spec = json.loads(kctl("get", "gs", "app", "-o", "json").out)["spec"]
    assert "suspend" not in spec and spec["interval"] == "5m" and spec["branch"] == "main"


def test_bad_commit_exits_1_with_file_and_line(kctl, repo):
    """A parse error: exit 1, one `error: FILE:LINE: message` line; the last good state stays."""
    repo.write("a.yaml", configmap("a"))
    repo.commit()
    assert kctl("sync", repo.url, "--name", "app").code == 0
    repo.write("b.yaml", "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: b\ndata: {x: [1\n")
    repo.commit("broken")
    result = kctl("sync", repo.url, "--name", "app")
    assert result.code == 1 and result.out == ""
    assert len(result.err.splitlines()) == 1 and result.err.startswith("error: b.yaml:")
    status = json.loads(kctl("sync", "status", "app", "-o", "json").out)[0]
    assert status["ready"] is False and status["reason"] == "RenderFailed" and status["error"]["file"] == "b.yaml"
    assert kctl("get", "configmap", "a").code == 0


def test_status_table_and_json(kctl, repo):
    """`sync status`: NAME URL REVISION READY STATUS AGE; -o json for scripts; `get gs` the same table."""
    repo.write("a.yaml", configmap("a"))
    head = repo.commit()
    assert kctl("sync", repo.url, "--name", "app").code == 0
    table = kctl("sync", "status").out.splitlines()
    assert table[0].split() == ["NAME", "URL", "REVISION", "READY", "STATUS", "AGE"]
    assert table[1].split()[:4] == ["app", repo.url, f"HEAD@{head[:12]}", "True"]
    assert f"Applied revision HEAD@{head[:12]}" in table[1]
    assert kctl("get", "gitsources").out.splitlines()[0].split() == table[0].split()
    data = json.loads(kctl("sync", "status", "-A", "-o", "json").out)
    assert data[0]["name"] == "app" and data[0]["ready"] is True
    assert data[0]["lastAppliedRevision"] == f"HEAD@{head}" and data[0]["inventoryCount"] == 1
    assert kctl("sync", "status", "nope").code == 3


def test_diff_source_shows_drift_and_prunes(kctl, repo, server):
    """`kctl diff --source`: exit 0 in sync; 1 with the out-of-band edit and the object to prune shown."""
    repo.write("a.yaml", [configmap("a"), configmap("b")])
    repo.commit()
    assert kctl("sync", repo.url, "--name", "app", "--prune").code == 0
    assert kctl("diff", "--source", "app").code == 0
    server.patch(server.resource("configmaps"), "a", {"data": {"k": "edited"}}, patch_type="merge",
                 namespace="default")
    repo.write("a.yaml", [configmap("a")])
    repo.commit("drop b")
    result = kctl("diff", "--source", "app")
    assert result.code == 1
    assert "-  k: edited" in result.out and "+  k: a" in result.out
    assert "LIVE/v1.ConfigMap.default.b" in result.out
    assert kctl("diff", "--source", "nope").code == 3


def test_report_mode_exits_1_on_drift(kctl, repo, server):
    """--mode Report writes nothing and lists what drifted; exit 1 when anything did."""
    repo.write("a.yaml", configmap("a"))
    repo.commit()
    assert kctl("sync", repo.url, "--name", "app").code == 0
    server.patch(server.resource("configmaps"), "a", {"data": {"k": "edited"}}, patch_type="merge",
                 namespace="default")
    result = kctl("sync", repo.url, "--name", "app", "--mode", "Report")
    assert result.code == 1 and "configmap/a drifted (differs from the revision)" in result.out
    assert json.loads(kctl("get", "cm", "a", "-o", "json").out)["data"] == {"k": "edited"}


def test_plain_folder_and_delete(kctl, tmp_path):
    """A folder that is not a repository syncs at folder:HASH; `sync delete` prunes, `delete gs` just deletes."""
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(configmap("a")))
    result = kctl("sync", str(folder), "--prune", "--once")
    assert result.code == 0, result.err
    assert result.out.splitlines()[-1].startswith("synced manifests at folder:")
    result = kctl("sync", "delete", "manifests")
    assert result.out.splitlines() == ["configmap/a pruned", "gitsource.kctl.io/manifests deleted"]
    assert kctl("get", "cm", "a").code == 3
    assert kctl("sync", str(folder), "--name", "keep", "--once").code == 0  # prune false: no finalizer
    assert kctl("delete", "gitsource", "keep").code == 0
    assert kctl("get", "cm", "a").code == 0


@pytest.mark.parametrize("args,code,needle", [
    (["--mode", "Sometimes"], 2, "Apply or Report"), (["--interval", "soon"], 2, "invalid duration"),
    (["--name", "Bad_Name"], 6, "metadata.name")], ids=["mode", "interval", "name"])
def test_bad_flags(kctl, repo, args, code, needle):
    """Bad flags are refused before anything is stored."""
    result = kctl("sync", repo.url, *args)
    assert result.code == code and needle in result.err and "Traceback" not in result.err


def test_missing_path_and_unreachable_url_exit_1(kctl, tmp_path):
    """A path that does not exist, or a repository that cannot be fetched: one error line, exit 1."""
    result = kctl("sync", str(tmp_path / "nowhere"))
    assert result.code == 1 and "no such directory" in result.err
    result = kctl("sync", f"file://{tmp_path}/gone.git", "--name", "gone")
    assert result.code == 1 and len(result.err.splitlines()) == 1 and "gone.git" in result.err


def test_subprocess_admission_error_is_one_line(tmp_path, repo):
    """As a user runs it: exit 1, `error: FILE:LINE: ...` naming the field, no traceback, nothing applied."""
    bad = configmap("b")
    bad["data"] = {"k": 1}
    repo.write("a.yaml", [configmap("a"), bad])
    repo.commit()
    (tmp_path / "store").mkdir()  # a named store's folder must exist
    env = {**os.environ, "KCTL_STORE": str(tmp_path / "store" / "kctl.db")}
    done = subprocess.run([sys.executable, "-m", "kctl", "sync", repo.url, "--name", "app"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: a.yaml:") and "data.k" in done.stderr
    got = subprocess.run([sys.executable, "-m", "kctl", "get", "cm", "a"], env=env, capture_output=True, timeout=60)
    assert got.returncode == 3
