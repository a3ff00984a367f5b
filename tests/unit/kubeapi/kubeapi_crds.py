"""A CustomResourceDefinition the discovery, OpenAPI and Table tests of kctl.kubeapi share (CronTab)."""

from __future__ import annotations

import copy

CRONTAB_CRD: dict = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "crontabs.stable.example.com"},
    "spec": {
        "group": "stable.example.com",
        "scope": "Namespaced",
        "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"],
                  "categories": ["all", "cron"]},
        "versions": [
            {"name": "v1", "served": True, "storage": True,
             "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                      "statusReplicasPath": ".status.replicas"}},
             "additionalPrinterColumns": [
                 {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                 {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                 {"name": "Image", "type": "string", "jsonPath": ".spec.image", "priority": 1},
                 {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
             "schema": {"openAPIV3Schema": {
                 "type": "object",
                 "description": "CronTab runs an image on a schedule.",
                 "properties": {
                     "spec": {"type": "object", "description": "What to run and when.", "properties": {
                         "cronSpec": {"type": "string", "description": "The schedule, in cron format."},
                         "image": {"type": "string", "description": "The image to run."},
                         "replicas": {"type": "integer", "description": "How many to run at once."}}},
                     "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}}},
            {"name": "v1beta1", "served": True, "storage": False,
             "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
        ],
    },
}


def crontab_crd() -> dict:
    """A fresh copy of the CronTab CRD (served at stable.example.com/v1 and v1beta1)."""
    return copy.deepcopy(CRONTAB_CRD)


def crontab(name: str, *, namespace: str = "default", spec: str = "*/5 * * * *", replicas: int = 2) -> dict:
    """A CronTab object."""
    return {"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"cronSpec": spec, "image": "localhost/busybox", "replicas": replicas}}
