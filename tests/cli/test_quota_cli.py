"""Quotas, LimitRanges and PriorityClasses from the command line: kubectl-made manifests apply, what exceeds a quota
is one clear line and a non-zero exit, `get quota` shows usage once the quota controller ran, `get pc` and
`describe quota|limits|pc` print kubectl's layouts."""

from __future__ import annotations

import re

import pytest

# `kubectl create quota q --hard=pods=2,cpu=1 --dry-run=client -o yaml`
QUOTA = """\
apiVersion: v1
kind: ResourceQuota
metadata:
  creationTimestamp: null
  name: q
spec:
  hard:
    cpu: "1"
    pods: "2"
status: {}
"""

# `kubectl create priorityclass high --value=1000 --description=high --preemption-policy=Never --dry-run=client -o yaml`
PRIORITY_CLASS = """\
apiVersion: scheduling.k8s.io/v1
description: high
kind: PriorityClass
metadata:
  creationTimestamp: null
  name: high
preemptionPolicy: Never
value: 1000
"""

LIMIT_RANGE = """\
apiVersion: v1
kind: LimitRange
metadata: {name: lr}
spec:
  limits:
  - type: Container
    max: {cpu: "1"}
    defaultRequest: {cpu: 250m}
"""


def pod(name: str, cpu: str) -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: app
    image: busybox
    resources: {{requests: {{cpu: {cpu}}}}}
"""


def _cells(out: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if line.strip()]


def test_a_pod_over_the_quota_is_one_clear_line(kctl):
    """Applying a pod that would exceed the quota prints Kubernetes' message on one line and exits 7 (Forbidden)."""
    assert kctl("apply", "-f", "-", input=QUOTA).out == "resourcequota/q created\n"
    assert kctl("apply", "-f", "-", input=pod("a", "600m")).code == 0
    result = kctl("apply", "-f", "-", input=pod("b", "600m"))
    assert result.code == 7
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert 'pods "b" is forbidden: exceeded quota: q, requested: cpu=600m, used: cpu=600m, limited: cpu=1' in lines[0]
    assert "Traceback" not in result.err


def test_a_pod_without_requests_under_a_cpu_quota_is_refused(kctl):
    """A quota on cpu makes every container state its cpu request: `must specify cpu for: app`."""
    kctl("apply", "-f", "-", input=QUOTA)
    bare = pod("a", "1").replace("    resources: {requests: {cpu: 1}}\n", "")
    result = kctl("apply", "-f", "-", input=bare)
    assert result.code == 7 and "failed quota: q: must specify cpu for: app" in result.err


def _controller_pass(api) -> None:
    """Run the quota controller (the daemon's part) until it has written the quota's status."""
    import threading

    from kctl.controllers.manager import ControllerManager
    from kctl.controllers.resourcequota import ResourceQuotaController
    from kctl.testing.waiting import wait_for

    stop = threading.Event()
    manager = ControllerManager(api, [ResourceQuotaController()], leader_election=False)
    manager.start(stop)
    try:
        wait_for(lambda: (api.get(api.resource("quota"), "q", namespace="default").get("status") or {}).get("used"),
                 what="the quota's status")
    finally:
        stop.set()
        manager.stop()


def test_get_and_describe_quota_show_usage_once_the_controller_ran(kctl, server):
    """Before the controller REQUEST is empty (as kubectl shows an unseen quota); after, `cpu: 600m/1, pods: 1/2`."""
    kctl("apply", "-f", "-", input=QUOTA)
    assert kctl("apply", "-f", "-", input=pod("a", "600m")).code == 0
    assert len(_cells(kctl("get", "quota").out)[1]) == 2, "only NAME and AGE: REQUEST and LIMIT are empty"
    _controller_pass(server)
    row = _cells(kctl("get", "quota").out)[1]
    assert row[0] == "q" and row[2] == "cpu: 600m/1, pods: 1/2"
    described = kctl("describe", "quota", "q")
    assert described.code == 0
    assert _cells(described.out) == [["Name:", "q"], ["Namespace:", "default"], ["Resource", "Used", "Hard"],
                                     ["--------", "----", "----"], ["cpu", "600m", "1"], ["pods", "1", "2"]]


def test_describe_limits_and_priorityclass(kctl):
    """describe prints kubectl's LimitRange table (`-` where unset) and a PriorityClass's fields."""
    kctl("apply", "-f", "-", input=LIMIT_RANGE)
    kctl("apply", "-f", "-", input=PRIORITY_CLASS)
    limits = _cells(kctl("describe", "limits", "lr").out)
    assert limits[2] == ["Type", "Resource", "Min", "Max", "Default Request", "Default Limit",
                         "Max Limit/Request Ratio"]
    assert limits[4] == ["Container", "cpu", "-", "1", "250m", "-", "-"]
    pc = _cells(kctl("describe", "pc", "high").out)
    assert pc[:5] == [["Name:", "high"], ["Value:", "1000"], ["GlobalDefault:", "false"],
                      ["PreemptionPolicy:", "Never"], ["Description:", "high"]]
    # kubectl prints every annotation here as key=value, last-applied-configuration included
    assert pc[5][0] == "Annotations:" and pc[5][1].startswith("kubectl.kubernetes.io/last-applied-configuration=")


def test_limit_range_defaults_reach_applied_pods(kctl):
    """A pod applied into a namespace with a LimitRange gets its default request; one over max is refused."""
    kctl("apply", "-f", "-", input=LIMIT_RANGE)
    bare = pod("a", "1").replace("    resources: {requests: {cpu: 1}}\n", "")
    assert kctl("apply", "-f", "-", input=bare).code == 0
    got = kctl("get", "pod", "a", "-o", "jsonpath={.spec.containers[0].resources}")
    assert '"requests":{"cpu":"250m"}' in got.out.replace(" ", "")
    over = pod("b", "2").replace("requests: {cpu: 2}", "limits: {cpu: 2}")
    result = kctl("apply", "-f", "-", input=over)
    assert result.code == 7
    assert 'pods "b" is forbidden: maximum cpu usage per Container is 1, but limit is 2' in result.err


@pytest.mark.parametrize("manifest, resource, header, row", [
    (QUOTA, "quota", ["NAME", "AGE", "REQUEST", "LIMIT"], ["q"]),
    (PRIORITY_CLASS, "pc", ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"], ["high", "1000", "false"]),
], ids=["quota", "priorityclass"])
def test_kubectl_made_manifests_apply_unchanged(kctl, manifest, resource, header, row):
    """kubectl's generated manifests apply, apply again unchanged, and list with kubectl's columns."""
    assert kctl("apply", "-f", "-", input=manifest).code == 0
    again = kctl("apply", "-f", "-", input=manifest)
    assert again.code == 0 and again.out.endswith(" unchanged\n")
    lines = _cells(kctl("get", resource).out)
    assert lines[0] == header
    assert lines[1][:len(row)] == row
    if resource == "pc":
        assert lines[1][-1] == "Never"
