"""The names a node may list an image under (kctl.client.imagenames), shared by the scheduler and the agents."""

from __future__ import annotations

import pytest

from kctl.client.imagenames import normalized_image_names


@pytest.mark.parametrize("image,expected", [
    ("nginx", ("nginx", "nginx:latest", "docker.io/library/nginx:latest", "localhost/nginx:latest")),
    ("nginx:1.25", ("nginx:1.25", "docker.io/library/nginx:1.25", "localhost/nginx:1.25")),
    ("quay.io/x/y:2", ("quay.io/x/y:2",)),
    ("me/app", ("me/app", "me/app:latest", "docker.io/me/app:latest", "localhost/me/app:latest")),
    ("localhost/busybox:demo", ("localhost/busybox:demo",)),
], ids=["bare", "tagged", "registry", "docker-hub-user", "localhost"])
def test_normalized_names(image, expected):
    """An image is looked up under the names a node may list it by."""
    assert normalized_image_names(image) == expected


def test_the_agent_and_the_scheduler_match_names_alike():
    """The node agents' image copier and the ImageLocality plugin use this one function."""
    from kctl.agent.images import image_names
    from kctl.scheduler.plugins import image_locality

    assert image_locality.normalized_image_names is normalized_image_names
    assert image_names("nginx") == normalized_image_names("nginx")
