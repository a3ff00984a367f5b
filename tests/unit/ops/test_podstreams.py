"""kctl.ops.podstreams: which container instance logs and exec reach, and Kubernetes' words when none can be."""

from __future__ import annotations

import pytest

from kctl.ops import podstreams
from kctl.ops.podstreams import ContainerNotRunning, LogOptions, PodStreamError
from kctl.runtime.interface import LABEL_CONTAINER, LABEL_POD_UID, LABEL_RESTART, ContainerSpec, PodSandboxSpec
from kctl.runtime.memory import MemoryRuntime

IMAGE = "localhost/busybox:latest"


def make_pod(*, containers: tuple[str, ...] = ("a", "b"), inits: tuple[str, ...] = (), annotations: dict | None = None,
             status: dict | None = None) -> dict:
    return {"metadata": {"name": "web", "uid": "u1", "annotations": annotations or {}},
            "spec": {"containers": [{"name": n} for n in containers],
                     "initContainers": [{"name": n} for n in inits]},
            "status": status or {}}


@pytest.fixture
def runtime() -> MemoryRuntime:
    return MemoryRuntime(images={IMAGE})


def start(runtime: MemoryRuntime, container: str, command: list[str], *, restart: int = 0) -> str:
    sandbox = runtime.create_pod(PodSandboxSpec(name=f"web-{container}-{restart}", labels={LABEL_POD_UID: "u1"}))
    cid = runtime.create_container(sandbox.id, ContainerSpec(
        name=f"web-{container}-{restart}", image=IMAGE, command=command,
        labels={LABEL_POD_UID: "u1", LABEL_CONTAINER: container, LABEL_RESTART: str(restart)}))
    runtime.start_container(cid)
    return cid


@pytest.mark.parametrize(("pod", "asked", "chosen"), [
    (make_pod(containers=("a",)), None, "a"),
    (make_pod(annotations={podstreams.DEFAULT_CONTAINER_ANNOTATION: "b"}), None, "b"),
    (make_pod(inits=("setup",)), "setup", "setup"),
    (make_pod(), "a", "a"),
], ids=["only-one", "annotation", "init-container", "named"])
def test_choose_container(pod: dict, asked: str | None, chosen: str) -> None:
    """The named container, the annotated default, or the only one."""
    assert podstreams.choose_container(pod, asked) == chosen


@pytest.mark.parametrize(("pod", "asked", "message"), [
    (make_pod(), None, "a container name must be specified for pod web, choose one of: [a b]"),
    (make_pod(inits=("setup",)), None, "a container name must be specified for pod web, choose one of: [a b] "
                                       "or one of the init containers: [setup]"),
    (make_pod(), "zz", "container zz is not valid for pod web"),
], ids=["several", "several-and-inits", "unknown"])
def test_choose_container_errors(pod: dict, asked: str | None, message: str) -> None:
    """No single choice: Kubernetes' BadRequest text."""
    with pytest.raises(PodStreamError) as raised:
        podstreams.choose_container(pod, asked)
    assert (raised.value.message, raised.value.code) == (message, 400)


@pytest.mark.parametrize(("status", "reason"), [
    ({}, "ContainerCreating"),
    ({"containerStatuses": [{"name": "a", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}, "ImagePullBackOff"),
    ({"containerStatuses": [{"name": "b", "state": {"waiting": {"reason": "ErrImagePull"}}}]}, "ContainerCreating"),
], ids=["no-status", "from-status", "other-container"])
def test_waiting_container_names_the_pods_reason(runtime: MemoryRuntime, status: dict, reason: str) -> None:
    """A container with no instance yet is `waiting to start` with the reason its status gives."""
    with pytest.raises(PodStreamError, match=f'container "a" in pod "web" is waiting to start: {reason}$'):
        podstreams.log_instance(runtime, make_pod(status=status), LogOptions(container="a"))


def test_log_instance_current_and_previous(runtime: MemoryRuntime) -> None:
    """The current instance is the latest restart; previous the one before it."""
    old = start(runtime, "a", ["sh", "-c", "echo old"], restart=0)
    new = start(runtime, "a", ["sleep", "1000"], restart=1)
    assert podstreams.log_instance(runtime, make_pod(), LogOptions(container="a")).id == new
    assert podstreams.log_instance(runtime, make_pod(), LogOptions(container="a", previous=True)).id == old


@pytest.mark.parametrize(("limit", "expected"), [
    (None, b"one\ntwo\n"), (5, b"one\nt"), (4, b"one\n"), (100, b"one\ntwo\n"),
], ids=["no-limit", "mid-chunk", "chunk-edge", "over"])
def test_log_chunks_cut_at_limit_bytes(runtime: MemoryRuntime, limit: int | None, expected: bytes) -> None:
    """limitBytes cuts the log at that many bytes, across chunks."""
    cid = start(runtime, "a", ["sh", "-c", "echo one; echo two"])
    assert b"".join(podstreams.log_chunks(runtime, cid, LogOptions(limit_bytes=limit))) == expected


def test_running_instance_refusals(runtime: MemoryRuntime) -> None:
    """No running instance: `container not found`; a completed pod: kubectl's words with its phase."""
    with pytest.raises(ContainerNotRunning, match=r'^container not found \("a"\)$'):
        podstreams.running_instance(runtime, make_pod(), "a")
    with pytest.raises(PodStreamError, match="cannot exec into a container in a completed pod; current phase is "
                                             "Succeeded"):
        podstreams.running_instance(runtime, make_pod(status={"phase": "Succeeded"}), "a")
    cid = start(runtime, "a", ["sleep", "1000"])
    assert podstreams.running_instance(runtime, make_pod(), "a").id == cid


def test_default_exec_container_says_which_of_several() -> None:
    """exec's default is the first container, with kubectl's note when there are several."""
    assert podstreams.default_exec_container(make_pod(containers=("a",))) == ("a", "")
    assert podstreams.default_exec_container(make_pod()) == ("a", 'Defaulted container "a" out of: a, b')
