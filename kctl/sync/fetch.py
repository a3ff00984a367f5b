"""Fetch one revision of a git repository into a local checkout, or take a folder as it is.

Called by the git-source reconciler and `kctl sync`. Everything goes through the system
`git` command (argument lists, never a shell). Each URL has one cache repository under
`cache_dir` (named by the sha256 of the URL, folders 0700): `git init` once, then every
fetch is shallow (`git fetch --depth 1 --no-tags origin REF`) and the work tree is forced
to the fetched commit (`checkout --force --detach`, `clean -ffdx`), so a force-push is
followed like any other change. An fcntl lock in the cache folder keeps two processes
fetching the same URL from mixing their work (the work tree is then that process's until
the next fetch of the URL).

Credentials never reach a command line, a log or an error message: an https password or
token is answered by a GIT_ASKPASS program written 0700 into a private temporary folder,
reading it from an environment variable given to that one `git` process; an ssh key and
known_hosts are written 0600 there and named in GIT_SSH_COMMAND, built by
kctl.ssh.ssh_options (host keys always checked). The folder is removed afterwards.
Every failure is a FetchError of one line, with any userinfo scrubbed from URLs.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kctl.ssh import ssh_options

__all__ = ["Checkout", "Credentials", "FetchError", "fetch", "folder_hash", "remote_head"]


class FetchError(Exception):
    """A source that could not be fetched (repository gone, network down, bad ref, timeout).

    `str()` is one line and never holds a password, token or key.
    """


@dataclass(frozen=True)
class Credentials:
    """How to authenticate: basic auth or a token for https, a private key for ssh URLs.

    With no ssh key, ssh uses the user's agent and default identities; with no known_hosts,
    the user's ~/.ssh/known_hosts. Host keys are checked strictly either way.
    """

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssh_private_key: bytes | None = field(default=None, repr=False)
    known_hosts: bytes | None = None


@dataclass(frozen=True)
class Checkout:
    """A revision's files on disk.

    `commit` is the full commit sha, or `folder:` + 16 hex digits of a hash of a plain
    folder's file names and contents.
    """

    root: Path
    commit: str


# The transports kctl lets git use; `ext::`, `fd::` and other helpers are refused.
_SCHEMES = frozenset({"https", "http", "ssh", "git", "file"})
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_TRANSPORT = re.compile(r"^([A-Za-z0-9+.-]+)::")  # git's <transport>::<address> (ext::, fd::)
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?([^/:\s]+):(?!//)")
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@")
_FULL_SHA = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")
_HEX = re.compile(r"[0-9a-fA-F]{4,64}")
# Variables that would point git at another repository than the one it is run in.
_REPO_VARIABLES = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES",
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_ASKPASS", "SSH_ASKPASS"})
_ASKPASS = """#!/bin/sh
case "$1" in
Username*) printf '%s\\n' "$KCTL_GIT_USERNAME" ;;
*) printf '%s\\n' "$KCTL_GIT_PASSWORD" ;;
esac
"""


@dataclass(frozen=True)
class _Source:
    """A URL as kctl fetches it: the git URL without a password, or a plain folder."""

    url: str  # what git is given; for a folder, its absolute path
    folder: Path | None
    credentials: Credentials | None
    secrets: tuple[str, ...]  # strings that must never appear in an error

    @property
    def is_file(self) -> bool:
        return self.url.startswith("file://")

    @property
    def is_ssh(self) -> bool:
        return self.url.startswith("ssh://") or _SCHEME.match(self.url) is None


def fetch(url: str, *, cache_dir: Path, branch: str | None = None, revision: str | None = None,
          credentials: Credentials | None = None, timeout: float = 120.0) -> Checkout:
    """The files of one revision: `revision` (a commit sha or tag) if given, else the tip of
    `branch`, else of the remote HEAD. A plain folder is used in place."""
    source = _source(url, credentials)
    if source.folder is not None:
        return Checkout(root=source.folder, commit=folder_hash(source.folder))
    _check_ref(branch, "branch")
    _check_ref(revision, "revision")
    deadline = time.monotonic() + timeout
    home = _cache_home(Path(cache_dir), source.url)
    with _locked(home / "lock", deadline, source), _environment(source) as env:
        tree = home / "tree"
        git = _Git(source, env, deadline, timeout, cwd=tree)
        _ensure_repository(tree, git)
        commit = _fetch_revision(git, branch=branch, revision=revision)
        git.run("checkout", "--quiet", "--force", "--detach", commit)
        git.run("clean", "-ffdxq")
        return Checkout(root=tree, commit=commit)


def remote_head(url: str, *, branch: str | None = None, revision: str | None = None,
                credentials: Credentials | None = None, timeout: float = 30.0) -> str:
    """The commit `fetch` would check out, asked with `git ls-remote` (nothing downloaded).

    For a plain folder, its folder hash; for a pinned full sha, that sha. A pinned
    abbreviated sha that names no tag or branch is returned as given.
    """
    source = _source(url, credentials)
    if source.folder is not None:
        return folder_hash(source.folder)
    _check_ref(branch, "branch")
    _check_ref(revision, "revision")
    if revision and _FULL_SHA.fullmatch(revision):
        return revision.lower()
    deadline = time.monotonic() + timeout
    with _environment(source) as env:
        git = _Git(source, env, deadline, timeout, cwd=Path(tempfile.gettempdir()))
        if revision:
            wanted = [f"refs/tags/{revision}^{{}}", f"refs/tags/{revision}", f"refs/heads/{revision}",
                      revision]
            patterns = [revision, f"{revision}^{{}}"]
        else:
            wanted = patterns = [f"refs/heads/{branch}" if branch else "HEAD"]
        output = git.run("ls-remote", source.url, *patterns, what="ls-remote")
    refs = {}
    for line in output.splitlines():
        sha, _, ref = line.partition("\t")
        refs.setdefault(ref.strip(), sha.strip())
    for ref in wanted:
        if ref in refs:
            return refs[ref]
    if revision and _HEX.fullmatch(revision):
        return revision.lower()
    what = f"revision {revision}" if revision else f"branch {branch}" if branch else "HEAD"
    raise FetchError(f"{_scrub(source.url, source.secrets)}: no {what} in the repository")


def folder_hash(folder: Path) -> str:
    """`folder:` + 16 hex digits of the sha256 of a folder's file names and contents.

    Dot-files and dot-folders are left out (as render leaves them out); a symbolic link
    to a folder counts by its target's name.
    """
    digest = hashlib.sha256()
    folder = Path(folder)
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        base = Path(top)
        for name in list(dirs):
            path = base / name
            if path.is_symlink():
                dirs.remove(name)
                _hash_entry(digest, path.relative_to(folder), b"link:" + os.fsencode(os.readlink(path)))
        for name in sorted(f for f in files if not f.startswith(".")):
            path = base / name
            try:
                data = path.read_bytes()
            except OSError:
                data = b"unreadable:" + (os.fsencode(os.readlink(path)) if path.is_symlink() else b"")
            _hash_entry(digest, path.relative_to(folder), data)
    return "folder:" + digest.hexdigest()[:16]


def _hash_entry(digest, relative: Path, data: bytes) -> None:
    name = os.fsencode(relative.as_posix())
    digest.update(b"%d:%s%d:" % (len(name), name, len(data)))
    digest.update(data)


# -- the source -------------------------------------------------------------------------------

def _source(url: str, credentials: Credentials | None) -> _Source:
    """Classify `url`: a git URL (password moved out of it) or a local folder/repository."""
    secrets = _secrets(credentials)
    if not isinstance(url, str) or not url.strip():
        raise FetchError("no repository URL or path given")
    url = url.strip()
    if url.startswith("-"):
        raise FetchError(f"{url.split()[0]!r} is not a repository URL or path")
    transport = _TRANSPORT.match(url)
    if transport:
        raise FetchError(f"unsupported git transport {transport.group(1)!r} (use https, http, ssh, git "
                         f"or file URLs)")
    match = _SCHEME.match(url)
    if match:
        scheme = match.group(1).lower()
        if scheme not in _SCHEMES:
            raise FetchError(f"{_scrub(url, secrets)}: unsupported URL scheme {scheme!r} "
                             f"(use https, http, ssh, git or file)")
        parts = urllib.parse.urlsplit(url)
        if scheme != "file" and (not parts.hostname or parts.hostname.startswith("-")):
            raise FetchError(f"{_scrub(url, secrets)}: no host in the URL")
        if parts.password is not None:
            password = urllib.parse.unquote(parts.password)
            user = urllib.parse.unquote(parts.username or "")
            secrets += (password, parts.password)
            if credentials is None or credentials.password is None:
                base = credentials or Credentials()
                credentials = Credentials(username=base.username or user or None, password=password,
                                          ssh_private_key=base.ssh_private_key,
                                          known_hosts=base.known_hosts)
            host = parts.hostname + (f":{parts.port}" if parts.port else "")
            keep_user = f"{parts.username}@" if scheme == "ssh" and parts.username else ""
            url = urllib.parse.urlunsplit((scheme, keep_user + host, parts.path, parts.query, ""))
        return _Source(url, None, credentials, secrets)
    scp = _SCP_LIKE.match(url)
    if scp and not os.path.exists(url):
        if scp.group(1).startswith("-"):
            raise FetchError(f"{url!r}: no host in the URL")
        return _Source(url, None, credentials, secrets)
    path = Path(url).expanduser()
    if not path.exists():
        raise FetchError(f"{url}: no such repository or folder")
    path = path.resolve()
    if not path.is_dir():
        raise FetchError(f"{url}: not a folder or git repository")
    if (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir()):
        return _Source(path.as_uri(), None, credentials, secrets)
    return _Source(str(path), path, credentials, secrets)


def _secrets(credentials: Credentials | None) -> tuple[str, ...]:
    if credentials is None:
        return ()
    found = []
    if credentials.password:
        found += [credentials.password, urllib.parse.quote(credentials.password, safe="")]
    if credentials.ssh_private_key:
        found += [line for line in credentials.ssh_private_key.decode("utf-8", "replace").splitlines()
                  if len(line) > 8 and not line.startswith("-----")]
    return tuple(found)


def _check_ref(ref: str | None, what: str) -> None:
    if ref is not None and (not ref or ref.startswith("-") or any(c.isspace() or c in "~^:?*[\\"
                                                                   for c in ref)):
        raise FetchError(f"invalid {what} {ref!r}")


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    """One line with userinfo taken out of URLs and every secret replaced by ***."""
    text = _USERINFO.sub(r"\1", text)
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "***")
    return " ".join(text.split())


# -- running git ------------------------------------------------------------------------------

class _Git:
    """`git` in one folder, with one environment, within one deadline."""

    def __init__(self, source: _Source, env: dict[str, str], deadline: float, timeout: float,
                 *, cwd: Path) -> None:
        self.source, self.env, self.deadline, self.timeout, self.cwd = source, env, deadline, timeout, cwd
        self.options = ["-c", "protocol.file.allow=always"] if source.is_file else []
        if source.credentials is not None and source.credentials.password is not None:
            self.options += ["-c", "credential.helper="]  # never store kctl's token in a helper

    def run(self, *args: str, what: str | None = None) -> str:
        """The command's standard output; FetchError (scrubbed, one line) when it fails."""
        remaining = self.deadline - time.monotonic()
        label = what or args[0]
        if remaining <= 0:
            raise self._error(f"timed out after {self.timeout:g} s")
        try:
            proc = subprocess.Popen(["git", *self.options, *args], cwd=self.cwd, env=self.env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except FileNotFoundError:
            raise FetchError("the git command is not installed") from None
        try:
            out, err = proc.communicate(timeout=remaining)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # git and its helpers (ssh, remote-https)
            proc.communicate()
            raise self._error(f"git {label} timed out after {self.timeout:g} s") from None
        if proc.returncode != 0:
            raise self._error(_git_message(err.decode("utf-8", "replace")) or
                              f"git {label} failed (exit status {proc.returncode})")
        return out.decode("utf-8", "replace")

    def _error(self, message: str) -> FetchError:
        return FetchError(_scrub(f"{self.source.url}: {message}", self.source.secrets))


def _git_message(stderr: str) -> str:
    """The gist of git's stderr: ssh's complaint if any, then git's `fatal:`/`error:` lines
    (at most two in all), else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    picked = [line for line in lines if line.startswith(_SSH_PROBLEMS)]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix) and line[len(prefix):] not in picked:
                picked.append(line[len(prefix):])
    if len(picked) > 1 and _NO_DETAIL in picked:
        picked.remove(_NO_DETAIL)
    if picked:
        return "; ".join(picked[:2])
    return lines[-1] if lines else ""


_SSH_PROBLEMS = ("ssh: ", "Host key verification failed", "Permission denied", "No ED25519 host key",
                 "No RSA host key", "No ECDSA host key", "Load key ")
_NO_DETAIL = "Could not read from remote repository."


@contextlib.contextmanager
def _environment(source: _Source) -> Iterator[dict[str, str]]:
    """git's environment: no prompts, C messages, and the credentials (in a temporary folder)."""
    env = {k: v for k, v in os.environ.items() if k not in _REPO_VARIABLES}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="", LC_ALL="C", LANGUAGE="C", GCM_INTERACTIVE="never")
    creds = source.credentials
    with tempfile.TemporaryDirectory(prefix="kctl-git-") as private:  # 0700
        folder = Path(private)
        if creds is not None and creds.password is not None and not source.is_ssh:
            askpass = folder / "askpass"
            _write_private(askpass, _ASKPASS.encode(), 0o700)
            env.update(GIT_ASKPASS=str(askpass), KCTL_GIT_USERNAME=creds.username or "git",
                       KCTL_GIT_PASSWORD=creds.password)
        if source.is_ssh:
            identity = known_hosts = None
            if creds is not None and creds.ssh_private_key:
                identity = str(folder / "identity")
                key = creds.ssh_private_key
                _write_private(Path(identity), key if key.endswith(b"\n") else key + b"\n", 0o600)
            if creds is not None and creds.known_hosts:
                known_hosts = str(folder / "known_hosts")
                _write_private(Path(known_hosts), creds.known_hosts, 0o600)
            command = ["ssh", *ssh_options(identity=identity, known_hosts=known_hosts, connect_timeout=30)]
            env.update(GIT_SSH_COMMAND=shlex.join(command), GIT_SSH_VARIANT="ssh")
        yield env


def _write_private(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


# -- the cache repository ---------------------------------------------------------------------

def _cache_home(cache_dir: Path, url: str) -> Path:
    """<cache_dir>/<sha256 of the url>/, folders 0700."""
    home = cache_dir / hashlib.sha256(url.encode()).hexdigest()
    try:
        cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        home.mkdir(mode=0o700, exist_ok=True)
    except OSError as error:
        raise FetchError(f"cannot create the cache folder {home}: {error.strerror or error}") from None
    return home


@contextlib.contextmanager
def _locked(path: Path, deadline: float, source: _Source) -> Iterator[None]:
    """Hold an exclusive fcntl lock on `path` (waiting until the deadline for it)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise FetchError(_scrub(f"{source.url}: another fetch of this repository is still "
                                            f"running", source.secrets)) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def _ensure_repository(tree: Path, git: _Git) -> None:
    """`git init` the cache repository once (again if an earlier init was cut short)."""
    marker = tree / ".git" / "kctl-ready"
    if marker.exists():
        return
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(mode=0o700)
    git.run("init", "--quiet")
    git.run("remote", "add", "origin", git.source.url, what="remote add")
    git.run("config", "gc.autoDetach", "false")  # no background gc outliving the lock
    git.run("config", "core.logAllRefUpdates", "false")  # old revisions unreachable: gc drops them
    marker.write_text(git.source.url + "\n")


def _fetch_revision(git: _Git, *, branch: str | None, revision: str | None) -> str:
    """Fetch the wanted revision shallowly; its full commit sha."""
    if revision and _FULL_SHA.fullmatch(revision):
        try:
            git.run("fetch", "--quiet", "--depth", "1", "--no-tags", "origin", revision)
        except FetchError:  # a server that refuses unadvertised objects: fetch everything
            _fetch_all(git)
        return _commit_of(git, revision, revision)
    ref = revision or (f"refs/heads/{branch}" if branch else "HEAD")
    try:
        git.run("fetch", "--quiet", "--depth", "1", "--no-tags", "origin", ref)
    except FetchError:
        if not (revision and _HEX.fullmatch(revision)):
            raise
        _fetch_all(git)  # an abbreviated sha
        return _commit_of(git, revision, revision)
    return _commit_of(git, "FETCH_HEAD", revision or branch or "HEAD")


def _fetch_all(git: _Git) -> None:
    shallow = git.run("rev-parse", "--is-shallow-repository").strip() == "true"
    git.run("fetch", "--quiet", "--no-tags", *(["--unshallow"] if shallow else []), "origin",
            "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*")


def _commit_of(git: _Git, name: str, shown: str) -> str:
    try:
        return git.run("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}").strip()
    except FetchError:
        raise git._error(f"revision {shown} not found") from None
