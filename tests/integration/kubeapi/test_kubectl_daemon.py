"""The real kubectl against a real `kctl daemon --listen` on Podman: a Deployment applied, rolled out, Available."""

from __future__ import annotations

import textwrap

DEPLOYMENT = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: hello
    spec:
      replicas: 2
      selector:
        matchLabels: {app: hello}
      template:
        metadata:
          labels: {app: hello}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
          - name: main
            image: localhost/busybox:demo
            command: ["sleep", "3600"]
    """)


def test_apply_rollout_wait_and_get_pods(kube_daemon):
    """kubectl apply -f a Deployment; rollout status and wait --for=condition=Available succeed; get pods -o wide
    shows both pods Running on the daemon's node with an IP; the audit log names the certificate's user."""
    applied = kube_daemon.kubectl("apply", "-f", "-", input=DEPLOYMENT)
    assert applied.returncode == 0, applied.stderr
    assert "deployment.apps/hello created" in applied.stdout
    rollout = kube_daemon.kubectl("rollout", "status", "deployment/hello", "--timeout=60s", timeout=90)
    assert rollout.returncode == 0, rollout.stderr + "\n" + kube_daemon.log_text()[-3000:]
    assert 'deployment "hello" successfully rolled out' in rollout.stdout
    waited = kube_daemon.kubectl("wait", "--for=condition=Available", "deployment/hello", "--timeout=60s", timeout=90)
    assert waited.returncode == 0, waited.stderr
    assert "deployment.apps/hello condition met" in waited.stdout
    pods = kube_daemon.kubectl("get", "pods", "-l", "app=hello", "-o", "wide")
    assert pods.returncode == 0, pods.stderr
    lines = pods.stdout.splitlines()
    assert lines[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    rows = [line.split() for line in lines[1:]]
    assert len(rows) == 2
    for row in rows:
        assert row[0].startswith("hello-") and row[1] == "1/1" and row[2] == "Running"
        assert row[6] == "kube-node" and row[5] != "<none>"
    audit = kube_daemon.kctl("audit", "--user", "kctl-admin", "--kind", "deployments", "-o", "json")
    assert audit.returncode == 0, audit.stderr
    assert '"username":"kctl-admin"' in audit.stdout.replace(" ", "") and "127.0.0.1" in audit.stdout
    deleted = kube_daemon.kubectl("delete", "deployment", "hello", "--timeout=60s", timeout=90)
    assert deleted.returncode == 0, deleted.stderr
