"""ImageLocality: nodes that already hold the pod's image score higher."""

from __future__ import annotations

from plugin_harness import handle_for, make_node, make_pod, run_score, snapshot_of

from kctl.scheduler.plugins.image_locality import ImageLocality

MB = 1024 * 1024


def _scores(nodes: list[dict], image: str) -> dict[str, int]:
    snapshot = snapshot_of(nodes)
    return run_score(ImageLocality(handle=handle_for(snapshot)), make_pod("p", image=image), snapshot)


def test_node_with_image_wins():
    """A 500 MB image present on one of two nodes gives that node a score, the other 0."""
    nodes = [make_node("has", images=[("docker.io/library/nginx:latest", 500 * MB)]), make_node("lacks")]
    scores = _scores(nodes, "nginx")
    assert scores["lacks"] == 0 and scores["has"] > 0


def test_short_name_matches_a_locally_built_image():
    """busybox:demo in a pod is the localhost/busybox:demo a node lists (Podman's short-name lookup)."""
    nodes = [make_node("has", images=[("localhost/busybox:demo", 500 * MB)]), make_node("lacks")]
    scores = _scores(nodes, "busybox:demo")
    assert scores["lacks"] == 0 and scores["has"] > 0


def test_small_images_do_not_count():
    """Below the 23 MB threshold an image is not worth moving a pod for."""
    nodes = [make_node("has", images=[("busybox:latest", 5 * MB)]), make_node("lacks")]
    assert _scores(nodes, "busybox") == {"has": 0, "lacks": 0}


def test_spread_scales_the_score():
    """An image on every node counts fully; on one of four nodes, a quarter of its size."""
    image = [("app:1", 1000 * MB)]
    everywhere = _scores([make_node(f"n{i}", images=image) for i in range(4)], "app:1")
    once = _scores([make_node("n0", images=image)] + [make_node(f"n{i}") for i in range(1, 4)], "app:1")
    assert everywhere["n0"] == 100
    assert 0 < once["n0"] < everywhere["n0"]
