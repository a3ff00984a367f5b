"""Real git repositories of manifests for git-sync tests and benchmarks (never used by kctl itself).

`GitRepo.create(folder)` makes a bare repository (`remote.git`, what a GitSource points
at: `repo.url`) and a working clone (`work/`) that commits and pushes to it, on branch
main. `write`/`remove` change files in the clone, `commit` commits (as `t <t@t>`) and
pushes; `force_push(rev)` rewrites the remote's branch to an older commit, as a
`git push --force` would. Every git command runs without a shell, with a clean,
non-interactive environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")


def git(*args: str, cwd: Path | str | None = None) -> str:
    """Run git ARGS in cwd; its stdout (stripped). Raises CalledProcessError with stderr on failure."""
    env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", HOME=env.get("HOME", "/root"))
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
                           "-c", "commit.gpgsign=false", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, ["git", *args], done.stdout, done.stderr)
    return done.stdout.strip()


class GitRepo:
    """A bare repository and a working clone that pushes to it (see the module doc)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.remote = self.folder / "remote.git"
        self.work = self.folder / "work"
        self.branch = "main"

    @classmethod
    def create(cls, folder: Path | str, *, branch: str = "main") -> "GitRepo":
        repo = cls(Path(folder))
        repo.folder.mkdir(parents=True, exist_ok=True)
        git("init", "-q", "--bare", "-b", branch, str(repo.remote))
        git("init", "-q", "-b", branch, str(repo.work))
        git("remote", "add", "origin", str(repo.remote), cwd=repo.work)
        repo.branch = branch
        return repo

    @property
    def url(self) -> str:
        """What a GitSource's spec.url holds: the bare repository's path."""
        return str(self.remote)

    def write(self, path: str, content: str | dict | list) -> Path:
        """Write a file in the clone: text as is, an object (or list of them) as YAML documents of JSON."""
        target = self.work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not isinstance(content, str):
            docs = content if isinstance(content, list) else [content]
            content = "---\n".join(json.dumps(d, indent=1) + "\n" for d in docs)
        target.write_text(content)
        return target

    def remove(self, path: str) -> None:
        target = self.work / path
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()

    def commit(self, message: str = "change", *, push: bool = True, allow_empty: bool = False) -> str:
        """Commit everything in the clone (and push it); the new commit's hash."""
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "-m", message, *(["--allow-empty"] if allow_empty else []), cwd=self.work)
        if push:
            git("push", "-q", "origin", f"HEAD:{self.branch}", cwd=self.work)
        return self.head()

    def head(self) -> str:
        return git("rev-parse", "HEAD", cwd=self.work)

    def tag(self, name: str, rev: str = "HEAD") -> None:
        git("tag", "-f", name, rev, cwd=self.work)
        git("push", "-q", "-f", "origin", f"refs/tags/{name}", cwd=self.work)

    def force_push(self, rev: str) -> None:
        """Reset the clone to rev and force-push it: the remote branch loses the later commits."""
        git("reset", "-q", "--hard", rev, cwd=self.work)
        git("push", "-q", "-f", "origin", f"HEAD:{self.branch}", cwd=self.work)


def configmap(name: str, namespace: str | None = None, **data: str) -> dict:
    meta: dict = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data) or {"k": name}}


def deployment(name: str, *, replicas: int = 1, image: str = "localhost/busybox:demo",
               command: list[str] | None = None, labels: dict | None = None) -> dict:
    pod_labels = {"app": name, **(labels or {})}
    container = {"name": "app", "image": image, "imagePullPolicy": "Never"}
    if command:
        container["command"] = command
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": pod_labels},
                                  "spec": {"terminationGracePeriodSeconds": 1, "containers": [container]}}}}


__all__ = ["GitRepo", "configmap", "deployment", "git"]
