"""`kctl describe`'s pod spec sections (containers, probes, environment, mounts, volumes, pod template), pinned.

The expected texts are the ones kctl printed before kctl/output/describe.py was split into a package
(issue 13): the split must not change a byte. `\x20` marks the trailing blanks kubectl's layout keeps.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import builtin_registry
from kctl.output.describe import PrefixWriter, describe, describe_pod_template

NOW = datetime(2026, 12, 2, 17, 0, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Timestamps print in the local zone, as kubectl's do: pin it to UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


CREATED = "2026-12-02T16:00:00Z"
APP = {"name": "app", "image": "nginx:1.25", "command": ["sh", "-c"], "args": ["nginx -g 'daemon off;'"],
       "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP", "hostPort": 5353}],
       "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m", "memory": "64Mi"}},
       "livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 5},
       "readinessProbe": {"httpGet": {"port": 8080, "path": "/ready"}},
       "startupProbe": {"tcpSocket": {"port": 80}, "failureThreshold": 30},
       "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "APP_"},
                   {"secretRef": {"name": "creds", "optional": True}}],
       "env": [{"name": "MODE", "value": "prod"},
               {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
               {"name": "APP_LABEL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
               {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
               {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
               {"name": "COLOR",
                "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "color", "optional": True}}}],
       "volumeMounts": [{"mountPath": "/etc/app", "name": "config", "readOnly": True},
                        {"mountPath": "/data", "name": "data", "subPath": "app"}]}
VOLUMES = [{"name": "config", "configMap": {"name": "settings"}},
           {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
           {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
           {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
           {"name": "tls", "secret": {"secretName": "tls", "optional": True}}]
POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web-0", "namespace": "default", "uid": "u1", "labels": {"app": "web"},
                    "creationTimestamp": CREATED,
                    "ownerReferences": [{"kind": "StatefulSet", "name": "web", "controller": True}]},
       "spec": {"nodeName": "h1", "serviceAccountName": "default", "priority": 0,
                "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
                "containers": [APP], "volumes": VOLUMES,
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}]},
       "status": {"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.88.0.5", "podIPs": [{"ip": "10.88.0.5"}],
                  "startTime": CREATED, "qosClass": "Burstable",
                  "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
                  "initContainerStatuses": [{"name": "init", "containerID": "podman://1", "imageID": "busybox@sha256:1",
                                             "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                                      "startedAt": CREATED, "finishedAt": CREATED}},
                                             "ready": True}],
                  "containerStatuses": [{"name": "app", "containerID": "podman://2", "imageID": "nginx@sha256:2",
                                         "state": {"running": {"startedAt": CREATED}}, "ready": True, "restartCount": 1,
                                         "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                                                      "startedAt": CREATED, "finishedAt": CREATED}}}]}}
TEMPLATE = {"metadata": {"labels": {"app": "web"}, "annotations": {"team": "core"}},
            "spec": {"serviceAccountName": "web", "containers": [APP], "volumes": VOLUMES, "priorityClassName": "high",
                     "nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "dedicated", "value": "web",
                                                                       "effect": "NoSchedule"}]}}

POD_TEXT = """\
Name:             web-0
Namespace:        default
Priority:         0
Service Account:  default
Node:             h1/10.0.0.1
Start Time:       Wed, 02 Dec 2026 16:00:00 +0000
Labels:           app=web
Annotations:      <none>
Status:           Running
IP:               10.88.0.5
IPs:
  IP:           10.88.0.5
Controlled By:  StatefulSet/web
Init Containers:
  init:
    Container ID:  podman://1
    Image:         busybox
    Image ID:      busybox@sha256:1
    Port:          <none>
    Host Port:     <none>
    Command:
      true
    State:          Terminated
      Reason:       Completed
      Exit Code:    0
      Started:      Wed, 02 Dec 2026 16:00:00 +0000
      Finished:     Wed, 02 Dec 2026 16:00:00 +0000
    Ready:          True
    Restart Count:  0
    Environment:    <none>
    Mounts:         <none>
Containers:
  app:
    Container ID:  podman://2
    Image:         nginx:1.25
    Image ID:      nginx@sha256:2
    Ports:         80/TCP, 53/UDP
    Host Ports:    0/TCP, 5353/UDP
    Command:
      sh
      -c
    Args:
      nginx -g 'daemon off;'
    State:          Running
      Started:      Wed, 02 Dec 2026 16:00:00 +0000
    Last State:     Terminated
      Reason:       OOMKilled
      Exit Code:    137
      Started:      Wed, 02 Dec 2026 16:00:00 +0000
      Finished:     Wed, 02 Dec 2026 16:00:00 +0000
    Ready:          True
    Restart Count:  1
    Limits:
      cpu:     500m
      memory:  128Mi
    Requests:
      cpu:      250m
      memory:   64Mi
    Liveness:   exec [cat /tmp/healthy] delay=0s timeout=1s period=5s #success=1 #failure=3
    Readiness:  http-get http://:8080/ready delay=0s timeout=1s period=10s #success=1 #failure=3
    Startup:    tcp-socket :80 delay=0s timeout=1s period=10s #success=1 #failure=30
    Environment Variables from:
      settings  ConfigMap with prefix 'APP_'  Optional: false
      creds     Secret                        Optional: true
    Environment:
      MODE:       prod
      POD_NAME:   web-0 (v1:metadata.name)
      APP_LABEL:  web (v1:metadata.labels['app'])
      CPU:        500m (limits.cpu)
      PASSWORD:   <set to the key 'password' in secret 'creds'>      Optional: false
      COLOR:      <set to the key 'color' of config map 'settings'>  Optional: true
    Mounts:
      /data from data (rw,path="app")
      /etc/app from config (ro)
Conditions:
  Type          Status
  Initialized   True\x20
  Ready         True\x20
Volumes:
  config:
    Type:      ConfigMap (a volume populated by a ConfigMap)
    Name:      settings
    Optional:  false
  data:
    Type:       PersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same namespace)
    ClaimName:  data
    ReadOnly:   false
  cache:
    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)
    Medium:    \x20
    SizeLimit:  1Gi
  host:
    Type:          HostPath (bare host directory volume)
    Path:          /var/log
    HostPathType:  Directory
  tls:
    Type:        Secret (a volume populated by a Secret)
    SecretName:  tls
    Optional:    true
QoS Class:       Burstable
Node-Selectors:  <none>
Tolerations:     node.kubernetes.io/not-ready:NoExecute op=Exists for 300s
Events:          <none>
"""

TEMPLATE_TEXT = """\
Pod Template:
  Labels:           app=web
  Annotations:      team: core
  Service Account:  web
  Containers:
   app:
    Image:       nginx:1.25
    Ports:       80/TCP, 53/UDP
    Host Ports:  0/TCP, 5353/UDP
    Command:
      sh
      -c
    Args:
      nginx -g 'daemon off;'
    Limits:
      cpu:     500m
      memory:  128Mi
    Requests:
      cpu:      250m
      memory:   64Mi
    Liveness:   exec [cat /tmp/healthy] delay=0s timeout=1s period=5s #success=1 #failure=3
    Readiness:  http-get http://:8080/ready delay=0s timeout=1s period=10s #success=1 #failure=3
    Startup:    tcp-socket :80 delay=0s timeout=1s period=10s #success=1 #failure=30
    Environment Variables from:
      settings  ConfigMap with prefix 'APP_'  Optional: false
      creds     Secret                        Optional: true
    Environment:
      MODE:       prod
      POD_NAME:    (v1:metadata.name)
      APP_LABEL:   (v1:metadata.labels['app'])
      CPU:        500m (limits.cpu)
      PASSWORD:   <set to the key 'password' in secret 'creds'>      Optional: false
      COLOR:      <set to the key 'color' of config map 'settings'>  Optional: true
    Mounts:
      /data from data (rw,path="app")
      /etc/app from config (ro)
  Volumes:
   config:
    Type:      ConfigMap (a volume populated by a ConfigMap)
    Name:      settings
    Optional:  false
   data:
    Type:       PersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same namespace)
    ClaimName:  data
    ReadOnly:   false
   cache:
    Type:       EmptyDir (a temporary directory that shares a pod's lifetime)
    Medium:    \x20
    SizeLimit:  1Gi
   host:
    Type:          HostPath (bare host directory volume)
    Path:          /var/log
    HostPathType:  Directory
   tls:
    Type:               Secret (a volume populated by a Secret)
    SecretName:         tls
    Optional:           true
  Priority Class Name:  high
  Node-Selectors:       disk=ssd
  Tolerations:          dedicated=web:NoSchedule
"""


def test_pod_sections():
    """A running pod with an init container, probes, every env source, mounts and volumes reads as before."""
    assert describe(POD, builtin_registry().lookup("pods"), [], now=NOW) == POD_TEXT


def test_pod_template_sections():
    """A pod template (describe deployment, rollout history --revision) reads as before, field refs unresolved."""
    w = PrefixWriter()
    describe_pod_template(w, TEMPLATE)
    assert w.text() == TEMPLATE_TEXT
