"""The `runtime` fixture of the runtime contract suite: the same tests on MemoryRuntime and PodmanRuntime.

`runtime` is module-scoped and parametrized over ["memory", "podman"]: every test of
tests/integration/contract runs once against kctl.runtime.memory.MemoryRuntime (holding
the demo image, on the real clock) and once against kctl.runtime.podman.PodmanRuntime on
the session's private Podman service (tests/integration/conftest.py). Everything a test
makes carries CONTRACT_LABEL with this run's RUN value; the Podman half's teardown
removes exactly what carries it (pods in parallel), also when a test failed.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Iterator

import pytest

from kctl.runtime.interface import LABEL_MANAGED, PodSandbox, PodSandboxSpec, Runtime
from kctl.runtime.memory import MemoryRuntime

from ..conftest import DEMO_IMAGE, remove_everything

CONTRACT_LABEL = "io.kctl.test.contract"
RUN = uuid.uuid4().hex[:10]  # this run's label value: teardown removes only what carries it


def contract_labels(**extra: str) -> dict[str, str]:
    """The labels every object of this suite carries (plus `extra`)."""
    return {LABEL_MANAGED: "true", CONTRACT_LABEL: RUN, **extra}


def unique(prefix: str) -> str:
    """A name no other test (or run) uses."""
    return f"kctl-ct-{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module", params=["memory", "podman"])
def runtime(request: pytest.FixtureRequest) -> Iterator[Runtime]:
    """One runtime per module and kind: MemoryRuntime, or PodmanRuntime on the private service."""
    if request.param == "memory":
        yield MemoryRuntime(images={DEMO_IMAGE})
        return
    from kctl.runtime.podman import PodmanRuntime

    service = request.getfixturevalue("podman_service")
    podman = PodmanRuntime(service.url)
    try:
        yield podman
    finally:
        with contextlib.suppress(Exception):
            remove_everything(podman, labels={CONTRACT_LABEL: RUN})
        podman.close()


@pytest.fixture(scope="module")
def pod(runtime: Runtime) -> PodSandbox:
    """A pod sandbox shared by the module's container tests (removed with the runtime's leftovers)."""
    name = unique("shared")
    return runtime.create_pod(PodSandboxSpec(name=name, labels=contract_labels(pod=name)))
