"""A pod's volumes during a sync (the kubelet's MountVolume.SetUp): named volumes and volume files.

kctl.agent.podsync calls `ensure_volumes` before any container of the pod is made and
`refresh_volume_files` after; kctl.agent.lifecycle calls `write_volume_files` between
creating and starting a container. What the files hold, and how mounts look, is computed
by kctl.agent.volumes; this module does the runtime calls:

- create the pod's missing named volumes; compute the files of its configMap, secret,
  downwardAPI and projected volumes (a missing source is a FailedMount, and keeps
  containers from being created);
- resolve each persistentVolumeClaim volume to its PV (kctl.agent.volumes.resolve_claim):
  while the claim is not Bound the containers wait, with the kubelet's FailedMount event,
  and the pod is synced again soon (and at once when the claim changes: the agent's
  informer); a `kctl.io/local-volume` PV's Podman named volume is created if missing;
- write a volume's files into a created container before it starts (unless the volume
  already holds them: content hashes per (pod uid, volume) live in the SyncContext);
- rewrite a volume whose source changed while containers run, through a never-started
  "volume writer" container (the app mounts the volume read-only).
"""

from __future__ import annotations

from typing import Mapping

from kctl.agent.containers import KIND_APP, KIND_INIT, LABEL_IMAGE
from kctl.agent.syncstate import ERROR_RETRY_SECONDS, PodSyncState
from kctl.agent.volumes import (
    KIND_VOLUME_WRITER,
    LABEL_PV,
    WRITER_MOUNT,
    ClaimError,
    ClaimVolume,
    Files,
    VolumeError,
    claim_volumes,
    content_hash,
    file_mounts,
    named_volumes,
    resolve_claim,
    subpath_files,
    unsupported_volumes,
    volume_files,
    volume_labels,
    volume_source,
    writer_spec,
)
from kctl.runtime.interface import LABEL_CONTAINER_KIND, LABEL_POD_UID, RuntimeError_


def ensure_volumes(s: PodSyncState) -> None:
    """Create missing named volumes; compute file volumes' contents (or the mount error)."""
    for name, reason in unsupported_volumes(s.pod).items():
        _mount_failed(s, name, reason)
        return
    named = named_volumes(s.pod)
    existing = set(s.runtime.list_volumes({LABEL_POD_UID: s.uid})) if named else set()  # no call for none
    for name, runtime_name in named.items():
        if runtime_name not in existing:
            s.runtime.create_volume(runtime_name, volume_labels(s.pod, name))
            s.ctx.volume_hashes.pop((s.uid, name), None)
    if not ensure_claims(s):
        return
    for volume in s.spec.get("volumes") or ():
        if volume_source(volume) not in ("configMap", "secret", "downwardAPI", "projected"):
            continue
        try:
            s.files[volume["name"]] = volume_files(s.pod, volume, s.ctx.lookup, allocatable=s.allocatable,
                                                   tokens=s.ctx.tokens)
        except VolumeError as error:
            _mount_failed(s, volume["name"], str(error))
            return


def ensure_claims(s: PodSyncState) -> bool:
    """Resolve the pod's persistentVolumeClaim volumes into s.claims; False (a FailedMount) while one cannot be."""
    for volume in claim_volumes(s.pod):
        try:
            claim = resolve_claim(s.pod, volume, s.ctx.lookup, node_name=s.ctx.node_name)
            if claim.volume is not None:
                _ensure_pv_volume(s, claim)
        except ClaimError as error:
            name = volume["name"]
            _set_mount_error(s, str(error) if error.setup else (
                f"Unable to attach or mount volumes: unmounted volumes=[{name}], unattached volumes=[{name}], "
                f"failed to process volumes=[{name}]: {error}"))
            s.requeue.append(ERROR_RETRY_SECONDS)
            return False
        except RuntimeError_ as error:
            _set_mount_error(s, f'MountVolume.SetUp failed for volume "{volume["name"]}" : {error}')
            s.requeue.append(ERROR_RETRY_SECONDS)
            return False
        s.claims[volume["name"]] = claim
    return True


def _ensure_pv_volume(s: PodSyncState, claim: ClaimVolume) -> None:
    """The Podman named volume of a kctl.io/local-volume PV, created on this host if missing (it outlives pods)."""
    assert claim.volume is not None
    if claim.volume not in s.runtime.list_volumes({LABEL_PV: claim.pv}):
        s.runtime.create_volume(claim.volume, {LABEL_PV: claim.pv})


def _mount_failed(s: PodSyncState, volume: str, reason: str) -> None:
    _set_mount_error(s, f'MountVolume.SetUp failed for volume "{volume}" : {reason}')


def _set_mount_error(s: PodSyncState, message: str) -> None:
    """Containers wait with `message`; a FailedMount event when it is new."""
    s.mount_error = message
    if all(s.previous_waiting(str(c.get("name", ""))) != ("ContainerCreating", s.mount_error)
           for c in s.spec.get("containers") or ()):
        s.event("Warning", "FailedMount", s.mount_error)


def write_volume_files(s: PodSyncState, container: dict, container_id: str, env: Mapping[str, str]) -> None:
    """Before a container starts: its file volumes (unless already current) and subPath files."""
    for volume, mount_path in file_mounts(s.pod, container):
        files = s.files.get(volume)
        if files is None:
            continue
        digest = content_hash(files)
        if s.ctx.volume_hashes.get((s.uid, volume)) != digest:
            s.runtime.write_files(container_id, mount_path, files)
            s.ctx.volume_hashes[(s.uid, volume)] = digest
    for directory, files in subpath_files(s.pod, container, s.files, env=env):
        s.runtime.write_files(container_id, directory, files)


def refresh_volume_files(s: PodSyncState) -> None:
    """Rewrite a file volume whose source changed, if a live container mounts it.

    Through a created (not yet started) container mounting it, or else through a
    volume writer: Podman writes into a running container inside its mount namespace,
    where the volume is read-only. With no live container, the next one created writes.
    """
    for volume, files in s.files.items():
        digest = content_hash(files)
        if s.ctx.volume_hashes.get((s.uid, volume)) == digest:
            continue
        created, image = _live_mounts(s, volume)
        try:
            if created is not None:
                s.runtime.write_files(created[0], created[1], files)
            elif image:
                _write_with_helper(s, volume, files, image)
            else:
                continue
        except RuntimeError_ as error:
            s.event("Warning", "FailedMount", f'MountVolume.SetUp failed for volume "{volume}" : {error}')
            s.requeue.append(ERROR_RETRY_SECONDS)
            continue
        s.ctx.volume_hashes[(s.uid, volume)] = digest


def _live_mounts(s: PodSyncState, volume: str) -> tuple[tuple[str, str] | None, str]:
    """((id, mountPath) of a created instance mounting volume, or None; image of a running one, or "")."""
    image = ""
    for kind, key in ((KIND_INIT, "initContainers"), (KIND_APP, "containers")):
        for container in s.spec.get(key) or ():
            paths = [path for name, path in file_mounts(s.pod, container) if name == volume]
            current = s.newest(kind, str(container.get("name", ""))) if paths else None
            if current is not None and current.state == "created":
                return (current.id, paths[0]), ""
            if current is not None and current.state == "running":
                image = image or current.labels.get(LABEL_IMAGE, current.image)
    return None, image


def _write_with_helper(s: PodSyncState, volume: str, files: Files, image: str) -> None:
    """Write a volume's files through a never-started container of `image` mounting it read-write."""
    for stale in s.runtime.list_containers({LABEL_POD_UID: s.uid, LABEL_CONTAINER_KIND: KIND_VOLUME_WRITER}):
        s.runtime.remove_container(stale.id)
    helper = s.runtime.create_container(s.sandbox.id if s.sandbox else "", writer_spec(s.pod, volume, image))
    try:
        s.runtime.write_files(helper, WRITER_MOUNT, files)
    finally:
        s.runtime.remove_container(helper)


__all__ = ["ensure_claims", "ensure_volumes", "refresh_volume_files", "write_volume_files"]
