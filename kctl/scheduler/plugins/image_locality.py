"""ImageLocality: favour nodes that already have the pod's images (node.status.images).

Each image present on the node adds its size scaled by how widely it is spread
(nodes having it / all nodes, so one node holding a popular image does not attract
everything); the sum is clamped between 23 MB and 1000 MB per container and mapped to
0..100, as kube's imagelocality/image_locality.go. PreScore answers Skip when no node has
any of the pod's images. Built by plugins.registry.
"""

from __future__ import annotations

from kctl.client.imagenames import normalized_image_names
from kctl.scheduler.framework import MAX_NODE_SCORE, SKIP, CycleState, Handle, Status
from kctl.scheduler.nodeinfo import NodeInfo, PodInfo

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


class ImageLocality:
    """Score: image bytes already on the node."""

    NAME = "ImageLocality"

    def __init__(self, args: dict | None = None, handle: Handle | None = None) -> None:
        self.handle = handle

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status | None:
        snapshot = self.handle.snapshot if self.handle is not None else None
        image_nodes = snapshot.image_nodes if snapshot is not None else {}
        wanted = [normalized_image_names(i) for i in pod.images]
        if not any(n in image_nodes for names in wanted for n in names):
            return SKIP
        total = max(len(snapshot), 1) if snapshot is not None else max(len(nodes), 1)
        state.write("ImageLocality/images", (wanted, image_nodes, total))
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        got = state.read("ImageLocality/images")
        if got is None or not node.images:
            return 0
        wanted, image_nodes, total = got
        total_bytes = 0
        for names in wanted:
            for n in names:
                size = node.images.get(n)
                if size is not None:
                    total_bytes += int(size * image_nodes.get(n, 1) / total)
                    break
        containers = max(len(pod.images), 1)
        top = MAX_CONTAINER_THRESHOLD * containers
        if total_bytes < MIN_THRESHOLD:
            return 0
        total_bytes = min(total_bytes, top)
        return MAX_NODE_SCORE * (total_bytes - MIN_THRESHOLD) // (top - MIN_THRESHOLD)
