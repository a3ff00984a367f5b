"""File modes of configMap/secret/downwardAPI/projected volumes are validated as Kubernetes does:
0 to 0777 (511), both inclusive, with the field path and Kubernetes' message."""

from __future__ import annotations

import pytest

from kctl.admission.validation import validate
from kctl.admission.validation.file_modes import FILE_MODE_MESSAGE
from kctl.machinery.resources import builtin_registry
from kctl.manifests.yamlio import load_documents

REGISTRY = builtin_registry()


def pod(volume: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "volumes": [{"name": "v", **volume}]}}


def deployment(volume: dict) -> dict:
    template = {"metadata": {"labels": {"app": "w"}}, "spec": pod(volume)["spec"]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": template}}


# (id, volume source, the paths refused)
CASES = [
    ("secret-0", {"secret": {"secretName": "s", "defaultMode": 0}}, []),
    ("secret-0777", {"secret": {"secretName": "s", "defaultMode": 0o777}}, []),
    ("secret-decimal-644", {"secret": {"secretName": "s", "defaultMode": 644}},
     ["spec.volumes[0].secret.defaultMode"]),
    ("secret-negative", {"secret": {"secretName": "s", "defaultMode": -1}}, ["spec.volumes[0].secret.defaultMode"]),
    ("configmap-item", {"configMap": {"name": "c", "items": [{"key": "a", "path": "a", "mode": 0o400},
                                                             {"key": "b", "path": "b", "mode": 512}]}},
     ["spec.volumes[0].configMap.items[1].mode"]),
    ("downward-api", {"downwardAPI": {"defaultMode": 1000, "items": [
        {"path": "n", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 4096}]}},
     ["spec.volumes[0].downwardAPI.defaultMode", "spec.volumes[0].downwardAPI.items[0].mode"]),
    ("projected", {"projected": {"defaultMode": 0o1000, "sources": [
        {"secret": {"name": "s", "items": [{"key": "k", "path": "k", "mode": 0o644}]}},
        {"configMap": {"name": "c", "items": [{"key": "k", "path": "k2", "mode": 0o1777}]}}]}},
     ["spec.volumes[0].projected.defaultMode", "spec.volumes[0].projected.sources[1].configMap.items[0].mode"]),
]


@pytest.mark.parametrize(("volume", "refused"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_file_modes_must_be_between_0_and_0777(volume, refused):
    """Each mode outside 0..0777 is refused at its field path with Kubernetes' message."""
    errors = validate(pod(volume), REGISTRY.lookup("pods"))
    assert [e.path for e in errors] == refused
    assert all(FILE_MODE_MESSAGE in str(e) for e in errors)
    assert FILE_MODE_MESSAGE == "must be a number between 0 and 0777 (octal), both inclusive"


def test_pod_templates_are_checked_too():
    """A Deployment's pod template volume with a bad mode is refused at its template path."""
    errors = validate(deployment({"secret": {"secretName": "s", "defaultMode": 600}}),
                      REGISTRY.lookup("deployments"))
    assert [e.path for e in errors] == ["spec.template.spec.volumes[0].secret.defaultMode"]


def test_octal_yaml_mode_reads_as_kubernetes_and_passes():
    """`defaultMode: 0644` from YAML is 420 and valid; the decimal `644` is refused (as Kubernetes)."""
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n"
            "  containers: [{name: c, image: busybox}]\n"
            "  volumes:\n  - name: v\n    secret:\n      secretName: s\n      defaultMode: {mode}\n")
    [(_, _, good)] = load_documents(text.replace("{mode}", "0644"), source="pod.yaml")
    assert good["spec"]["volumes"][0]["secret"]["defaultMode"] == 420
    assert validate(good, REGISTRY.lookup("pods")) == []
    [(_, _, bad)] = load_documents(text.replace("{mode}", "644"), source="pod.yaml")
    [error] = validate(bad, REGISTRY.lookup("pods"))
    assert str(error) == ("spec.volumes[0].secret.defaultMode: Invalid value: 644: "
                          "must be a number between 0 and 0777 (octal), both inclusive")
