"""Volumes: names, mounts, the files of configMap/secret/downwardAPI/projected volumes, hashes."""

from __future__ import annotations

import pytest
from podharness import config_map, container, make_pod, secret

from kctl.agent.volumes import (
    content_hash,
    file_mounts,
    files_for_volume,
    mounts_for,
    named_volumes,
    subpath_files,
    unsupported_volumes,
    volume_files,
    volume_labels,
    VolumeError,
)
from kctl.runtime.interface import LABEL_MANAGED, LABEL_POD_UID, LABEL_VOLUME, Mount

OBJECTS = {
    ("ConfigMap", "default", "settings"): {**config_map("settings", {"mode": "fast", "level": "3"}),
                                           "binaryData": {"blob": "AAEC"}},
    ("Secret", "default", "db"): secret("db", {"password": "s3cret"}),
}


def lookup(kind: str, namespace: str, name: str) -> dict | None:
    return OBJECTS.get((kind, namespace, name))


VOLUMES = [
    {"name": "scratch", "emptyDir": {}},
    {"name": "host", "hostPath": {"path": "/srv/data", "type": "DirectoryOrCreate"}},
    {"name": "config", "configMap": {"name": "settings"}},
    {"name": "creds", "secret": {"secretName": "db"}},
]


@pytest.mark.parametrize(("volume", "expected"), [
    ({"name": "v", "configMap": {"name": "settings"}},
     {"mode": (b"fast", 0o644), "level": (b"3", 0o644), "blob": (b"\x00\x01\x02", 0o644)}),
    ({"name": "v", "configMap": {"name": "settings", "defaultMode": 0o440}},
     {"mode": (b"fast", 0o440), "level": (b"3", 0o440), "blob": (b"\x00\x01\x02", 0o440)}),
    ({"name": "v", "configMap": {"name": "settings", "items": [{"key": "mode", "path": "a/b.conf", "mode": 0o600}]}},
     {"a/b.conf": (b"fast", 0o600)}),
    ({"name": "v", "secret": {"secretName": "db"}}, {"password": (b"s3cret", 0o600)}),
    ({"name": "v", "secret": {"secretName": "db", "defaultMode": 0o644}}, {"password": (b"s3cret", 0o644)}),
    ({"name": "v", "configMap": {"name": "absent", "optional": True}}, {}),
    ({"name": "v", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                                             {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                                             {"path": "cpu", "resourceFieldRef": {"containerName": "app",
                                                                                  "resource": "limits.cpu",
                                                                                  "divisor": "1m"}}]}},
     {"labels": (b'app="web"', 0o644), "name": (b"web", 0o644), "cpu": (b"500", 0o644)}),
    ({"name": "v", "projected": {"defaultMode": 0o444, "sources": [
        {"configMap": {"name": "settings", "items": [{"key": "level", "path": "level"}]}},
        {"secret": {"name": "db"}},
        {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
        {"serviceAccountToken": {"path": "token"}}]}},
     {"level": (b"3", 0o444), "password": (b"s3cret", 0o444), "ns": (b"default", 0o444)}),
], ids=["configmap-all-keys", "configmap-default-mode", "configmap-items", "secret-not-world-readable",
        "secret-explicit-mode", "optional-missing", "downward-api", "projected"])
def test_files_for_volume(volume: dict, expected: dict) -> None:
    """Each file volume gives its files, paths and modes."""
    pod = make_pod(containers=[container("app", resources={"limits": {"cpu": "500m"}})])
    assert files_for_volume(pod, volume, lookup) == expected


@pytest.mark.parametrize(("volume", "error"), [
    ({"name": "v", "configMap": {"name": "absent"}}, 'configmap "absent" not found'),
    ({"name": "v", "secret": {"secretName": "absent"}}, 'secret "absent" not found'),
    ({"name": "v", "configMap": {"name": "settings", "items": [{"key": "nope", "path": "x"}]}},
     "configmap references non-existent configmap key: nope"),
    ({"name": "v", "configMap": {"name": "settings", "items": [{"key": "mode", "path": "../escape"}]}},
     "invalid file path '../escape'"),
], ids=["configmap-missing", "secret-missing", "item-key-missing", "path-escapes"])
def test_missing_source(volume: dict, error: str) -> None:
    """A missing non-optional source gives None, and volume_files says why."""
    pod = make_pod()
    assert files_for_volume(pod, volume, lookup) is None
    with pytest.raises(VolumeError, match=error.replace("(", r"\(").replace(".", r"\.")):
        volume_files(pod, volume, lookup)


def test_content_hash() -> None:
    """The hash changes with content, mode or path, not with dict order."""
    files = {"a": (b"1", 0o644), "b": (b"2", 0o600)}
    assert content_hash(files) == content_hash(dict(reversed(list(files.items()))))
    assert content_hash(files) != content_hash({**files, "a": (b"x", 0o644)})
    assert content_hash(files) != content_hash({**files, "a": (b"1", 0o600)})
    assert content_hash(files) != content_hash({"c": (b"1", 0o644), "b": (b"2", 0o600)})


def test_named_volumes_and_labels() -> None:
    """emptyDir and file volumes become named volumes of the pod; hostPath does not."""
    pod = make_pod(volumes=VOLUMES)
    assert named_volumes(pod) == {"scratch": "kctl_default_web_web-0123_scratch",
                                  "config": "kctl_default_web_web-0123_config",
                                  "creds": "kctl_default_web_web-0123_creds"}
    labels = volume_labels(pod, "scratch")
    assert labels[LABEL_MANAGED] == "true" and labels[LABEL_VOLUME] == "scratch"
    assert labels[LABEL_POD_UID] == "web-0123-4567-89ab-cdef"
    assert unsupported_volumes(pod) == {}
    assert unsupported_volumes(make_pod(volumes=[{"name": "d", "nfs": {"server": "x", "path": "/"}}])) == {
        "d": 'volume type "nfs" is not supported by kctl'}


def test_mounts_for() -> None:
    """volumeMounts become Mounts; file volumes are read-only; subPath on a file volume is not mounted."""
    app = container("app", volumeMounts=[
        {"name": "scratch", "mountPath": "/s", "subPathExpr": "$(POD)"},
        {"name": "host", "mountPath": "/h", "readOnly": True, "subPath": "logs"},
        {"name": "config", "mountPath": "/etc/app"},
        {"name": "config", "mountPath": "/etc/app.conf", "subPath": "mode"},
        {"name": "creds", "mountPath": "/run/creds", "readOnly": False},
        {"name": "undeclared", "mountPath": "/x"},
    ])
    pod = make_pod(containers=[app], volumes=VOLUMES)
    mounts = mounts_for(pod, app, named_volumes(pod), env={"POD": "web"})
    assert mounts == (
        Mount(target="/s", volume="kctl_default_web_web-0123_scratch", sub_path="web"),
        Mount(target="/h", host_path="/srv/data", read_only=True, sub_path="logs"),
        Mount(target="/etc/app", volume="kctl_default_web_web-0123_config", read_only=True),
        Mount(target="/run/creds", volume="kctl_default_web_web-0123_creds", read_only=True),
    )
    assert file_mounts(pod, app) == [("config", "/etc/app"), ("creds", "/run/creds")]


def test_subpath_files() -> None:
    """A subPath on a file volume writes that file (or folder) into the container at mountPath."""
    app = container("app", volumeMounts=[{"name": "config", "mountPath": "/etc/app.conf", "subPath": "mode"},
                                         {"name": "config", "mountPath": "/opt/conf", "subPath": "dir"}])
    pod = make_pod(containers=[app], volumes=VOLUMES)
    files = {"config": {"mode": (b"fast", 0o644), "dir/a": (b"A", 0o600), "other": (b"o", 0o644)}}
    assert subpath_files(pod, app, files) == [("/etc", {"app.conf": (b"fast", 0o644)}),
                                              ("/opt/conf", {"a": (b"A", 0o600)})]
