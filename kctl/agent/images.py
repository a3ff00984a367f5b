"""Images without a registry: copy an image a host lacks from a host that has it, and pull secrets.

The pod logic (kctl.agent.imagepull) calls `ImageCopier.copy` when a container's image is
missing on its host and the pull policy allows pulling, but no registry can give it (a
`localhost/` image, or a pull that failed). The copier looks for a source, in order:

1. the control host's Podman (the daemon's local Podman, `kctl daemon --image-source`),
2. another Node whose status.images lists the image (Ready ones first), through its
   agent's runtime or a connection made for the copy (kctl.runtime.connect),

and streams `save_image` -> `load_image` (a docker-archive tar, never whole in memory;
over SSH through the runtime's tunnel). One copy of an image to a node runs at a time:
a second waiter finds the image there. `kctl image push` (kctl.cli.image) uses
`copy_image` directly.

`pull_auth` turns a pod's imagePullSecrets (kubernetes.io/dockerconfigjson or dockercfg
Secrets) into the RegistryAuth a pull sends. Credentials are never logged.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fnmatch
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from kctl.runtime.interface import RegistryAuth, Runtime, RuntimeError_

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.agent.images")

CONTROL_HOST = "control host"
DOCKER_HUB = "docker.io"
DOCKER_HUB_ALIASES = ("index.docker.io", "registry-1.docker.io", "registry.hub.docker.com", "docker.io")
SECRET_TYPES = {"kubernetes.io/dockerconfigjson": ".dockerconfigjson", "kubernetes.io/dockercfg": ".dockercfg"}

Lookup = Callable[[str, str, str], "dict | None"]  # (kind, namespace, name) -> object or None


class ImageCopyError(RuntimeError_):
    """No host could give the image; the message says what each source answered."""


@dataclass(frozen=True)
class CopyResult:
    """What a copy did: `source` None means the image was on the target already (copied meanwhile)."""

    source: str | None
    seconds: float = 0.0
    size: int = 0
    names: tuple[str, ...] = ()


# -- names ----------------------------------------------------------------------------------------

def image_names(ref: str) -> tuple[str, ...]:
    """The names a node may list `ref` under (as the scheduler's ImageLocality matches them)."""
    from kctl.client.imagenames import normalized_image_names

    return normalized_image_names(ref)


def node_images(node: dict) -> set[str]:
    """Every image name a Node's status.images lists."""
    return {str(name) for image in (node.get("status") or {}).get("images") or ()
            for name in image.get("names") or ()}


def holds(node: dict, ref: str) -> bool:
    """Whether the Node reports holding the image `ref` names."""
    return not node_images(node).isdisjoint(image_names(ref))


def _split(ref: str) -> tuple[str, str]:
    """(registry host, repository path without tag or digest) of an image reference, as Docker reads it."""
    name = ref.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    name = f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return (DOCKER_HUB if first in DOCKER_HUB_ALIASES else first), rest
    return DOCKER_HUB, name if "/" in name else f"library/{name}"


def registry_of(ref: str) -> str:
    """The registry host of an image reference (docker.io for a name without one)."""
    return _split(ref)[0]


def registry_may_have(ref: str) -> bool:
    """False for localhost/ images: they are built on a host, no registry serves them."""
    return registry_of(ref) != "localhost"


def _ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


# -- copying --------------------------------------------------------------------------------------

def copy_image(source: Runtime, target: Runtime, ref: str) -> tuple[list[str], int]:
    """Stream `ref` from source to target; (the names loaded, bytes moved). RuntimeError_ on failure."""
    moved = 0

    def counted(chunks: Iterable[bytes]) -> Iterator[bytes]:
        nonlocal moved
        for chunk in chunks:
            moved += len(chunk)
            yield chunk

    names = target.load_image(counted(source.save_image(ref)))
    return names, moved


def same_service(one: Runtime, other: Runtime) -> bool:
    """Whether two runtimes are one Podman service (the same URL)."""
    url = getattr(one, "base_url", None)
    return one is other or (url is not None and url == getattr(other, "base_url", None))


class LocalPodman:
    """The control host's Podman as an image source: the first of `urls` that answers, kept open.

    A unix:// socket is pinged first (kctl.runtime.service.ping); ssh:// is used as given.
    `factory` makes the Runtime (PodmanRuntime by default). `close` closes what it made.
    """

    def __init__(self, urls: Iterable[str], *, factory: Callable[[str], Runtime] | None = None) -> None:
        self.urls = [url for url in urls if url]
        self._factory = factory
        self._runtimes: dict[str, Runtime] = {}
        self._lock = threading.Lock()

    def __call__(self) -> Runtime | None:
        from kctl.runtime.service import ping

        for url in self.urls:
            if url.startswith("unix://") and not ping(url[len("unix://"):]):
                continue
            with self._lock:
                if url not in self._runtimes:
                    self._runtimes[url] = self._make(url)
                return self._runtimes[url]
        return None

    def _make(self, url: str) -> Runtime:
        if self._factory is not None:
            return self._factory(url)
        from kctl.runtime.podman import PodmanRuntime

        return PodmanRuntime(url)

    def close(self) -> None:
        with self._lock:
            runtimes, self._runtimes = list(self._runtimes.values()), {}
        for runtime in runtimes:
            close = getattr(runtime, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()


class ImageCopier:
    """Finds a host holding an image and copies it to a target host (see the module docstring).

    `control` gives the control host's Runtime (or None when it does not answer), `nodes`
    the Node objects, `node_runtime` a running agent's Runtime for a Node (or None), and
    `runtime_for_node` makes one (closed after the copy) when no agent's is at hand.
    """

    def __init__(self, *, control: Callable[[], Runtime | None] | None = None,
                 nodes: Callable[[], list[dict]] | None = None,
                 node_runtime: Callable[[dict], Runtime | None] | None = None,
                 runtime_for_node: Callable[[dict], Runtime] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.control = control
        self.nodes = nodes
        self.node_runtime = node_runtime
        self.runtime_for_node = runtime_for_node
        self.clock = clock
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def close(self) -> None:
        """Close the control host's connection, if the copier opened one."""
        close = getattr(self.control, "close", None)
        if callable(close):
            close()

    def _lock_for(self, node: str, ref: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault((node, ref), threading.Lock())

    def copy(self, target: Runtime, ref: str, *, node: str) -> CopyResult:
        """Put `ref` on `target` (node `node`) from the first source holding it; ImageCopyError if none."""
        with self._lock_for(node, ref):
            started = self.clock()
            if target.image_present(ref):
                return CopyResult(source=None)
            answers: list[str] = []
            for name, source, done in self._sources(target, ref, node, answers):
                try:
                    if not source.image_present(ref):
                        answers.append(f"{name}: not there")
                        continue
                    names, size = copy_image(source, target, ref)
                    if not target.image_present(ref):
                        answers.append(f"{name}: loaded {', '.join(names) or 'nothing'}, not {ref}")
                        continue
                except RuntimeError_ as error:
                    log.warning("node %s: copying image %s from %s failed: %s", node, ref, name, error)
                    answers.append(f"{name}: {error}")
                    continue
                finally:
                    done()
                seconds = self.clock() - started
                log.info("node %s: copied image %s from %s (%d bytes) in %.3fs", node, ref, name, size, seconds)
                return CopyResult(source=name, seconds=seconds, size=size, names=tuple(names))
        detail = "; ".join(answers) if answers else "neither the control host nor any node has it"
        raise ImageCopyError(f"no host to copy image {ref} from ({detail})")

    def _sources(self, target: Runtime, ref: str, node: str,
                 answers: list[str]) -> Iterator[tuple[str, Runtime, Callable[[], None]]]:
        """(name, runtime, call-when-done) of each candidate source, connected only when reached."""
        if self.control is not None:
            try:
                control = self.control()
            except RuntimeError_ as error:
                answers.append(f"{CONTROL_HOST}: {error}")
                control = None
            if control is not None and not same_service(control, target):
                yield CONTROL_HOST, control, _nothing
        try:
            nodes = self.nodes() if self.nodes is not None else []
        except Exception as error:  # the API (maybe remote) failing must not stop the copy's report
            answers.append(f"nodes: cannot list them: {error}")
            nodes = []
        candidates = [n for n in nodes
                      if (n.get("metadata") or {}).get("name") != node
                      and not (n.get("metadata") or {}).get("deletionTimestamp") and holds(n, ref)]
        for other in sorted(candidates, key=lambda n: (not _ready(n), n["metadata"]["name"])):
            name = f"node {other['metadata']['name']}"
            runtime, done = self._node_runtime(other, answers, name)
            if runtime is None:
                continue
            if same_service(runtime, target):
                done()
                continue
            yield name, runtime, done

    def _node_runtime(self, node: dict, answers: list[str],
                      name: str) -> tuple[Runtime | None, Callable[[], None]]:
        runtime = self.node_runtime(node) if self.node_runtime is not None else None
        if runtime is not None:
            return runtime, _nothing
        if self.runtime_for_node is None:
            answers.append(f"{name}: no connection to it")
            return None, _nothing
        try:
            made = self.runtime_for_node(node)
        except RuntimeError_ as error:
            answers.append(f"{name}: {error}")
            return None, _nothing
        close = getattr(made, "close", None)
        return made, (close if callable(close) else _nothing)


def _nothing() -> None:
    return None


def daemon_image_copier(api: API, *, source_urls: list[str], agents: Callable[[], dict]) -> ImageCopier:
    """The copier `kctl daemon` gives its agents: the control host's Podman at the first of
    `source_urls` that answers, then the Nodes (their running agent's runtime, `agents()` maps
    node name -> NodeAgent, else a connection made for the copy)."""
    from kctl.runtime.connect import runtime_for_node

    def nodes() -> list[dict]:
        return api.list(api.resource("nodes"))[0]

    def node_runtime(node: dict) -> Runtime | None:
        agent = agents().get((node.get("metadata") or {}).get("name", ""))
        return getattr(agent, "runtime", None)

    return ImageCopier(control=LocalPodman(source_urls) if source_urls else None, nodes=nodes,
                       node_runtime=node_runtime, runtime_for_node=runtime_for_node)


# -- imagePullSecrets -----------------------------------------------------------------------------

def _decode(value: object) -> str:
    try:
        return base64.b64decode(str(value), validate=True).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return ""


def _docker_auths(secret: dict) -> dict:
    """The registry -> entry map of a dockerconfigjson or dockercfg Secret ({} when unreadable)."""
    key = SECRET_TYPES.get(str(secret.get("type", "")))
    if key is None:
        return {}
    raw = _decode((secret.get("data") or {}).get(key, ""))
    try:
        document = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(document, dict):
        return {}
    auths = document.get("auths", {}) if key == ".dockerconfigjson" else document
    return auths if isinstance(auths, dict) else {}


def _registry_key(key: str) -> str:
    """A dockerconfig key as host[/path], as the kubelet reads it: scheme, a /v1/ or /v2/ path
    prefix and trailing slash gone; Docker Hub's aliases as docker.io."""
    text = key.strip().split("://", 1)[-1].rstrip("/")
    host, _, path = text.partition("/")
    if path in ("v1", "v2") or path.startswith(("v1/", "v2/")):
        path = path[3:]
    if host in DOCKER_HUB_ALIASES:
        host = DOCKER_HUB  # "https://index.docker.io/v1/" names all of Docker Hub
    return f"{host}/{path}" if path else host


def _matches(key: str, ref: str) -> bool:
    """kubelet's rule: the key's host (glob allowed) is the image's registry, its path a prefix."""
    host, _, path = _registry_key(key).partition("/")
    registry, repository = _split(ref)
    if not fnmatch.fnmatchcase(registry, host):
        return False
    return not path or repository == path or repository.startswith(path + "/")


def _auth_of(entry: object, registry: str) -> RegistryAuth | None:
    if not isinstance(entry, dict):
        return None
    username, password = str(entry.get("username") or ""), str(entry.get("password") or "")
    if not username and entry.get("auth"):
        username, _, password = _decode(entry["auth"]).partition(":")
    return RegistryAuth(username=username, password=password, registry=registry) if username else None


def pull_auth(pod: dict, ref: str, lookup: Lookup) -> tuple[RegistryAuth | None, list[str]]:
    """(the credentials the pod's imagePullSecrets hold for ref's registry, the secrets not found).

    The entry whose key matches most specifically wins (kubelet's order); None when no
    secret has one (the pull then goes without credentials).
    """
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    missing: list[str] = []
    best: tuple[int, RegistryAuth] | None = None
    for reference in (pod.get("spec") or {}).get("imagePullSecrets") or ():
        name = str((reference or {}).get("name") or "")
        if not name:
            continue
        secret = lookup("Secret", namespace, name)
        if secret is None:
            missing.append(name)
            continue
        for key, entry in _docker_auths(secret).items():
            if not _matches(str(key), ref):
                continue
            auth = _auth_of(entry, registry_of(ref))
            rank = len(_registry_key(str(key)))
            if auth is not None and (best is None or rank > best[0]):
                best = (rank, auth)
    return (best[1] if best else None), missing


__all__ = ["CONTROL_HOST", "CopyResult", "ImageCopier", "ImageCopyError", "LocalPodman", "copy_image",
           "daemon_image_copier", "holds", "same_service",
           "image_names", "node_images", "pull_auth", "registry_may_have", "registry_of"]
