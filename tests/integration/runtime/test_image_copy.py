"""Copying an image between two real Podman services, over unix sockets and over ssh://.

The session's `podman_service` (tests/integration/conftest.py) holds localhost/busybox:demo;
`other_service` is a second private service with its own storage, made and torn down
the same way, which starts without the image. Each test starts from an `other_service`
without the image and leaves none behind.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from typing import Iterator

import pytest
from podman import PodmanClient

from kctl.agent.images import CONTROL_HOST, ImageCopier, LocalPodman, copy_image
from kctl.runtime.interface import LABEL_MANAGED, ContainerSpec, ImageNotFound, PodSandboxSpec, RuntimeError_
from kctl.runtime.podman import PodmanRuntime
from kctl.runtime.service import LocalPodmanService

from ..conftest import SERVICE_START_TIMEOUT, PodmanTestService, _settings, _tear_down, remove_everything

pytestmark = pytest.mark.integration

IMAGE = "localhost/busybox:demo"


@pytest.fixture(scope="module")
def other_service() -> Iterator[PodmanTestService]:
    """A second private Podman service (own storage, socket, containers.conf), torn down after."""
    folder = tempfile.mkdtemp(prefix="kctl-it-other-")
    service: LocalPodmanService | None = None
    try:
        settings = _settings(folder)
        service = LocalPodmanService.ensure(settings.socket, conf=settings.conf, root=settings.root,
                                           runroot=settings.runroot, timeout=SERVICE_START_TIMEOUT)
        if not service.owned:
            pytest.fail(f"a Podman service already answers on {settings.socket}")
        yield settings
    finally:
        _tear_down(folder, service)


def _remove_image(service: PodmanTestService) -> None:
    with PodmanClient(base_url=service.url, timeout=60) as client:
        if client.images.exists(IMAGE):
            client.images.remove(IMAGE, force=True)


@pytest.fixture
def target(other_service: PodmanTestService) -> Iterator[PodmanTestService]:
    """other_service without the image, before and after the test."""
    _remove_image(other_service)
    try:
        yield other_service
    finally:
        with contextlib.closing(PodmanRuntime(other_service.url)) as runtime:
            remove_everything(runtime, labels={LABEL_MANAGED: "true"})
        _remove_image(other_service)


def _image_id(runtime: PodmanRuntime) -> str:
    return next(image.id for image in runtime.list_images() if IMAGE in image.names)


def test_copy_over_unix_sockets_gives_a_runnable_image(podman_service: PodmanTestService,
                                                       target: PodmanTestService) -> None:
    """save_image streams in several chunks; load_image gives the same image id, and it runs."""
    with contextlib.closing(PodmanRuntime(podman_service.url)) as source, \
            contextlib.closing(PodmanRuntime(target.url)) as destination:
        assert not destination.image_present(IMAGE)
        chunks = source.save_image(IMAGE)
        first = next(chunks)
        assert 0 < len(first) < 2 * 1024 * 1024  # a chunk, not the whole archive
        names = destination.load_image([first, *chunks])
        assert names == [IMAGE]
        assert destination.image_present(IMAGE) and _image_id(destination) == _image_id(source)
        pod = destination.create_pod(PodSandboxSpec(name="kctl-image-copy", labels={"test": "image-copy"}))
        container = destination.create_container(pod.id, ContainerSpec(
            name="kctl-image-copy-run", image=IMAGE, labels={"test": "image-copy"},
            entrypoint=["/bin/sh", "-c", "exit 7"]))
        destination.start_container(container)
        deadline = time.monotonic() + 60
        state = destination.inspect_container(container)
        while state.state != "exited" and time.monotonic() < deadline:
            time.sleep(0.05)
            state = destination.inspect_container(container)
        assert (state.state, state.exit_code) == ("exited", 7)


def test_copy_over_ssh(podman_service: PodmanTestService, target: PodmanTestService, sshd) -> None:
    """Both ends reached through ssh:// tunnels (host keys checked): the image arrives whole."""
    def over_ssh(service: PodmanTestService) -> PodmanRuntime:
        return PodmanRuntime(sshd.podman_url(service.socket), identity=sshd.identity, known_hosts=sshd.known_hosts)

    with contextlib.closing(over_ssh(podman_service)) as source, contextlib.closing(over_ssh(target)) as destination:
        names, size = copy_image(source, destination, IMAGE)
        assert names == [IMAGE] and size > 1_000_000
        assert destination.image_present(IMAGE) and _image_id(destination) == _image_id(source)


def test_copier_takes_the_control_host_image_to_a_remote_node(podman_service: PodmanTestService,
                                                                target: PodmanTestService, sshd) -> None:
    """ImageCopier: the control host's local Podman (unix) to a node's Podman over ssh://."""
    control = LocalPodman([f"unix://{podman_service.folder}/absent.sock", podman_service.url])
    copier = ImageCopier(control=control)
    try:
        with contextlib.closing(PodmanRuntime(sshd.podman_url(target.socket), identity=sshd.identity,
                                              known_hosts=sshd.known_hosts)) as node:
            result = copier.copy(node, IMAGE, node="remote")
            assert result.source == CONTROL_HOST and node.image_present(IMAGE)
            assert copier.copy(node, IMAGE, node="remote").source is None  # there now: nothing to do
    finally:
        copier.close()


def test_a_source_failing_midway_fails_the_load(podman_service: PodmanTestService,
                                               target: PodmanTestService) -> None:
    """The source's error ends the upload and is what load_image raises; the target stays usable."""
    def broken(chunks):
        yield next(chunks)
        raise RuntimeError_("save image localhost/busybox:demo: connection lost")

    with contextlib.closing(PodmanRuntime(podman_service.url)) as source, \
            contextlib.closing(PodmanRuntime(target.url)) as destination:
        chunks = source.save_image(IMAGE)
        with pytest.raises(RuntimeError_, match="connection lost"):
            destination.load_image(broken(chunks))
        chunks.close()
        assert not destination.image_present(IMAGE)
        assert copy_image(source, destination, IMAGE)[0] == [IMAGE]


def test_saving_a_missing_image_is_image_not_found(podman_service: PodmanTestService) -> None:
    """A host without the image answers ImageNotFound at once, before any byte is streamed."""
    with contextlib.closing(PodmanRuntime(podman_service.url)) as source:
        with pytest.raises(ImageNotFound):
            source.save_image("localhost/absent:1")


def test_daemon_copies_a_control_host_image_to_a_remote_pod(api, store, podman_service: PodmanTestService,
                                                             target: PodmanTestService, sshd, tmp_path) -> None:
    """The issue's scenario: an image present only on the control host reaches a pod on a node over SSH."""
    from ..agent.conftest import Daemon, wait_for

    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "remote", "annotations": {
        "kctl.io/podman-url": sshd.podman_url(target.socket),
        "kctl.io/ssh-identity": sshd.identity, "kctl.io/ssh-known-hosts": sshd.known_hosts}}})
    api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "far", "namespace": "default"},
                "spec": {"nodeName": "remote", "terminationGracePeriodSeconds": 1, "containers": [
                    {"name": "app", "image": IMAGE, "command": ["sleep", "600"]}]}})
    daemon = Daemon(store=store.path, url=target.url, log=tmp_path / "daemon.log",
                    extra=("--image-source", podman_service.url, "--no-controllers"))
    daemon.start()
    try:
        def running() -> dict | None:
            pod = api.get(api.resource("pods"), "far", namespace="default")
            return pod if (pod.get("status") or {}).get("phase") == "Running" else None

        wait_for(running, what="pod far Running on the remote node", daemon=daemon)
        events = api.list(api.resource("events"), namespace="default")[0]
        copied = [e for e in events if e.get("reason") == "ImageCopied"]
        assert len(copied) == 1 and copied[0]["message"].startswith(f'Copied image "{IMAGE}" from control host in ')
        api.delete(api.resource("pods"), "far", namespace="default")
        wait_for(lambda: not api.list(api.resource("pods"), namespace="default")[0],
                 what="the remote pod deleted", daemon=daemon)
    finally:
        daemon.stop()
