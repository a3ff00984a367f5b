"""A container's image during a sync (the kubelet's EnsureImageExists): present, pulled, or copied.

kctl.agent.lifecycle calls `ensure_image` before creating a container. It follows the
container's imagePullPolicy (Never / IfNotPresent / Always), pulls with the pod's
imagePullSecrets, backs off after a failed pull (ErrImagePull, then ImagePullBackOff),
and, where no registry can have the image (localhost/...) or the pull failed, copies it
from a host that has it through the agent's ImageCopier (kctl.agent.images).

Under Never and IfNotPresent the runtime is not asked first whether the image is there:
the container's create says so (ImageNotFound), and only then does lifecycle call
`ensure_image(..., present=False)` (`create_checks_image`; one Podman call less per
container, as CRI's CreateContainer fails on a missing image). Under Always the pull comes first.
"""

from __future__ import annotations

import time

from kctl.agent.containers import pull_policy
from kctl.agent.images import ImageCopier, pull_auth, registry_may_have
from kctl.agent.syncstate import PodSyncState
from kctl.runtime.interface import RuntimeError_

IMAGE_KEY = "image:"  # back-off key (uid, IMAGE_KEY + container) for image pulls


def create_checks_image(container: dict) -> bool:
    """Whether the container is created before its image is looked for (Never, IfNotPresent: see above)."""
    return pull_policy(container) != "Always"


def image_already_present(s: PodSyncState, container: dict, kind: str) -> None:
    """The kubelet's event for an image that needed no pull."""
    name, image = str(container.get("name", "")), str(container.get("image", ""))
    s.event("Normal", "Pulled", f'Container image "{image}" already present on machine', kind, name)


def ensure_image(s: PodSyncState, container: dict, kind: str, *, present: bool | None = None) -> bool:
    """Whether the image is there to use, pulling it per imagePullPolicy (with back-off).

    `present` is what the caller knows already (a create found no image); None: the runtime is asked.
    """
    name, image = str(container.get("name", "")), str(container.get("image", ""))
    policy = pull_policy(container)
    if present is None:
        present = s.runtime.image_present(image)
    key = (s.uid, IMAGE_KEY + name)
    if policy == "Never" or (policy == "IfNotPresent" and present):
        if present:
            image_already_present(s, container, kind)
            return True
        message = f'Container image "{image}" is not present with pull policy of Never'
        s.wait(name, kind, ("ErrImageNeverPull", message), ("Warning", "ErrImageNeverPull", message))
        return False
    if not s.ctx.backoff.ready(key, s.now):
        if present:  # Always, but the registry failed recently: use the local image meanwhile
            return True
        message = f'Back-off pulling image "{image}"'
        s.wait(name, kind, ("ImagePullBackOff", message), ("Normal", "BackOff", message))
        s.requeue.append(s.ctx.backoff.remaining(key, s.now))
        return False
    return _pull(s, container, kind, key, present)


def _pull(s: PodSyncState, container: dict, kind: str, key: tuple[str, str], present: bool) -> bool:
    """Pull from the registry, else (image absent) copy from a host that has it (kctl.agent.images).

    A localhost/ image is copied without a pull: no registry serves it.
    """
    name, image = str(container.get("name", "")), str(container.get("image", ""))
    copier = s.ctx.image_copier if not present else None
    if copier is not None and not registry_may_have(image):
        return _copy(s, copier, container, kind, key, "")
    auth, missing = pull_auth(s.pod, image, s.ctx.lookup)
    if missing:
        s.event("Warning", "FailedToRetrieveImagePullSecret",
                f"Unable to retrieve some image pull secrets ({', '.join(missing)}); "
                "attempting to pull the image may not succeed.", kind, name)
    s.event("Normal", "Pulling", f'Pulling image "{image}"', kind, name)
    started = time.monotonic()
    try:
        s.runtime.pull_image(image, auth=auth)
    except RuntimeError_ as error:
        if copier is not None:
            return _copy(s, copier, container, kind, key, f"{error}; ")
        if present:
            s.ctx.backoff.record(key, s.now)
            s.event("Warning", "Failed", f'Failed to pull image "{image}": {error}; '
                                         "using the image present on the host", kind, name)
            return True
        return _pull_failed(s, container, kind, key, str(error))
    s.ctx.backoff.clear(key)
    s.event("Normal", "Pulled", f'Successfully pulled image "{image}" in {time.monotonic() - started:.3f}s',
            kind, name)
    return True


def _pull_failed(s: PodSyncState, container: dict, kind: str, key: tuple[str, str], error: str) -> bool:
    """ErrImagePull: Warning events, the container waiting, a retry after the pull back-off."""
    name, image = str(container.get("name", "")), str(container.get("image", ""))
    s.ctx.backoff.record(key, s.now)
    s.event("Warning", "Failed", f'Failed to pull image "{image}": {error}', kind, name)
    s.event("Warning", "Failed", "Error: ErrImagePull", kind, name)
    s.waiting[name] = ("ErrImagePull", error)
    s.requeue.append(s.ctx.backoff.remaining(key, s.now))
    return False


def _copy(s: PodSyncState, copier: ImageCopier, container: dict, kind: str, key: tuple[str, str],
          pulled: str) -> bool:
    """Copy the image from the control host or another node; `pulled` is the failed pull's error + "; "."""
    name, image = str(container.get("name", "")), str(container.get("image", ""))
    try:
        copied = copier.copy(s.runtime, image, node=s.ctx.node_name)
    except RuntimeError_ as error:
        return _pull_failed(s, container, kind, key, f"{pulled}{error}")
    s.ctx.backoff.clear(key)
    if copied.source is None:
        s.event("Normal", "Pulled", f'Container image "{image}" already present on machine', kind, name)
    else:
        s.event("Normal", "ImageCopied", f'Copied image "{image}" from {copied.source} in {copied.seconds:.3f}s',
                kind, name)
    return True


__all__ = ["IMAGE_KEY", "create_checks_image", "ensure_image", "image_already_present"]
