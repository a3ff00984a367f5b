"""A pod's volumes on a host the agent may only reach through the runtime API.

The pod logic (kctl.agent.volumesetup, kctl.agent.lifecycle) calls these to create a
pod's named volumes, to mount them into each container, and to fill (and refresh) the
files of configMap, secret, downwardAPI and projected volumes. Nothing here reads or
writes files on the machine the agent runs on: the host may be remote, so files travel
through `Runtime.write_files`.

- emptyDir: a named runtime volume `kctl_<ns>_<pod>_<uid8>_<volume>` labelled with the
  pod's labels and LABEL_VOLUME; removed with the pod. `medium: Memory` and `sizeLimit`
  are not honoured (a disk volume is used).
- hostPath: a bind Mount of the path on the pod's host. Its `type` is not checked (the
  path is on a host kctl may only reach through Podman): a missing path makes the
  container fail to be created, and DirectoryOrCreate/FileOrCreate do not create it.
- configMap, secret, downwardAPI, projected (of those three): a named runtime volume,
  always mounted read-only as in Kubernetes; podsync writes its files through the first
  container created that mounts it, before that container starts. When `content_hash`
  of the files changes it writes them again through a created (not started) container
  mounting it if there is one, else through a short-lived "volume writer" container
  (`writer_spec`: made in the pod, never started, removed at once): Podman writes into a
  running container inside its mount namespace, where the volume is read-only. Keys
  dropped from the source stay behind as files until the pod is recreated.
  File modes: `items[].mode`, else `defaultMode`, else 0644 -- but 0600 for a secret
  (kctl's deviation, so secret files are not world-readable; Podman gives the files to the
  container's user). The API layer's defaulting stores that 0600 as the secret volume's
  `defaultMode` (kctl.admission.defaults.SECRET_FILE_MODE), so `kctl get -o yaml` shows it.
- subPath on configMap/secret/downwardAPI/projected: not mounted (the volume would have no
  such path yet); the selected file or folder is written into the container's own file
  system at mountPath before it starts, and, as in Kubernetes, never updated.
- subPath on emptyDir and hostPath is handed to the runtime, which binds
  `<volume>/<subPath>`; the path must already exist there (kctl cannot create it first).
- other sources (persistentVolumeClaim, nfs, csi, ...) are refused with a clear reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import posixpath
from typing import Mapping

from kctl.agent.containers import pod_labels, sandbox_name
from kctl.agent.env import Allocatable, Lookup, ReferenceError_, expand, field_value, resource_value
from kctl.runtime.interface import LABEL_CONTAINER_KIND, LABEL_VOLUME, ContainerSpec, Mount

FILE_SOURCES = ("configMap", "secret", "downwardAPI", "projected")
NAMED_SOURCES = ("emptyDir", *FILE_SOURCES)
DEFAULT_MODE = 0o644
SECRET_DEFAULT_MODE = 0o600
#: LABEL_CONTAINER_KIND of the never-started containers that rewrite a file volume
KIND_VOLUME_WRITER = "volume-writer"
WRITER_MOUNT = "/kctl-volume"

Files = dict[str, tuple[bytes, int]]  # relative path -> (content, mode)


# -- kinds and names ---------------------------------------------------------------------------

def volume_source(volume: dict) -> str:
    """The key of the volume's source ("emptyDir", "configMap", ...); emptyDir when none is set."""
    for key, value in volume.items():
        if key != "name" and value is not None:
            return key
    return "emptyDir"


def runtime_volume_name(pod: dict, volume_name: str) -> str:
    return f"{sandbox_name(pod)}_{volume_name}"


def volume_labels(pod: dict, volume_name: str) -> dict[str, str]:
    return {**pod_labels(pod), LABEL_VOLUME: volume_name}


def named_volumes(pod: dict) -> dict[str, str]:
    """Pod volume name -> runtime volume name, for the volumes kctl makes as named volumes."""
    return {v["name"]: runtime_volume_name(pod, v["name"]) for v in _volumes(pod)
            if volume_source(v) in NAMED_SOURCES}


def unsupported_volumes(pod: dict) -> dict[str, str]:
    """Pod volume name -> the reason kctl cannot provide it."""
    return {v["name"]: f'volume type "{volume_source(v)}" is not supported by kctl'
            for v in _volumes(pod) if volume_source(v) not in (*NAMED_SOURCES, "hostPath")}


def _volumes(pod: dict) -> list[dict]:
    return [v for v in (pod.get("spec") or {}).get("volumes") or () if isinstance(v, dict) and v.get("name")]


def _volume(pod: dict, name: str) -> dict | None:
    return next((v for v in _volumes(pod) if v["name"] == name), None)


def is_file_volume(volume: dict) -> bool:
    return volume_source(volume) in FILE_SOURCES


# -- mounts --------------------------------------------------------------------------------------

def _sub_path(mount: dict, env: Mapping[str, str] | None) -> str | None:
    if mount.get("subPath"):
        return str(mount["subPath"])
    if mount.get("subPathExpr"):
        return expand(str(mount["subPathExpr"]), env or {})
    return None


def mounts_for(pod: dict, container: dict, volume_names: Mapping[str, str], *,
               env: Mapping[str, str] | None = None) -> tuple[Mount, ...]:
    """The runtime Mounts of a container's volumeMounts.

    `volume_names` maps pod volume names to runtime volume names (`named_volumes`).
    File volumes mounted with a subPath are left out: `subpath_files` writes them.
    """
    mounts: list[Mount] = []
    for mount in container.get("volumeMounts") or ():
        volume = _volume(pod, str(mount.get("name", "")))
        if volume is None:
            continue
        source, sub_path = volume_source(volume), _sub_path(mount, env)
        target, read_only = str(mount.get("mountPath", "")), bool(mount.get("readOnly"))
        if source == "hostPath":
            mounts.append(Mount(target=target, host_path=str((volume.get("hostPath") or {}).get("path", "")),
                                read_only=read_only, sub_path=sub_path))
        elif source in FILE_SOURCES and sub_path is None:
            mounts.append(Mount(target=target, volume=volume_names[volume["name"]], read_only=True))
        elif source == "emptyDir":
            mounts.append(Mount(target=target, volume=volume_names[volume["name"]], read_only=read_only,
                                sub_path=sub_path))
    return tuple(mounts)


def writer_spec(pod: dict, volume_name: str, image: str) -> ContainerSpec:
    """A container that is created (never started) only to write a file volume at WRITER_MOUNT."""
    return ContainerSpec(name=f"{sandbox_name(pod)}_{KIND_VOLUME_WRITER}_{volume_name}", image=image,
                         labels={**pod_labels(pod), LABEL_CONTAINER_KIND: KIND_VOLUME_WRITER,
                                 LABEL_VOLUME: volume_name},
                         entrypoint=["kctl-volume-writer"],
                         mounts=(Mount(target=WRITER_MOUNT, volume=runtime_volume_name(pod, volume_name)),))


def file_mounts(pod: dict, container: dict) -> list[tuple[str, str]]:
    """(pod volume name, mountPath) of the container's whole (no subPath) file-volume mounts."""
    found = []
    for mount in container.get("volumeMounts") or ():
        volume = _volume(pod, str(mount.get("name", "")))
        if volume is not None and is_file_volume(volume) and not (mount.get("subPath") or mount.get("subPathExpr")):
            found.append((volume["name"], str(mount.get("mountPath", ""))))
    return found


def subpath_files(pod: dict, container: dict, files_by_volume: Mapping[str, Files | None], *,
                  env: Mapping[str, str] | None = None) -> list[tuple[str, Files]]:
    """(directory, files) to write into the container for its file-volume mounts with a subPath.

    A subPath naming one file puts that file at mountPath; one naming a folder puts the
    folder's files under mountPath.
    """
    writes: list[tuple[str, Files]] = []
    for mount in container.get("volumeMounts") or ():
        volume = _volume(pod, str(mount.get("name", "")))
        sub_path = _sub_path(mount, env)
        files = files_by_volume.get(volume["name"]) if volume is not None else None
        if volume is None or not is_file_volume(volume) or sub_path is None or files is None:
            continue
        target, prefix = str(mount.get("mountPath", "")), sub_path.strip("/")
        if prefix in files:
            writes.append((posixpath.dirname(target) or "/", {posixpath.basename(target): files[prefix]}))
            continue
        inside = {path[len(prefix) + 1:]: item for path, item in files.items() if path.startswith(prefix + "/")}
        if inside:
            writes.append((target, inside))
    return writes


# -- file contents -------------------------------------------------------------------------------

class VolumeError(Exception):
    """A volume's source is missing or invalid; the message follows the kubelet's."""


def files_for_volume(pod: dict, volume: dict, lookup: Lookup, *,
                     allocatable: Allocatable | None = None) -> Files | None:
    """The files of a configMap/secret/downwardAPI/projected volume; None if a required source is missing."""
    try:
        return volume_files(pod, volume, lookup, allocatable=allocatable)
    except VolumeError:
        return None


def volume_files(pod: dict, volume: dict, lookup: Lookup, *, allocatable: Allocatable | None = None) -> Files:
    """As files_for_volume, but VolumeError saying what is missing."""
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    source = volume_source(volume)
    spec = volume.get(source) or {}
    if source == "configMap":
        return _object_files(lookup, "ConfigMap", namespace, spec, name=spec.get("name", ""),
                             default_mode=_mode(spec.get("defaultMode"), DEFAULT_MODE))
    if source == "secret":
        return _object_files(lookup, "Secret", namespace, spec, name=spec.get("secretName", ""),
                             default_mode=_mode(spec.get("defaultMode"), SECRET_DEFAULT_MODE))
    if source == "downwardAPI":
        return _downward_files(pod, spec, default_mode=_mode(spec.get("defaultMode"), DEFAULT_MODE),
                               allocatable=allocatable)
    if source == "projected":
        return _projected_files(pod, spec, lookup, namespace, allocatable=allocatable)
    raise VolumeError(f'volume type "{source}" has no files')


def _mode(value: object, default: int) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else default


def _raw_data(obj: dict, kind: str) -> dict[str, bytes]:
    """The bytes of every key: ConfigMap data + binaryData, Secret data (+ stringData)."""
    out: dict[str, bytes] = {}
    encoded = obj.get("binaryData") if kind == "ConfigMap" else obj.get("data")
    plain = obj.get("data") if kind == "ConfigMap" else obj.get("stringData")
    for key, value in (encoded or {}).items():
        try:
            out[str(key)] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            raise VolumeError(f"{kind.lower()} key {key} is not valid base64") from None
    for key, value in (plain or {}).items():
        out[str(key)] = str(value).encode()
    return out


def _object_files(lookup: Lookup, kind: str, namespace: str, spec: dict, *, name: str,
                  default_mode: int) -> Files:
    obj = lookup(kind, namespace, name)
    if obj is None:
        if spec.get("optional"):
            return {}
        raise VolumeError(f'{kind.lower()} "{name}" not found')
    data = _raw_data(obj, kind)
    items = spec.get("items")
    if not items:
        return {_checked(key): (value, default_mode) for key, value in data.items()}
    files: Files = {}
    for item in items:
        key = str(item.get("key", ""))
        if key not in data:
            if spec.get("optional"):
                continue
            raise VolumeError(f"{kind.lower()} references non-existent {kind.lower()} key: {key}")
        files[_checked(str(item.get("path") or key))] = (data[key], _mode(item.get("mode"), default_mode))
    return files


def _downward_files(pod: dict, spec: dict, *, default_mode: int, allocatable: Allocatable | None) -> Files:
    files: Files = {}
    for item in spec.get("items") or ():
        try:
            if isinstance(item.get("fieldRef"), dict):
                value = field_value(pod, str(item["fieldRef"].get("fieldPath", "")))
            elif isinstance(item.get("resourceFieldRef"), dict):
                value = resource_value(pod, item["resourceFieldRef"], allocatable=allocatable)
            else:
                raise VolumeError(f"downwardAPI item {item.get('path')} has no fieldRef or resourceFieldRef")
        except ReferenceError_ as error:
            raise VolumeError(str(error)) from None
        files[_checked(str(item.get("path", "")))] = (value.encode(), _mode(item.get("mode"), default_mode))
    return files


def _projected_files(pod: dict, spec: dict, lookup: Lookup, namespace: str, *,
                     allocatable: Allocatable | None) -> Files:
    default_mode = _mode(spec.get("defaultMode"), DEFAULT_MODE)
    files: Files = {}
    for source in spec.get("sources") or ():
        if isinstance(source.get("configMap"), dict):
            part = source["configMap"]
            files.update(_object_files(lookup, "ConfigMap", namespace, part, name=part.get("name", ""),
                                       default_mode=default_mode))
        elif isinstance(source.get("secret"), dict):
            part = source["secret"]
            files.update(_object_files(lookup, "Secret", namespace, part, name=part.get("name", ""),
                                       default_mode=_mode(spec.get("defaultMode"), SECRET_DEFAULT_MODE)))
        elif isinstance(source.get("downwardAPI"), dict):
            files.update(_downward_files(pod, source["downwardAPI"], default_mode=default_mode,
                                         allocatable=allocatable))
        # serviceAccountToken and clusterTrustBundle sources: kctl has no tokens to give; skipped.
    return files


def _checked(path: str) -> str:
    """A file path inside the volume; VolumeError for an absolute one or one with '..'."""
    if not path or posixpath.isabs(path) or ".." in path.split("/"):
        raise VolumeError(f"invalid file path {path!r}: it must be relative and must not contain '..'")
    return path


def content_hash(files: Mapping[str, tuple[bytes, int]]) -> str:
    """A hash of paths, contents and modes: podsync rewrites a volume's files when it changes."""
    digest = hashlib.sha256()
    for path in sorted(files):
        content, mode = files[path]
        digest.update(f"{path}\0{mode:o}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


__all__ = ["DEFAULT_MODE", "FILE_SOURCES", "Files", "KIND_VOLUME_WRITER", "SECRET_DEFAULT_MODE", "VolumeError",
           "WRITER_MOUNT", "content_hash", "file_mounts", "files_for_volume", "is_file_volume", "mounts_for",
           "named_volumes", "runtime_volume_name", "subpath_files", "unsupported_volumes", "volume_files",
           "volume_labels", "volume_source", "writer_spec"]
