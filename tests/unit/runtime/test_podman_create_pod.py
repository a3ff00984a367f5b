"""PodmanRuntime.create_pod's calls: create (naming the infra container), start, one inspect of that name for the IP."""

from __future__ import annotations

from typing import Any

import pytest

from kctl.runtime.interface import PodSandboxSpec, PortMapping, RuntimeError_
from kctl.runtime.podman.pods import INFRA_SUFFIX, PodSandboxes

POD_ID = "p" * 64
INFRA = {"Id": "i" * 64, "NetworkSettings": {"Networks": {"podman": {"IPAddress": "10.88.0.7"}}}}


class _Answer:
    def __init__(self, status: int, body: Any) -> None:
        self.status_code, self.body = status, body

    def json(self) -> Any:
        return self.body

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise RuntimeError_(f"HTTP {self.status_code}")


class _Scripted(PodSandboxes):
    """PodSandboxes whose calls are recorded; the pod start answers `start`."""

    def __init__(self, start: _Answer) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.start = start

    def _post(self, path: str, *, params: dict | None = None, body: Any = None, timeout: float | None = None) -> Any:
        self.calls.append(("POST", path, body))
        return _Answer(201, {"Id": POD_ID})

    def _get(self, path: str, *, params: dict | None = None, timeout: float | None = None) -> Any:
        self.calls.append(("GET", path, None))
        return INFRA

    def _delete(self, path: str, *, params: dict | None = None) -> None:
        self.calls.append(("DELETE", path, None))

    def _api(self) -> Any:
        runtime = self

        class _API:
            def post(self, path: str, **_: Any) -> _Answer:
                runtime.calls.append(("POST", path, None))
                return runtime.start if path.endswith("/start") else _Answer(204, None)
        return _API()


SPEC = PodSandboxSpec(name="kctl_default_web_01234567", labels={"io.kctl.pod-uid": "u"},
                      port_mappings=(PortMapping(container_port=8080, host_port=18080),))


def test_create_start_and_one_inspect_of_the_named_infra() -> None:
    """Three calls: the create names the infra container, the start, the IP from an inspect of that name."""
    runtime = _Scripted(_Answer(200, {"Errs": None, "Id": POD_ID}))
    sandbox = runtime.create_pod(SPEC)
    infra_name = SPEC.name + INFRA_SUFFIX
    assert [(method, path) for method, path, _ in runtime.calls] == [
        ("POST", "/pods/create"), ("POST", f"/pods/{POD_ID}/start"), ("GET", f"/containers/{infra_name}/json")]
    assert runtime.calls[0][2]["infra_name"] == infra_name
    assert (sandbox.id, sandbox.running, sandbox.ip) == (POD_ID, True, "10.88.0.7")


def test_a_failed_start_removes_the_pod() -> None:
    """The start's first error is raised, and the half-made pod is removed (killed, then deleted)."""
    runtime = _Scripted(_Answer(500, {"Errs": ["cannot listen on the TCP port 18080: address already in use"]}))
    with pytest.raises(RuntimeError_, match="address already in use"):
        runtime.create_pod(SPEC)
    assert runtime.calls[-1] == ("DELETE", f"/pods/{POD_ID}", None)
    assert not any(method == "GET" for method, _, _ in runtime.calls)
