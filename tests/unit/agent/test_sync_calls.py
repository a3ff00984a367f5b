"""The Podman calls one pod sync makes: none that the pod does not need (apply -> serving latency, issue 13)."""

from __future__ import annotations

from podharness import Harness, container, make_pod


def test_pod_without_named_volumes_lists_no_volumes(node: Harness) -> None:
    """Syncing a pod with no emptyDir or PVC volume never asks the runtime for its volumes (a call per sync)."""
    node.sync(make_pod(containers=[container("app")]))
    node.sync()
    assert node.runtime.count("create_container") == 1
    assert node.runtime.count("list_volumes") == 0
