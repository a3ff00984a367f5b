#!/usr/bin/env python3
"""kctl mutating admission hook: label what is written, give containers default requests.

Reads an admission.k8s.io/v1 AdmissionReview on stdin and prints one on stdout whose
response carries a JSON Patch (RFC 6902, base64) that
- adds the label kctl.io/managed: "true" to the object, and
- for Pods and pod templates (Deployment, ReplicaSet, DaemonSet, Job, CronJob), gives
  every container without them resources.requests cpu 100m and memory 64Mi.
Standard library only; the same logic would serve a Kubernetes mutating webhook.
"""

import base64
import json
import sys

LABEL, LABEL_VALUE = "kctl.io/managed", "true"
DEFAULT_REQUESTS = {"cpu": "100m", "memory": "64Mi"}
# Where each kind keeps its pod spec, as JSON Pointer tokens.
POD_SPEC = {
    "Pod": ["spec"],
    "Deployment": ["spec", "template", "spec"],
    "ReplicaSet": ["spec", "template", "spec"],
    "DaemonSet": ["spec", "template", "spec"],
    "Job": ["spec", "template", "spec"],
    "CronJob": ["spec", "jobTemplate", "spec", "template", "spec"],
}


def pointer(*tokens):
    """A JSON Pointer from raw tokens ('/' and '~' escaped as RFC 6901 says)."""
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def label_ops(obj):
    if obj.get("metadata") is None:
        return [{"op": "add", "path": "/metadata", "value": {"labels": {LABEL: LABEL_VALUE}}}]
    labels = obj["metadata"].get("labels")
    if labels is None:
        return [{"op": "add", "path": "/metadata/labels", "value": {LABEL: LABEL_VALUE}}]
    if labels.get(LABEL) == LABEL_VALUE:
        return []
    return [{"op": "add", "path": pointer("metadata", "labels", LABEL), "value": LABEL_VALUE}]


def request_ops(obj):
    where = POD_SPEC.get(obj.get("kind"))
    spec = obj
    for token in where or []:
        spec = spec.get(token) if isinstance(spec, dict) else None
    if not isinstance(spec, dict):
        return []
    ops = []
    for key in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(key) or []):
            base = [*where, key, i]
            resources = container.get("resources")
            if resources is None:
                ops.append({"op": "add", "path": pointer(*base, "resources"),
                            "value": {"requests": dict(DEFAULT_REQUESTS)}})
                continue
            requests = resources.get("requests")
            if requests is None:
                ops.append({"op": "add", "path": pointer(*base, "resources", "requests"),
                            "value": dict(DEFAULT_REQUESTS)})
                continue
            for name, quantity in DEFAULT_REQUESTS.items():
                if name not in requests:
                    ops.append({"op": "add", "path": pointer(*base, "resources", "requests", name),
                                "value": quantity})
    return ops


def main():
    review = json.load(sys.stdin)
    request = review["request"]
    response = {"uid": request["uid"], "allowed": True}
    obj = request.get("object")
    if request.get("operation") in ("CREATE", "UPDATE") and isinstance(obj, dict):
        ops = label_ops(obj) + request_ops(obj)
        if ops:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
    json.dump({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": response}, sys.stdout)


if __name__ == "__main__":
    main()
