"""Images without a registry: the agent copies a missing image from the control host or another node.

Every host is a MemoryRuntime; the `node` fixture (conftest.py) is the target node n1.
Also: imagePullSecrets reach the pull, and the runtime helpers the copy relies on.
"""

from __future__ import annotations

import base64
import json
import threading

import pytest
from podharness import NODE, Harness, container, make_pod

from kctl.agent.images import (
    CONTROL_HOST,
    ImageCopier,
    ImageCopyError,
    copy_image,
    holds,
    pull_auth,
    registry_may_have,
    registry_of,
)
from kctl.runtime.interface import ImageNotFound, RegistryAuth
from kctl.runtime.memory import MemoryRuntime
from kctl.runtime.podman import registry_auth_header, saved_name

LOCAL_IMAGE = "localhost/app:1"
REMOTE_IMAGE = "example.org/app:1"


def node_object(name: str, images: list[str], *, ready: bool = True, deleting: bool = False) -> dict:
    meta: dict = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta,
            "status": {"images": [{"names": images, "sizeBytes": 1000}],
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


class Fleet:
    """The other hosts: a control host and nodes, each a MemoryRuntime, behind one ImageCopier."""

    def __init__(self, *, control_images: set[str] = frozenset()) -> None:
        self.control = MemoryRuntime(images=set(control_images))
        self.nodes: list[dict] = []
        self.runtimes: dict[str, MemoryRuntime] = {}
        self.copier = ImageCopier(control=lambda: self.control, nodes=lambda: list(self.nodes),
                                  node_runtime=lambda n: self.runtimes.get(n["metadata"]["name"]))

    def add_node(self, name: str, images: set[str], **status: bool) -> MemoryRuntime:
        self.nodes.append(node_object(name, sorted(images), **status))
        self.runtimes[name] = MemoryRuntime(images=set(images))
        return self.runtimes[name]


@pytest.fixture
def fleet(node: Harness) -> Fleet:
    """A fleet whose copier is the target node's (n1) image copier."""
    fleet = Fleet()
    node.ctx.image_copier = fleet.copier
    return fleet


def event(node: Harness, reason: str):
    return next(e for e in node.events if e.reason == reason)


# -- the agent's pull path -------------------------------------------------------------------------


def test_copies_a_local_image_from_the_control_host(node: Harness, fleet: Fleet) -> None:
    """A localhost/ image missing on the node is copied from the control host, not pulled; an event says so."""
    fleet.control.images.add(LOCAL_IMAGE)
    node.sync(make_pod(containers=[container("app", image=LOCAL_IMAGE)]))
    assert "running" in node.status("app")["state"]
    assert LOCAL_IMAGE in node.runtime.images
    assert node.runtime.count("pull_image") == 0
    copied = event(node, "ImageCopied")
    assert copied.type == "Normal" and copied.field_path == "spec.containers{app}"
    assert copied.message.startswith(f'Copied image "{LOCAL_IMAGE}" from {CONTROL_HOST} in ')


def test_copies_from_another_node_when_the_control_host_lacks_it(node: Harness, fleet: Fleet) -> None:
    """The control host lacks the image; node n2, whose status lists it, gives it."""
    fleet.add_node("n3", {"localhost/other:1"})
    n2 = fleet.add_node("n2", {LOCAL_IMAGE})
    node.sync(make_pod(containers=[container("app", image=LOCAL_IMAGE)]))
    assert "running" in node.status("app")["state"]
    assert "from node n2 in" in event(node, "ImageCopied").message
    assert fleet.control.count("image_present") == 1 and fleet.control.count("save_image") == 0
    assert n2.count("save_image") == 1
    assert fleet.runtimes["n3"].count("save_image") == 0  # it does not list the image: not asked


def test_registry_image_is_copied_after_the_pull_fails(node: Harness, fleet: Fleet) -> None:
    """An image a registry may serve is pulled first; when the pull fails it is copied."""
    fleet.control.images.add(REMOTE_IMAGE)
    node.sync(make_pod(containers=[container("app", image=REMOTE_IMAGE)]))
    assert "running" in node.status("app")["state"]
    assert node.runtime.count("pull_image") == 1
    assert node.reasons()[:2] == ["Pulling", "ImageCopied"]


def test_registry_pull_that_works_copies_nothing(node: Harness, fleet: Fleet) -> None:
    """With a registry answering, the pull is used as usual."""
    fleet.control.images.add(REMOTE_IMAGE)
    node.runtime.pullable.add(REMOTE_IMAGE)
    node.sync(make_pod(containers=[container("app", image=REMOTE_IMAGE)]))
    assert "running" in node.status("app")["state"]
    assert fleet.control.count("save_image") == 0 and "ImageCopied" not in node.reasons()


def test_no_source_keeps_the_image_pull_back_off_path(node: Harness, fleet: Fleet) -> None:
    """No host has the image: ErrImagePull (saying why), then ImagePullBackOff with no copy tried."""
    fleet.add_node("n2", {"localhost/other:1"})
    node.sync(make_pod(containers=[container("app", image=REMOTE_IMAGE)]))
    waiting = node.status("app")["state"]["waiting"]
    assert waiting["reason"] == "ErrImagePull"
    assert "connection refused" in waiting["message"] and "no host to copy image" in waiting["message"]
    assert f"{CONTROL_HOST}: not there" in waiting["message"]
    node.advance(5)
    node.sync()
    assert node.status("app")["state"]["waiting"]["reason"] == "ImagePullBackOff"
    assert fleet.control.count("image_present") == 1  # once, for the first sync only
    fleet.control.images.add(REMOTE_IMAGE)
    node.advance(10)
    node.sync()
    assert "running" in node.status("app")["state"]


def test_never_policy_never_copies(node: Harness, fleet: Fleet) -> None:
    """imagePullPolicy Never: ErrImageNeverPull, though the control host has the image."""
    fleet.control.images.add(LOCAL_IMAGE)
    node.sync(make_pod(containers=[container("app", image=LOCAL_IMAGE, imagePullPolicy="Never")]))
    assert node.status("app")["state"]["waiting"]["reason"] == "ErrImageNeverPull"
    assert fleet.control.calls == [] and LOCAL_IMAGE not in node.runtime.images


def test_always_with_a_local_image_does_not_copy(node: Harness, fleet: Fleet) -> None:
    """Always, image on the node, pull failing: the node's image is used, nothing copied."""
    fleet.control.images.add(REMOTE_IMAGE)
    node.runtime.images.add(REMOTE_IMAGE)
    node.sync(make_pod(containers=[container("app", image=REMOTE_IMAGE, imagePullPolicy="Always")]))
    assert "running" in node.status("app")["state"]
    assert fleet.control.calls == []


def test_without_a_copier_a_local_image_fails_as_before(node: Harness) -> None:
    """No copier in the context (unit tests, older callers): ErrImagePull from the pull, as before."""
    node.sync(make_pod(containers=[container("app", image=LOCAL_IMAGE)]))
    assert node.status("app")["state"]["waiting"]["reason"] == "ErrImagePull"
    assert node.runtime.count("pull_image") == 1


# -- the copier ------------------------------------------------------------------------------------


def test_sources_in_order_skipping_the_target_and_unready_last() -> None:
    """Control host first, then Ready nodes, then others; the target node itself and deleted nodes never."""
    fleet = Fleet()
    late = fleet.add_node("a-not-ready", {LOCAL_IMAGE}, ready=False)
    fleet.add_node(NODE, {LOCAL_IMAGE})
    fleet.add_node("gone", {LOCAL_IMAGE}, deleting=True)
    ready = fleet.add_node("z-ready", {LOCAL_IMAGE})
    ready.images.clear()  # its status is stale: it answers "not there"
    target = MemoryRuntime()
    result = fleet.copier.copy(target, LOCAL_IMAGE, node=NODE)
    assert result.source == "node a-not-ready" and LOCAL_IMAGE in target.images
    assert ready.count("image_present") == 1 and late.count("save_image") == 1
    assert fleet.runtimes[NODE].calls == [] and fleet.runtimes["gone"].calls == []


def test_a_connection_made_for_the_copy_is_closed() -> None:
    """Without an agent's runtime, runtime_for_node makes one; it is closed after the copy."""
    made: list[MemoryRuntime] = []

    class Closable(MemoryRuntime):
        closed = False

        def close(self) -> None:
            self.closed = True

    def runtime_for_node(node: dict) -> MemoryRuntime:
        made.append(Closable(images={LOCAL_IMAGE}))
        return made[-1]

    copier = ImageCopier(nodes=lambda: [node_object("n2", [LOCAL_IMAGE])], runtime_for_node=runtime_for_node)
    assert copier.copy(MemoryRuntime(), LOCAL_IMAGE, node=NODE).source == "node n2"
    assert len(made) == 1 and made[0].closed


def test_no_source_raises_with_every_answer() -> None:
    """ImageCopyError names what each source said; a failing listing of nodes is one of them."""
    def broken() -> list[dict]:
        raise OSError("store unreachable")

    copier = ImageCopier(control=lambda: MemoryRuntime(), nodes=broken)
    with pytest.raises(ImageCopyError, match="control host: not there; nodes: cannot list them: store unreachable"):
        copier.copy(MemoryRuntime(), LOCAL_IMAGE, node=NODE)


def test_control_host_that_is_the_target_is_skipped() -> None:
    """The control host's Podman is also the target's (one-host setup): not asked."""
    shared = MemoryRuntime()
    with pytest.raises(ImageCopyError):
        ImageCopier(control=lambda: shared).copy(shared, LOCAL_IMAGE, node=NODE)
    assert shared.count("save_image") == 0


class GatedRuntime(MemoryRuntime):
    """A target whose first load waits until `release` is set (a copy in progress)."""

    def __init__(self) -> None:
        super().__init__()
        self.loading, self.release = threading.Event(), threading.Event()

    def load_image(self, chunks):
        data = list(chunks)
        if not self.loading.is_set():
            self.loading.set()
            assert self.release.wait(30), "test never released the first load"
        return super().load_image(data)


def test_one_copy_of_an_image_to_a_node_at_a_time() -> None:
    """A second copy of the same image to the same node waits for the first and then finds it there."""
    fleet = Fleet(control_images={LOCAL_IMAGE})
    target = GatedRuntime()
    results: dict[str, object] = {}
    first = threading.Thread(target=lambda: results.update(first=fleet.copier.copy(target, LOCAL_IMAGE, node=NODE)))
    first.start()
    assert target.loading.wait(30)
    second = threading.Thread(target=lambda: results.update(second=fleet.copier.copy(target, LOCAL_IMAGE, node=NODE)))
    second.start()
    second.join(0.5)
    assert second.is_alive(), "the second copy did not wait for the first"
    target.release.set()
    first.join(30)
    second.join(30)
    assert results["first"].source == CONTROL_HOST and results["second"].source is None
    assert fleet.control.count("save_image") == 1 and target.count("load_image") == 1


def test_copies_of_other_images_do_not_wait() -> None:
    """While one image is being copied to a node, another image reaches it."""
    fleet = Fleet(control_images={LOCAL_IMAGE, "localhost/other:1"})
    target = GatedRuntime()
    first = threading.Thread(target=lambda: fleet.copier.copy(target, LOCAL_IMAGE, node=NODE))
    first.start()
    try:
        assert target.loading.wait(30)
        assert fleet.copier.copy(target, "localhost/other:1", node=NODE).source == CONTROL_HOST
    finally:
        target.release.set()
        first.join(30)
    assert {LOCAL_IMAGE, "localhost/other:1"} <= target.images


def test_copy_image_streams_between_memory_runtimes() -> None:
    """save_image -> load_image moves the image and counts the bytes; a missing one is ImageNotFound."""
    source, target = MemoryRuntime(images={LOCAL_IMAGE}), MemoryRuntime()
    names, size = copy_image(source, target, LOCAL_IMAGE)
    assert names == [LOCAL_IMAGE] and size > 0 and target.images == {LOCAL_IMAGE}
    with pytest.raises(ImageNotFound):
        copy_image(source, target, "localhost/missing:1")


@pytest.mark.parametrize(("ref", "listed", "expected"), [
    ("busybox:demo", "localhost/busybox:demo", True),
    ("nginx", "docker.io/library/nginx:latest", True),
    ("localhost/busybox:demo", "localhost/busybox:demo", True),
    ("localhost/busybox:demo", "localhost/busybox:other", False),
], ids=["short-name-local", "docker-hub", "exact", "other-tag"])
def test_holds_uses_normalised_names(ref: str, listed: str, expected: bool) -> None:
    """A Node's status.images is matched under the names Podman resolves a reference to."""
    assert holds(node_object("n2", [listed]), ref) is expected


@pytest.mark.parametrize(("ref", "registry", "may_have"), [
    ("localhost/app:1", "localhost", False), ("nginx", "docker.io", True), ("me/app", "docker.io", True),
    ("quay.io/a/b:1", "quay.io", True), ("localhost:5000/app", "localhost:5000", True),
    ("index.docker.io/library/nginx", "docker.io", True),
], ids=["localhost", "bare", "hub-user", "quay", "local-registry", "hub-alias"])
def test_registry_of(ref: str, registry: str, may_have: bool) -> None:
    """The registry of a reference, and whether one may serve it (never for localhost/)."""
    assert registry_of(ref) == registry and registry_may_have(ref) is may_have


# -- imagePullSecrets ------------------------------------------------------------------------------


def pull_secret(name: str, auths: dict, *, kind: str = "kubernetes.io/dockerconfigjson") -> dict:
    document = {"auths": auths} if kind == "kubernetes.io/dockerconfigjson" else auths
    key = ".dockerconfigjson" if kind == "kubernetes.io/dockerconfigjson" else ".dockercfg"
    return {"apiVersion": "v1", "kind": "Secret", "type": kind, "metadata": {"name": name, "namespace": "default"},
            "data": {key: base64.b64encode(json.dumps(document).encode()).decode()}}


def _lookup(*secrets: dict):
    found = {s["metadata"]["name"]: s for s in secrets}
    return lambda kind, namespace, name: found.get(name) if kind == "Secret" and namespace == "default" else None


USER_PASS = {"username": "u", "password": "p"}


@pytest.mark.parametrize(("auths", "ref", "expected"), [
    ({"example.org": USER_PASS}, "example.org/app:1", ("u", "p")),
    ({"https://example.org/v2/": USER_PASS}, "example.org/app:1", ("u", "p")),
    ({"example.org": {"auth": base64.b64encode(b"u2:p:2").decode()}}, "example.org/app:1", ("u2", "p:2")),
    ({"https://index.docker.io/v1/": USER_PASS}, "nginx", ("u", "p")),
    ({"*.example.org": USER_PASS}, "r.example.org/app", ("u", "p")),
    ({"example.org/team": USER_PASS}, "example.org/team/app:1", ("u", "p")),
    ({"example.org/team": USER_PASS}, "example.org/other/app:1", None),
    ({"example.org": USER_PASS, "example.org/team": {"username": "t", "password": "q"}},
     "example.org/team/app:1", ("t", "q")),
    ({"quay.io": USER_PASS}, "example.org/app:1", None),
], ids=["host", "url", "auth-field", "docker-hub", "glob", "path", "other-path", "most-specific", "other-registry"])
def test_pull_auth_from_dockerconfigjson(auths: dict, ref: str, expected: tuple | None) -> None:
    """The credentials a pod's imagePullSecrets hold for the image's registry, as the kubelet picks them."""
    pod = make_pod(imagePullSecrets=[{"name": "regcred"}])
    auth, missing = pull_auth(pod, ref, _lookup(pull_secret("regcred", auths)))
    assert missing == []
    assert (auth.username, auth.password) == expected if expected else auth is None


def test_pull_auth_dockercfg_and_missing_secret() -> None:
    """A legacy dockercfg Secret works; a secret that does not exist is reported, not fatal."""
    pod = make_pod(imagePullSecrets=[{"name": "absent"}, {"name": "old"}])
    old = pull_secret("old", {"example.org": USER_PASS}, kind="kubernetes.io/dockercfg")
    auth, missing = pull_auth(pod, REMOTE_IMAGE, _lookup(old))
    assert auth == RegistryAuth(username="u", password="p", registry="example.org") and missing == ["absent"]


def test_pull_passes_the_secret_and_never_shows_it(node: Harness) -> None:
    """The pull gets the pod's credentials; events and the RegistryAuth's repr do not show them."""
    node.put(pull_secret("regcred", {"example.org": {"username": "alice", "password": "s3cret"}}))
    node.runtime.pullable.add(REMOTE_IMAGE)
    node.sync(make_pod(containers=[container("app", image=REMOTE_IMAGE)], imagePullSecrets=[{"name": "regcred"}]))
    assert "running" in node.status("app")["state"]
    (call,) = node.runtime.calls_to("pull_image")
    assert call[2] == RegistryAuth(username="alice", password="s3cret", registry="example.org")
    assert "s3cret" not in repr(call[2]) and "alice" not in repr(call[2])
    assert all("s3cret" not in e.message for e in node.events)


def test_missing_pull_secret_is_a_warning_and_the_pull_goes_on(node: Harness) -> None:
    """kubelet's FailedToRetrieveImagePullSecret, then the pull without credentials."""
    node.runtime.pullable.add(REMOTE_IMAGE)
    node.sync(make_pod(containers=[container("app", image=REMOTE_IMAGE)], imagePullSecrets=[{"name": "nope"}]))
    warning = event(node, "FailedToRetrieveImagePullSecret")
    assert warning.type == "Warning" and "(nope)" in warning.message
    assert node.runtime.calls_to("pull_image") == [("pull_image", REMOTE_IMAGE)]
    assert "running" in node.status("app")["state"]


# -- Podman runtime helpers ------------------------------------------------------------------------


@pytest.mark.parametrize(("tags", "ref", "expected"), [
    (["localhost/busybox:demo"], "localhost/busybox:demo", "localhost/busybox:demo"),
    (["localhost/busybox:demo"], "busybox:demo", "localhost/busybox:demo"),
    (["localhost/a:1", "localhost/busybox:latest"], "busybox", "localhost/busybox:latest"),
    (["localhost/a:1"], "sha256abc", "localhost/a:1"),
    ([], "sha256abc", ""),
], ids=["exact", "short", "implicit-latest", "by-id", "untagged"])
def test_saved_name(tags: list[str], ref: str, expected: str) -> None:
    """save_image names the archive after the tag the reference stands for."""
    assert saved_name(tags, ref) == expected


def test_registry_auth_header_is_podman_py_encoding() -> None:
    """X-Registry-Auth: URL-safe base64 of the JSON credentials, as podman-py's encode_auth_header."""
    header = registry_auth_header(RegistryAuth(username="u", password="p?>", registry="r.io"))
    assert json.loads(base64.urlsafe_b64decode(header)) == {"username": "u", "password": "p?>", "serveraddress": "r.io"}
