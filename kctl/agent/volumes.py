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
- configMap, secret, downwardAPI, projected (of those three, and serviceAccountToken: a token
  bound to the pod from kctl.agent.serviceaccounttokens, refreshed at 80% of its life): a named runtime volume,
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
- persistentVolumeClaim: the claim must be Bound (until it is, the pod's containers wait,
  with the kubelet's FailedMount "... error processing PVC default/data: PVC is not bound");
  its PersistentVolume says what is mounted: for csi driver `kctl.io/local-volume` the
  Podman named volume named the PV's `csi.volumeHandle`, labelled LABEL_PV=<PV name>
  (kctl.agent.volumesetup creates it if missing; it outlives the pod, and
  kctl.agent.localvolumes removes it when the PV is released with reclaim policy Delete);
  for `hostPath` / `local` sources a bind mount of that path on the host. Read-only when
  the pod's volume says `readOnly: true` or the PV's csi source does.
- other sources (nfs, csi of another driver, ...) are refused with a clear reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import posixpath
from dataclasses import dataclass
from typing import Mapping, Protocol

from kctl.machinery.persistentvolumes import HOSTNAME_LABEL, LOCAL_VOLUME_PROVISIONER
from kctl.agent.containers import pod_labels, sandbox_name
from kctl.agent.env import Allocatable, Lookup, ReferenceError_, expand, field_value, resource_value
from kctl.runtime.interface import LABEL_CONTAINER_KIND, LABEL_VOLUME, ContainerSpec, Mount

FILE_SOURCES = ("configMap", "secret", "downwardAPI", "projected")
NAMED_SOURCES = ("emptyDir", *FILE_SOURCES)
DEFAULT_MODE = 0o644
SECRET_DEFAULT_MODE = 0o600
#: the label of a PersistentVolume's Podman named volume: the PV's name
LABEL_PV = "io.kctl.pv"
#: the CSI driver name of kctl's own volumes (Podman named volumes on one node)
LOCAL_VOLUME_DRIVER = LOCAL_VOLUME_PROVISIONER
CLAIM_SOURCE = "persistentVolumeClaim"
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
            for v in _volumes(pod) if volume_source(v) not in (*NAMED_SOURCES, "hostPath", CLAIM_SOURCE)}


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
               env: Mapping[str, str] | None = None,
               claims: Mapping[str, ClaimVolume] | None = None) -> tuple[Mount, ...]:
    """The runtime Mounts of a container's volumeMounts.

    `volume_names` maps pod volume names to runtime volume names (`named_volumes`);
    `claims` pod volume names to what their bound claims mount (`resolve_claim`).
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
        elif source == CLAIM_SOURCE and claims and volume["name"] in claims:
            claim = claims[volume["name"]]
            mounts.append(Mount(target=target, volume=claim.volume, host_path=claim.host_path,
                                read_only=read_only or claim.read_only, sub_path=sub_path))
    return tuple(mounts)


# -- persistentVolumeClaim volumes -------------------------------------------------------------

@dataclass(frozen=True)
class ClaimVolume:
    """What a pod's persistentVolumeClaim volume mounts: a named volume (`volume`) or a host path."""

    pv: str
    volume: str | None = None
    host_path: str | None = None
    read_only: bool = False


class ClaimError(Exception):
    """A claim cannot be mounted yet (or at all); the message is the kubelet's.

    `setup` is False while the claim is being processed (not bound, no PV: "failed to
    process volumes"), True when the PV's source cannot be set up (MountVolume.SetUp).
    """

    def __init__(self, message: str, *, setup: bool = False) -> None:
        super().__init__(message)
        self.setup = setup


def claim_volumes(pod: dict) -> list[dict]:
    """The pod's persistentVolumeClaim volumes."""
    return [v for v in _volumes(pod) if volume_source(v) == CLAIM_SOURCE]


def _hostname_terms_allow(pv: dict, node_name: str) -> bool:
    """The PV's required node affinity against this node, where it names nodes by kubernetes.io/hostname
    (the agent knows its node by name only; terms on other labels are the scheduler's to check)."""
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if required is None:
        return True
    terms = [t for t in required.get("nodeSelectorTerms") or () if isinstance(t, dict)]
    expressions = [e for t in terms for e in t.get("matchExpressions") or ()]
    if not terms or any(e.get("key") != HOSTNAME_LABEL for e in expressions) or \
            any(t.get("matchFields") for t in terms):
        return True
    for term in terms:
        ok = bool(term.get("matchExpressions"))
        for e in term.get("matchExpressions") or ():
            values = [str(v) for v in e.get("values") or ()]
            op = e.get("operator")
            if (op == "In" and node_name not in values) or (op == "NotIn" and node_name in values) or \
                    op == "DoesNotExist":
                ok = False
        if ok:
            return True
    return False


def resolve_claim(pod: dict, volume: dict, lookup: Lookup, *, node_name: str = "") -> ClaimVolume:
    """What a persistentVolumeClaim volume mounts, from its claim and the claim's PV.

    ClaimError, in the kubelet's words, while the claim is missing, being deleted, not
    bound, or its PV is missing, bound elsewhere, not for this node or of a source kctl
    cannot mount.
    """
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    source = volume.get(CLAIM_SOURCE) or {}
    name = str(source.get("claimName", ""))
    where = f"error processing PVC {namespace}/{name}"
    claim = lookup("PersistentVolumeClaim", namespace, name)
    if claim is None:
        raise ClaimError(f'{where}: failed to fetch PVC from API server: persistentvolumeclaims "{name}" not found')
    if (claim.get("metadata") or {}).get("deletionTimestamp"):
        raise ClaimError(f"{where}: can't start pod because PVC {namespace}/{name} is being deleted")
    pv_name = str((claim.get("spec") or {}).get("volumeName") or "")
    if (claim.get("status") or {}).get("phase") != "Bound" or not pv_name:
        raise ClaimError(f"{where}: PVC is not bound")
    pv = lookup("PersistentVolume", "", pv_name)
    if pv is None:
        raise ClaimError(f'{where}: failed to fetch PV "{pv_name}" from API server: '
                         f'persistentvolumes "{pv_name}" not found')
    ref = (pv.get("spec") or {}).get("claimRef") or {}
    claim_uid = (claim.get("metadata") or {}).get("uid")
    if not ref or (ref.get("uid") and ref.get("uid") != claim_uid):
        raise ClaimError(f'{where}: expected PV "{pv_name}" to be bound to PVC {namespace}/{name} (UID '
                         f'"{claim_uid}") but its claimRef names {ref.get("namespace", "")}/{ref.get("name", "")} '
                         f'(UID "{ref.get("uid", "")}")')
    if node_name and not _hostname_terms_allow(pv, node_name):
        raise ClaimError(f'MountVolume.NodeAffinity check failed for volume "{pv_name}" : '
                         f'no matching NodeSelectorTerms', setup=True)
    read_only = bool(source.get("readOnly"))
    spec = pv.get("spec") or {}
    csi = spec.get("csi")
    if isinstance(csi, dict):
        driver = str(csi.get("driver", ""))
        if driver != LOCAL_VOLUME_DRIVER:
            raise ClaimError(f'MountVolume.SetUp failed for volume "{pv_name}" : kubernetes.io/csi: mounter.SetUpAt '
                             f'failed to get CSI client: driver name {driver} not found in the list of registered '
                             f'CSI drivers', setup=True)
        return ClaimVolume(pv_name, volume=str(csi.get("volumeHandle") or pv_name),
                           read_only=read_only or bool(csi.get("readOnly")))
    for kind in ("hostPath", "local"):
        if isinstance(spec.get(kind), dict) and spec[kind].get("path"):
            return ClaimVolume(pv_name, host_path=str(spec[kind]["path"]), read_only=read_only)
    kind = next((k for k, v in spec.items() if isinstance(v, dict) and k not in _PV_SPEC_FIELDS), "unknown")
    raise ClaimError(f'MountVolume.SetUp failed for volume "{pv_name}" : volume type "{kind}" is not supported by '
                     f'kctl', setup=True)


#: PersistentVolume spec fields that are not the volume's source
_PV_SPEC_FIELDS = ("capacity", "claimRef", "nodeAffinity", "mountOptions")


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


class TokenSource(Protocol):
    """Where a projected serviceAccountToken's token comes from (kctl.agent.serviceaccounttokens.TokenManager)."""

    def token(self, pod: dict, *, audience: str = "", expiration_seconds: int = 3600) -> str: ...


def files_for_volume(pod: dict, volume: dict, lookup: Lookup, *,
                     allocatable: Allocatable | None = None, tokens: TokenSource | None = None) -> Files | None:
    """The files of a configMap/secret/downwardAPI/projected volume; None if a required source is missing."""
    try:
        return volume_files(pod, volume, lookup, allocatable=allocatable, tokens=tokens)
    except VolumeError:
        return None


def volume_files(pod: dict, volume: dict, lookup: Lookup, *, allocatable: Allocatable | None = None,
                 tokens: TokenSource | None = None) -> Files:
    """As files_for_volume, but VolumeError saying what is missing (tokens: for serviceAccountToken sources)."""
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
        return _projected_files(pod, spec, lookup, namespace, allocatable=allocatable, tokens=tokens)
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
                     allocatable: Allocatable | None, tokens: TokenSource | None = None) -> Files:
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
        elif isinstance(source.get("serviceAccountToken"), dict) and tokens is not None:
            part = source["serviceAccountToken"]
            seconds = part.get("expirationSeconds")
            token = tokens.token(pod, audience=str(part.get("audience") or ""),
                                 expiration_seconds=seconds if isinstance(seconds, int) and seconds > 0 else 3600)
            files[_checked(str(part.get("path") or "token"))] = (token.encode(), default_mode)
        # clusterTrustBundle sources (and serviceAccountToken where no token source is given): skipped.
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


__all__ = ["CLAIM_SOURCE", "ClaimError", "ClaimVolume", "LABEL_PV", "LOCAL_VOLUME_DRIVER", "claim_volumes",
           "resolve_claim",
           "DEFAULT_MODE", "FILE_SOURCES", "Files", "KIND_VOLUME_WRITER", "SECRET_DEFAULT_MODE", "TokenSource",
           "VolumeError",
           "WRITER_MOUNT", "content_hash", "file_mounts", "files_for_volume", "is_file_volume", "mounts_for",
           "named_volumes", "runtime_volume_name", "subpath_files", "unsupported_volumes", "volume_files",
           "volume_labels", "volume_source", "writer_spec"]
