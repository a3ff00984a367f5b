"""kctl.sync.fetch: real git repositories made here, fetched shallowly into a cache; folders hashed."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from kctl.sync import fetch as fetch_module
from kctl.sync.fetch import Checkout, Credentials, FetchError, fetch, folder_hash, remote_head


def git(cwd: Path, *args: str) -> str:
    """Run git as a test author (no user config needed); its stdout."""
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
                           "-c", "tag.gpgsign=false", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def commit(repo: Path, files: dict[str, str | None], message: str = "change") -> str:
    """Write (or, for None, delete) files, commit them all; the new commit's sha."""
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def origin(tmp_path) -> Path:
    """A repository (branch main) with one commit holding cm.yaml."""
    repo = tmp_path / "origin"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, {"cm.yaml": "kind: ConfigMap\n"}, "first")
    return repo


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


@pytest.mark.parametrize("as_url", [True, False], ids=["file-url", "local-path"])
def test_fetch_checks_out_the_head_commit(origin, cache, as_url):
    """A file:// URL and a local repository path both give the remote HEAD's files and full sha."""
    url = origin.as_uri() if as_url else str(origin)
    checkout = fetch(url, cache_dir=cache)
    assert checkout.commit == git(origin, "rev-parse", "HEAD")
    assert (checkout.root / "cm.yaml").read_text() == "kind: ConfigMap\n"
    assert cache in checkout.root.parents and checkout.root != origin
    assert git(checkout.root, "rev-parse", "--is-shallow-repository") == "true"


def test_cache_folders_are_private(origin, cache):
    """The cache and its repository folders are 0700."""
    checkout = fetch(str(origin), cache_dir=cache)
    for folder in (cache, checkout.root.parent, checkout.root):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_new_commit_is_fetched_and_removed_files_go(origin, cache):
    """A later commit (a change, an addition, a removal) is what the next fetch checks out."""
    first = fetch(str(origin), cache_dir=cache)
    (first.root / "stray.txt").write_text("left by someone")
    second_sha = commit(origin, {"cm.yaml": None, "deploy.yaml": "kind: Deployment\n"})
    second = fetch(str(origin), cache_dir=cache)
    assert second.commit == second_sha != first.commit
    assert sorted(p.name for p in second.root.iterdir() if p.name != ".git") == ["deploy.yaml"]


def test_force_push_is_followed(origin, cache):
    """History rewritten on the remote (amended commit): the fetch takes the new tip."""
    commit(origin, {"cm.yaml": "kind: ConfigMap\nversion: 2\n"}, "second")
    assert fetch(str(origin), cache_dir=cache).commit == git(origin, "rev-parse", "HEAD")
    git(origin, "reset", "-q", "--hard", "HEAD~1")
    rewritten = commit(origin, {"cm.yaml": "kind: ConfigMap\nversion: rewritten\n"}, "rewritten")
    checkout = fetch(str(origin), cache_dir=cache)
    assert checkout.commit == rewritten
    assert "rewritten" in (checkout.root / "cm.yaml").read_text()


def test_branch_other_than_head(origin, cache):
    """`branch` fetches that branch's tip, and remote_head agrees."""
    git(origin, "checkout", "-q", "-b", "staging")
    staged = commit(origin, {"cm.yaml": "kind: ConfigMap\nstage: yes\n"})
    git(origin, "checkout", "-q", "main")
    checkout = fetch(str(origin), cache_dir=cache, branch="staging")
    assert checkout.commit == staged == remote_head(str(origin), branch="staging")
    assert fetch(str(origin), cache_dir=cache).commit != staged


@pytest.mark.parametrize("pin", ["tag", "annotated-tag", "sha", "short-sha"])
def test_pinned_revision(origin, cache, pin):
    """A tag (light or annotated), a full sha or an abbreviated one pins an older commit."""
    pinned = git(origin, "rev-parse", "HEAD")
    git(origin, "tag", "light")
    git(origin, "tag", "-a", "-m", "release", "annotated")
    commit(origin, {"cm.yaml": "kind: ConfigMap\nnewer: true\n"})
    revision = {"tag": "light", "annotated-tag": "annotated", "sha": pinned, "short-sha": pinned[:10]}[pin]
    checkout = fetch(str(origin), cache_dir=cache, revision=revision)
    assert checkout.commit == pinned
    assert (checkout.root / "cm.yaml").read_text() == "kind: ConfigMap\n"
    if pin != "short-sha":
        assert remote_head(str(origin), revision=revision) == pinned


@pytest.mark.parametrize("ref", [{"branch": "nope"}, {"revision": "no-such-tag"},
                                 {"revision": "0" * 40}], ids=["branch", "tag", "sha"])
def test_bad_ref_is_a_fetch_error(origin, cache, ref):
    """A branch, tag or commit the remote does not have: FetchError of one line."""
    with pytest.raises(FetchError) as info:
        fetch(str(origin), cache_dir=cache, **ref)
    assert "\n" not in str(info.value) and str(origin) in str(info.value)


def test_removed_repository_is_a_fetch_error(origin, cache):
    """A repository that went away after a good fetch: FetchError, the cache left in place."""
    good = fetch(origin.as_uri(), cache_dir=cache)
    moved = origin.parent / "moved"
    origin.rename(moved)
    with pytest.raises(FetchError, match="does not appear to be a git repository|no such repository"):
        fetch(origin.as_uri(), cache_dir=cache)
    with pytest.raises(FetchError, match="no such repository"):
        fetch(str(origin), cache_dir=cache)
    assert (good.root / "cm.yaml").exists()


def test_remote_head_matches_fetch(origin, cache):
    """remote_head (ls-remote) names the commit a fetch then checks out, also after a change."""
    assert remote_head(str(origin)) == fetch(str(origin), cache_dir=cache).commit
    commit(origin, {"more.yaml": "kind: Pod\n"})
    head = remote_head(origin.as_uri())
    assert head == git(origin, "rev-parse", "HEAD") == fetch(origin.as_uri(), cache_dir=cache).commit


def test_remote_head_of_missing_branch(origin):
    """A branch the remote lacks: FetchError naming it."""
    with pytest.raises(FetchError, match="no branch nope"):
        remote_head(str(origin), branch="nope")


def test_plain_folder_is_used_in_place_and_hashed(tmp_path, cache):
    """A folder that is no repository: its own path, `folder:` + a hash that follows content."""
    folder = tmp_path / "manifests"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.yaml").write_text("kind: ConfigMap\n")
    (folder / "sub" / "b.yaml").write_text("kind: Pod\n")
    checkout = fetch(str(folder), cache_dir=cache)
    assert checkout == Checkout(root=folder.resolve(), commit=checkout.commit)
    assert checkout.commit.startswith("folder:") and len(checkout.commit) == len("folder:") + 16
    assert remote_head(str(folder)) == checkout.commit == folder_hash(folder)
    assert not cache.exists()
    before = checkout.commit
    (folder / ".editor-swap").write_text("ignored")
    assert folder_hash(folder) == before
    (folder / "sub" / "b.yaml").write_text("kind: Pod\nspec: {}\n")
    changed = folder_hash(folder)
    assert changed != before
    (folder / "sub" / "b.yaml").rename(folder / "sub" / "c.yaml")
    assert folder_hash(folder) not in (before, changed)


@pytest.mark.parametrize("url", [
    "https://alice:s3cr%2Ft-pass@127.0.0.1:1/repo.git",
    "https://127.0.0.1:1/repo.git",
    "ssh://git@127.0.0.1:1/repo.git",
], ids=["password-in-url", "https-token", "ssh-key"])
def test_credentials_never_in_errors(cache, url):
    """However a fetch fails, its message holds no password, token or key material."""
    key = b"-----BEGIN OPENSSH PRIVATE KEY-----\nKEYMATERIALabcdef0123456789\n-----END OPENSSH PRIVATE KEY-----\n"
    creds = Credentials(username="alice", password="t0ken-value", ssh_private_key=key, known_hosts=b"")
    for call in (lambda: fetch(url, cache_dir=cache, credentials=creds, timeout=30),
                 lambda: remote_head(url, credentials=creds, timeout=30)):
        with pytest.raises(FetchError) as info:
            call()
        text = str(info.value)
        for secret in ("s3cr", "t-pass", "t0ken-value", "KEYMATERIAL"):
            assert secret not in text, text
        assert "\n" not in text
    assert "t0ken-value" not in repr(creds) and "KEYMATERIAL" not in repr(creds)


def test_password_is_answered_by_askpass_and_cleaned_up(tmp_path, monkeypatch):
    """The askpass program answers git's prompts from its environment; its folder is removed."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    source = fetch_module._source("https://bob:pa%24%24@example.invalid/r.git", None)
    assert source.url == "https://example.invalid/r.git"
    with fetch_module._environment(source) as env:
        askpass = env["GIT_ASKPASS"]
        assert stat.S_IMODE(os.stat(askpass).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(os.path.dirname(askpass)).st_mode) == 0o700
        answer = [subprocess.run([askpass, prompt], env=env, capture_output=True, text=True).stdout
                  for prompt in ("Username for 'https://example.invalid': ",
                                 "Password for 'https://bob@example.invalid': ")]
        assert "pa$$" not in " ".join(env.get(k, "") for k in env if k != "KCTL_GIT_PASSWORD")
    assert answer == ["bob\n", "pa$$\n"]
    assert not os.path.exists(askpass) and list(tmp_path.iterdir()) == []


def test_ssh_key_and_known_hosts_go_to_private_files(tmp_path, monkeypatch):
    """An ssh key is a 0600 file named in GIT_SSH_COMMAND, host keys checked strictly."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    creds = Credentials(ssh_private_key=b"KEY", known_hosts=b"host ssh-ed25519 AAAA\n")
    source = fetch_module._source("git@example.invalid:team/repo.git", creds)
    with fetch_module._environment(source) as env:
        command = env["GIT_SSH_COMMAND"]
        assert "StrictHostKeyChecking=yes" in command and "BatchMode=yes" in command
        identity = command.split("-i ", 1)[1].split()[0]
        assert Path(identity).read_bytes() == b"KEY\n"
        assert stat.S_IMODE(os.stat(identity).st_mode) == 0o600
        assert "UserKnownHostsFile=" in command
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["ext::sh -c touch% /tmp/x", "ftp://example.invalid/r.git", "--upload-pack=x"])
def test_unsafe_or_unknown_urls_are_refused(cache, url):
    """Transports that run commands, unknown schemes and option-like URLs never reach git."""
    with pytest.raises(FetchError):
        fetch(url, cache_dir=cache)
    assert not cache.exists()


def test_timeout_is_a_fetch_error(cache):
    """A server that accepts and never answers: FetchError saying it timed out."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    try:
        url = f"git://127.0.0.1:{server.getsockname()[1]}/repo.git"
        with pytest.raises(FetchError, match="timed out"):
            fetch(url, cache_dir=cache, timeout=1.5)
    finally:
        server.close()


def test_concurrent_fetches_share_the_cache(origin, cache):
    """Two fetches of one URL at once both succeed with the same commit (the lock serialises)."""
    results: list = []
    errors: list = []

    def run():
        try:
            results.append(fetch(str(origin), cache_dir=cache))
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and len(results) == 3
    assert {r.commit for r in results} == {git(origin, "rev-parse", "HEAD")}
    assert (results[0].root / "cm.yaml").exists()


def test_interrupted_init_is_redone(origin, cache):
    """A cache repository without its ready marker (an init cut short) is made again."""
    checkout = fetch(str(origin), cache_dir=cache)
    (checkout.root / ".git" / "kctl-ready").unlink()
    (checkout.root / ".git" / "config").write_text("garbage")
    assert fetch(str(origin), cache_dir=cache).commit == checkout.commit
