"""`kctl scale` and `kctl set image` against a real store: what they write and print."""

from __future__ import annotations

import json

import pytest

WORKLOADS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      initContainers:
      - {name: init, image: busybox:1.36}
      containers:
      - {name: httpd, image: busybox:1.36}
      - {name: side, image: busybox:1.36}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  replicas: 1
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec:
      containers:
      - {name: c, image: busybox:1.36}
---
apiVersion: v1
kind: Pod
metadata: {name: solo}
spec:
  containers:
  - {name: c, image: busybox:1.36}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - {name: job, image: busybox:1.36}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
"""


@pytest.fixture
def workloads(kctl, tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(WORKLOADS)
    result = kctl("apply", "-f", str(path))
    assert result.code == 0, result.err
    return str(path)


def field(kctl, ref: str, path: str) -> str:
    return kctl("get", ref, "-o", f"jsonpath={path}").out


@pytest.mark.parametrize("args,ref", [
    (["deployment/web"], "deployment.apps/web"),
    (["deploy", "web"], "deployment.apps/web"),
    (["replicaset", "rs"], "replicaset.apps/rs"),
], ids=["type-slash-name", "type-name", "replicaset"])
def test_scale_sets_replicas(kctl, workloads, args, ref):
    """scale writes spec.replicas and prints kubectl's line."""
    result = kctl("scale", *args, "--replicas", "5")
    assert (result.code, result.out) == (0, f"{ref} scaled\n"), result.err
    assert field(kctl, ref, "{.spec.replicas}") == "5"


def test_scale_current_replicas_precondition(kctl, workloads):
    """--current-replicas that does not match refuses, changing nothing; a matching one scales."""
    refused = kctl("scale", "deploy/web", "--replicas", "4", "--current-replicas", "3")
    assert (refused.code, refused.err) == (1, "error: Expected replicas to be 3, was 2\n")
    assert field(kctl, "deploy/web", "{.spec.replicas}") == "2"
    assert kctl("scale", "deploy/web", "--replicas", "4", "--current-replicas", "2").code == 0
    assert field(kctl, "deploy/web", "{.spec.replicas}") == "4"


@pytest.mark.parametrize("args,err", [
    (["deploy/web"], "error: The --replicas=COUNT flag is required, and COUNT must be greater than or equal to 0\n"),
    (["configmap/cm", "--replicas", "1"], "error: configmap/cm: cannot scale configmaps: only deployments, "
                                          "replicasets and statefulsets have replicas\n"),
], ids=["no-replicas", "not-scalable"])
def test_scale_refusals(kctl, workloads, args, err):
    """A missing --replicas and a kind without replicas are one error line, exit 1."""
    result = kctl("scale", *args)
    assert (result.code, result.err) == (1, err)


def test_scale_from_file_and_dry_run(kctl, workloads, tmp_path):
    """-f scales what a manifest names; --dry-run=client writes nothing."""
    path = tmp_path / "rs.yaml"
    path.write_text(WORKLOADS.split("---\n")[1])
    assert kctl("scale", "-f", str(path), "--replicas", "0").out == "replicaset.apps/rs scaled\n"
    assert field(kctl, "rs/rs", "{.spec.replicas}") == "0"
    assert kctl("scale", "rs/rs", "--replicas", "3", "--dry-run", "client").out == \
        "replicaset.apps/rs scaled (dry run)\n"
    assert field(kctl, "rs/rs", "{.spec.replicas}") == "0"


def images(kctl, ref: str, path: str) -> str:
    return field(kctl, ref, path)


@pytest.mark.parametrize("args,ref,path,expected", [
    (["deployment/web", "httpd=nginx:1.27"], "deploy/web",
     "{.spec.template.spec.containers[*].image}", "nginx:1.27 busybox:1.36"),
    (["deploy", "web", "init=alpine:3", "side=alpine:3"], "deploy/web",
     "{.spec.template.spec.initContainers[0].image} {.spec.template.spec.containers[1].image}", "alpine:3 alpine:3"),
    (["deploy/web", "*=nginx:1.27"], "deploy/web",
     "{.spec.template.spec.initContainers[*].image} {.spec.template.spec.containers[*].image}",
     "nginx:1.27 nginx:1.27 nginx:1.27"),
    (["pod/solo", "c=nginx:1.27"], "pod/solo", "{.spec.containers[0].image}", "nginx:1.27"),
    (["cronjob/nightly", "job=nginx:1.27"], "cronjob/nightly",
     "{.spec.jobTemplate.spec.template.spec.containers[0].image}", "nginx:1.27"),
], ids=["one-container", "init-and-second", "star", "pod", "cronjob"])
def test_set_image(kctl, workloads, args, ref, path, expected):
    """set image changes the named containers (or all with *) wherever the kind keeps its pod spec."""
    result = kctl("set", "image", *args)
    assert result.code == 0, result.err
    assert result.out.endswith(" image updated\n")
    assert images(kctl, ref, path) == expected


def test_set_image_unknown_container_and_no_change(kctl, workloads):
    """An unknown container is kubectl's error and changes nothing; an image already set prints nothing."""
    before = json.loads(kctl("get", "deploy/web", "-o", "json").out)["metadata"]["resourceVersion"]
    bad = kctl("set", "image", "deploy/web", "nope=nginx")
    assert (bad.code, bad.err) == (1, 'error: unable to find container named "nope"\n')
    same = kctl("set", "image", "deploy/web", "httpd=busybox:1.36")
    assert (same.code, same.out) == (0, "")
    after = json.loads(kctl("get", "deploy/web", "-o", "json").out)["metadata"]["resourceVersion"]
    assert before == after


def test_set_image_needs_an_update(kctl, workloads):
    """Without CONTAINER=IMAGE there is nothing to do: exit 1."""
    result = kctl("set", "image", "deploy/web")
    assert (result.code, result.err) == (1, "error: at least one image update is required\n")
