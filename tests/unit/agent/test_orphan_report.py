"""An orphan (a kctl-labelled Podman pod no Pod owns) is reported once, removed or stuck.

The agent cleans orphans up after its first list and again in the fence before its
node is Ready (kctl/agent/agent.py); a stuck orphan used to be warned about by both.
"""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from kctl.agent.agent import NodeAgent
from kctl.agent.node import register_node
from kctl.runtime.interface import LABEL_MANAGED, LABEL_POD_UID, PodSandboxSpec, RuntimeError_
from kctl.runtime.memory import MemoryRuntime


def _ready(api, name: str) -> bool:
    node = api.get(api.resource("nodes"), name)
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


@pytest.mark.parametrize("stuck", [False, True], ids=["removed", "stuck"])
def test_orphan_reported_once(api, caplog, stuck):
    """The start-up clean-up and the fence before Ready say it once between them."""
    register_node(api, "n1", podman_url="unix:///nowhere.sock")
    runtime = MemoryRuntime(images=["busybox"])
    name = f"kctl_default_gone_{uuid.uuid4().hex[:8]}"
    runtime.create_pod(PodSandboxSpec(name=name, labels={
        LABEL_MANAGED: "true", LABEL_POD_UID: f"uid-{name}", "io.kctl.pod.name": "gone",
        "io.kctl.pod.namespace": "default"}))
    if stuck:
        def refuse(pod_id: str) -> None:
            raise RuntimeError_("device or resource busy")

        runtime.remove_pod = refuse  # type: ignore[method-assign]
    agent = NodeAgent(api, "n1", runtime, heartbeat_interval=0.2)
    with caplog.at_level(logging.INFO, logger="kctl.agent"):
        agent.start()
        try:
            deadline = time.monotonic() + 30
            while not _ready(api, "n1"):  # Ready comes after the fence
                assert time.monotonic() < deadline, "the node never became Ready"
                time.sleep(0.05)
        finally:
            agent.stop()
    said = [r for r in caplog.records if name in r.getMessage() and r.levelno >= logging.INFO]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert (said[0].levelno == logging.WARNING) is stuck
