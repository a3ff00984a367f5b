#!/usr/bin/env python3
"""kctl validating admission hook: refuse container images tagged :latest or not tagged.

Reads an admission.k8s.io/v1 AdmissionReview on stdin and prints one on stdout that
denies a Pod or pod template (Deployment, ReplicaSet, DaemonSet, Job, CronJob) if any
container's image has no tag or the tag `latest` and no digest: such an image changes
under your feet, and hosts end up running different code. Naming the container tells
the user what to fix. Standard library only.
"""

import json
import sys

POD_SPEC = {
    "Pod": ["spec"],
    "Deployment": ["spec", "template", "spec"],
    "ReplicaSet": ["spec", "template", "spec"],
    "DaemonSet": ["spec", "template", "spec"],
    "Job": ["spec", "template", "spec"],
    "CronJob": ["spec", "jobTemplate", "spec", "template", "spec"],
}


def unpinned(image):
    """Why an image reference is refused, or None if it names a fixed tag or a digest."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]  # a registry port (host:5000/app) is not a tag
    tag = last.rpartition(":")[2] if ":" in last else ""
    if tag == "latest":
        return "uses the :latest tag"
    if not tag and not digest:
        return "has no tag (which means :latest)"
    return None


def problems(obj):
    spec = obj
    for token in POD_SPEC.get(obj.get("kind"), []):
        spec = spec.get(token) if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or obj.get("kind") not in POD_SPEC:
        return []
    found = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            image = container.get("image") or ""
            why = unpinned(image)
            if why:
                found.append(f'container "{container.get("name")}" image "{image}" {why}')
    return found


def main():
    review = json.load(sys.stdin)
    request = review["request"]
    response = {"uid": request["uid"], "allowed": True}
    obj = request.get("object")
    found = problems(obj) if isinstance(obj, dict) else []
    if found:
        response["allowed"] = False
        response["status"] = {"code": 403, "message": "; ".join(found)
                              + ": pin a version (nginx:1.27) or a digest (nginx@sha256:...)"}
    json.dump({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": response}, sys.stdout)


if __name__ == "__main__":
    main()
