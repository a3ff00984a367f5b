"""Images on Podman: present, pulled (with registry auth), listed, and saved or loaded as a stream.

A part of PodmanRuntime (kctl.runtime.podman.runtime); the agent pulls through it, and
`kctl image push` / the agent's copy between hosts save on one host and load on another
(kctl.agent.images), never holding an image whole in memory.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

from kctl.runtime.interface import ImageInfo, ImageNotFound, RegistryAuth
from kctl.runtime.podman.connection import ServiceCalls
from kctl.runtime.podman.errors import calling, one_line
from kctl.runtime.podman.specgen import registry_auth_header, saved_name

IMAGE_CHUNK = 1 << 20            # bytes per chunk of an image streamed by save_image
IMAGE_TRANSFER_TIMEOUT = 600.0   # seconds an image save or load may go without a byte moving


class Images(ServiceCalls):
    """The image calls of PodmanRuntime."""

    def image_present(self, ref: str) -> bool:
        with calling(f"look up image {ref}"):
            response = self._api().get(f"/images/{ref}/exists")
            if response.status_code == 404:
                return False
            response.raise_for_status()
            return True

    def pull_image(self, ref: str, *, auth: RegistryAuth | None = None) -> None:
        """Pull `ref` (with `auth`, sent as X-Registry-Auth); ImageNotFound when it cannot be pulled.

        A `localhost/` image is built on its host and never pulled: when absent it fails
        at once instead of after Podman's 3 s of trying https://localhost.
        """
        if ref.startswith("localhost/"):
            if not self.image_present(ref):
                raise ImageNotFound(f"image {ref} is not on the host (localhost/ images are built there, not pulled)")
            return
        with calling(f"pull image {ref}"):
            headers = {"X-Registry-Auth": registry_auth_header(auth)} if auth is not None else None
            response = self._api().post("/images/pull", params={"reference": ref, "policy": "always"},
                                        headers=headers, stream=True, timeout=(self._timeout, self._timeout))
            response.raise_for_status()
            try:
                for line in response.iter_lines():
                    report = json.loads(line) if line.strip() else {}
                    if report.get("error"):
                        raise ImageNotFound(f"pull image {ref}: {one_line(report['error'])}")
            finally:
                response.close()

    def list_images(self) -> list[ImageInfo]:
        with calling("list images"):
            images = self._get("/images/json") or []
        return [ImageInfo(id=image["Id"], names=tuple(image.get("RepoTags") or image.get("Names") or ()),
                          size=int(image.get("Size", 0) or 0)) for image in images]

    def save_image(self, ref: str) -> Iterator[bytes]:
        """The image as a docker-archive tar carrying its name, streamed in chunks (never whole
        in memory); ImageNotFound when the host lacks it. Podman writes the archive first."""
        what = f"save image {ref}"
        with calling(what):
            inspect = self._get(f"/images/{ref}/json")
            name = saved_name([str(tag) for tag in inspect.get("RepoTags") or ()], ref) or inspect["Id"]
            response = self._api().get(f"/images/{name}/get", params={"format": "docker-archive"},
                                       stream=True, timeout=(self._timeout, IMAGE_TRANSFER_TIMEOUT))
            response.raise_for_status()
        return self._image_chunks(response, what)

    @staticmethod
    def _image_chunks(response: Any, what: str) -> Iterator[bytes]:
        try:
            with calling(what):
                yield from response.iter_content(chunk_size=IMAGE_CHUNK)
        finally:
            response.close()

    def load_image(self, chunks: Iterable[bytes]) -> list[str]:
        """Load a docker-archive tar sent as it comes from `chunks` (chunked upload); the names it gave."""
        with calling("load image"):
            response = self._api().post("/images/load", data=iter(chunks),
                                        headers={"Content-Type": "application/x-tar"},
                                        timeout=(self._timeout, IMAGE_TRANSFER_TIMEOUT))
            response.raise_for_status()
            return [str(name) for name in (response.json() or {}).get("Names") or ()]


__all__ = ["Images"]
