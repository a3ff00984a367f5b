"""The Podman calls one pod sync makes: none that the pod does not need (apply -> serving latency, issue 13)."""

from __future__ import annotations

import pytest
from podharness import Harness, container, make_pod


def test_pod_without_named_volumes_lists_no_volumes(node: Harness) -> None:
    """Syncing a pod with no emptyDir or PVC volume never asks the runtime for its volumes (a call per sync)."""
    node.sync(make_pod(containers=[container("app")]))
    node.sync()
    assert node.runtime.count("create_container") == 1
    assert node.runtime.count("list_volumes") == 0


def _methods(node: Harness) -> list[str]:
    return [call[0] for call in node.runtime.calls]


@pytest.mark.parametrize("policy", ["IfNotPresent", "Never"])
def test_new_pod_goes_from_sandbox_to_container_without_looking(node: Harness, policy: str) -> None:
    """A sandbox just made holds no container, and the create finds the image: nothing is listed or asked between."""
    node.sync(make_pod(containers=[container("app", imagePullPolicy=policy)]))
    methods = _methods(node)
    assert methods[methods.index("create_pod"):methods.index("start_container") + 1] == [
        "create_pod", "create_container", "start_container"]
    assert node.runtime.count("image_present") == 0 and "running" in node.status("app")["state"]
    assert node.reasons()[:3] == ["Pulled", "Created", "Started"]  # the kubelet's order, "already present"
    assert "already present on machine" in node.events[0].message


def test_adopted_sandbox_is_listed(node: Harness) -> None:
    """A later sync (a sandbox found, not made) lists its containers: the running one is kept, not made again."""
    node.sync(make_pod(containers=[container("app")]))
    listed = node.runtime.count("list_containers")
    node.sync()
    assert node.runtime.count("list_containers") > listed
    assert node.runtime.count("create_container") == 1 and node.runtime.count("create_pod") == 1


def test_if_not_present_pulls_when_the_create_finds_no_image(node: Harness) -> None:
    """IfNotPresent: the create says the image is missing, so it is pulled and the create made again."""
    image = "example.org/app:1"
    node.runtime.pullable.add(image)
    node.sync(make_pod(containers=[container("app", image=image)]))
    assert node.runtime.count("pull_image") == 1 and node.runtime.count("create_container") == 2
    assert "running" in node.status("app")["state"]
    assert [r for r in node.reasons() if r in ("Pulling", "Pulled", "Created")] == ["Pulling", "Pulled", "Created"]
    assert "already present" not in " ".join(e.message for e in node.events)


def test_always_pulls_before_the_create(node: Harness) -> None:
    """Always: the pull comes first, whether or not the image is there."""
    node.sync(make_pod(containers=[container("app", imagePullPolicy="Always")]))
    methods = _methods(node)
    assert methods.index("pull_image") < methods.index("create_container")
    assert node.runtime.count("create_container") == 1
