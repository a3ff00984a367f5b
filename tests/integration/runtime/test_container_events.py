"""PodmanRuntime.container_events against the real, private Podman service, on its socket and over SSH.

A container of a Podman pod is killed with the podman CLI, behind the runtime's back;
the stream must bring its death (with the exit code and the pod-uid label) within a few
seconds, and close() from another thread must end a quiet stream at once.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from typing import Iterator

import pytest

from kctl.runtime.interface import (
    DEATH_EVENTS,
    LABEL_MANAGED,
    LABEL_POD_UID,
    ContainerEvent,
    ContainerSpec,
    PodSandboxSpec,
)
from kctl.runtime.podman import PodmanRuntime

pytestmark = pytest.mark.integration

IMAGE = "localhost/busybox:demo"
BOUND = 3.0  # seconds a death may take to come through the stream (measured: about 0.3 s)


@pytest.fixture(params=["unix", "ssh"])
def events_runtime(request, runtime: PodmanRuntime, podman_service) -> Iterator[PodmanRuntime]:
    """The session's service reached on its socket, or through the private sshd (closed after)."""
    if request.param == "unix":
        yield runtime
        return
    sshd = request.getfixturevalue("sshd")
    remote = PodmanRuntime(sshd.podman_url(podman_service.socket), identity=sshd.identity,
                           known_hosts=sshd.known_hosts)
    try:
        yield remote
    finally:
        remote.close()


def podman(podman_service, *args: str) -> None:
    subprocess.run(["podman", "--url", podman_service.url, *args], check=True, capture_output=True, timeout=60)


def test_kill_behind_the_back_streams_a_death(events_runtime: PodmanRuntime, runtime: PodmanRuntime,
                                             podman_service) -> None:
    """`podman kill` of a kctl container brings one "died" event with exit code 137 and the pod uid."""
    uid = f"uid-{uuid.uuid4().hex[:8]}"
    labels = {LABEL_MANAGED: "true", LABEL_POD_UID: uid}
    pod = runtime.create_pod(PodSandboxSpec(name=f"ev-{uid}", labels=labels))
    container_id = runtime.create_container(pod.id, ContainerSpec(
        name=f"ev-{uid}-app", image=IMAGE, labels=labels, command=["sleep", "1000"]))
    runtime.start_container(container_id)
    stream = events_runtime.container_events({LABEL_MANAGED: "true", LABEL_POD_UID: uid}, events=DEATH_EVENTS)
    got: list[ContainerEvent] = []
    arrived = threading.Event()

    def read() -> None:
        for event in stream:
            got.append(event)
            arrived.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        killed = time.monotonic()
        podman(podman_service, "kill", container_id)
        assert arrived.wait(BOUND), f"no event within {BOUND} s"
        latency = time.monotonic() - killed
        event = got[0]
        assert (event.container_id, event.event, event.exit_code, event.pod_uid) == (container_id, "died", 137, uid)
        assert latency < BOUND
    finally:
        closed = time.monotonic()
        stream.close()
        reader.join(10)
    assert not reader.is_alive() and time.monotonic() - closed < 5


def test_events_of_other_containers_are_filtered_out(runtime: PodmanRuntime, podman_service) -> None:
    """A container without the subscribed labels (here: not kctl's) never reaches the stream."""
    uid = f"uid-{uuid.uuid4().hex[:8]}"
    stream = runtime.container_events({LABEL_MANAGED: "true", LABEL_POD_UID: uid}, events=DEATH_EVENTS)
    got: list[ContainerEvent] = []
    reader = threading.Thread(target=lambda: got.extend(stream), daemon=True)
    reader.start()
    name = f"kctl-it-foreign-{uid}"
    try:
        podman(podman_service, "run", "--name", name, "--label", f"other={uid}", IMAGE, "true")
        time.sleep(1.0)  # longer than Podman's event log poll (0.25 s)
    finally:
        subprocess.run(["podman", "--url", podman_service.url, "rm", "-f", name], capture_output=True, timeout=60)
        stream.close()
        reader.join(10)
    assert got == []
