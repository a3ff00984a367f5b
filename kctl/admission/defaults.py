"""Built-in defaulting: fills the fields Kubernetes fills before admission sees an object.

The API layer (kctl.api) calls `apply_defaults` first on every create and update, before
mutating hooks and schema validation, exactly where the Kubernetes API server runs the
generated `SetDefaults_*` functions (k8s.io/kubernetes/pkg/apis/{core,apps,batch}/v1/
defaults.go). The rules here follow those functions; a set value is never overwritten
(the one exception, as in Kubernetes: a Namespace always carries the label
`kubernetes.io/metadata.name` equal to its name).

Deliberate differences from Kubernetes, all listed in docs/admission.md:
- a Job's pod template gets no restartPolicy (Kubernetes requires OnFailure or Never
  there, so the user must choose);
- a status given on create is kept (Kubernetes resets it): `prepare_for_create` only fills
  what is unset;
- `enableServiceLinks` is not defaulted (Podman pods get no service environment).

`prepare_for_create` is what Kubernetes' registry strategies do to a new object
(PrepareForCreate: a Pod's status.phase Pending and qosClass, a Namespace's phase Active),
`generate_job_selector` what the Job strategy does before validation (the selector and
pod template labels made of the Job's uid), and `tracks_generation` says which kinds carry
metadata.generation at all. kctl.admission.chain calls them; the API layer asks
`tracks_generation`.

Pure dict work on a private copy, fast enough for thousands of objects per apply.
"""

from __future__ import annotations

from typing import Any, Callable

from kctl.machinery.quantity import parse_quantity
from kctl.machinery.resources import KCTL_GROUP, ResourceType

#: defaultMode of configMap / secret / downwardAPI / projected volumes (0644).
DEFAULT_FILE_MODE = 0o644
#: defaultMode of secret volumes: 0600, not Kubernetes' 0644, so that secret files are
#: not world-readable (Podman gives the files to the container's user; docs/agent.md).
SECRET_FILE_MODE = 0o600
TERMINATION_GRACE_PERIOD_SECONDS = 30
HOOK_TIMEOUT_SECONDS = 10
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: the labels Kubernetes generates on a Job's pod template (legacy and batch.kubernetes.io/ names)
JOB_CONTROLLER_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")
JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
#: the one label a generated Job selector matches on
JOB_SELECTOR_LABEL = "batch.kubernetes.io/controller-uid"
#: built-in kinds whose registry strategy sets metadata.generation (PrepareForCreate sets 1);
#: the others (ConfigMap, Secret, Service, Namespace, Node, ...) have none, as in Kubernetes.
GENERATION_KINDS = frozenset({
    "Pod", "ReplicationController", "Deployment.apps", "ReplicaSet.apps", "StatefulSet.apps",
    "DaemonSet.apps", "Job.batch", "CronJob.batch", "Ingress.networking.k8s.io",
    "NetworkPolicy.networking.k8s.io", "PodDisruptionBudget.policy",
    "EndpointSlice.discovery.k8s.io", "CustomResourceDefinition.apiextensions.k8s.io",
})


def apply_defaults(obj: dict, rt: ResourceType) -> dict:
    """A defaulted deep copy of `obj`, an object of kind `rt`; `obj` itself is left alone."""
    out = _copy(obj)
    if not isinstance(out, dict):
        return out
    default = _BY_KIND.get((rt.group, rt.kind))
    if default is not None:
        default(out)
    return out


# --------------------------------------------------------------------------- helpers


def _copy(value: Any) -> Any:
    """Deep copy of a JSON-shaped value (several times faster than copy.deepcopy)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _dict(parent: dict, key: str) -> dict | None:
    """parent[key] if it is a dict, else None (absent, null or malformed: left to validation)."""
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def _dicts(parent: dict, key: str) -> list[dict]:
    """The dict items of the list parent[key] ([] when absent or malformed)."""
    value = parent.get(key)
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def _spec(obj: dict) -> dict | None:
    return _dict(obj, "spec")


def _ensure_dict(parent: dict, key: str) -> dict | None:
    """parent[key], created as {} when absent or null; None when it holds a non-dict."""
    value = parent.get(key)
    if value is None:
        value = parent[key] = {}
    return value if isinstance(value, dict) else None


def _default(parent: dict, key: str, value: Any) -> None:
    """Set parent[key] = value unless it holds a value (null counts as unset, as in Go)."""
    if parent.get(key) is None:
        parent[key] = value


def _is_unset(value: Any) -> bool:
    """True for what Go's zero value would decode to: absent, null, "" (not 0 or false)."""
    return value is None or value == ""


# --------------------------------------------------------------------------- pod spec


def _image_tag(image: str) -> tuple[str, bool]:
    """(tag, has_digest) of an image reference; tag is "latest" when neither tag nor digest."""
    name, at, _digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    if not tag and not at:
        tag = "latest"
    return tag, bool(at)


def _default_http_get(action: dict | None) -> None:
    if action is None:
        return
    if _is_unset(action.get("path")):
        action["path"] = "/"
    if _is_unset(action.get("scheme")):
        action["scheme"] = "HTTP"


def _default_probe(probe: dict | None) -> None:
    if probe is None:
        return
    _default(probe, "timeoutSeconds", 1)
    _default(probe, "periodSeconds", 10)
    _default(probe, "successThreshold", 1)
    _default(probe, "failureThreshold", 3)
    _default_http_get(_dict(probe, "httpGet"))


def _default_field_ref(holder: dict | None) -> None:
    """An ObjectFieldSelector (`fieldRef`) inside `holder` gets apiVersion v1."""
    if holder is None:
        return
    ref = _dict(holder, "fieldRef")
    if ref is not None and _is_unset(ref.get("apiVersion")):
        ref["apiVersion"] = "v1"


def _default_container(container: dict) -> None:
    if _is_unset(container.get("imagePullPolicy")):
        image = container.get("image")
        if isinstance(image, str):
            tag, _ = _image_tag(image)
            container["imagePullPolicy"] = "Always" if tag == "latest" else "IfNotPresent"
    if _is_unset(container.get("terminationMessagePath")):
        container["terminationMessagePath"] = "/dev/termination-log"
    if _is_unset(container.get("terminationMessagePolicy")):
        container["terminationMessagePolicy"] = "File"
    for port in _dicts(container, "ports"):
        if _is_unset(port.get("protocol")):
            port["protocol"] = "TCP"
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(_dict(container, key))
    lifecycle = _dict(container, "lifecycle")
    if lifecycle is not None:
        for key in ("postStart", "preStop"):
            handler = _dict(lifecycle, key)
            if handler is not None:
                _default_http_get(_dict(handler, "httpGet"))
    for env in _dicts(container, "env"):
        _default_field_ref(_dict(env, "valueFrom"))


_VOLUME_SOURCES = (
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret",
    "nfs", "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder",
    "cephfs", "flocker", "downwardAPI", "fc", "azureFile", "configMap", "vsphereVolume",
    "quobyte", "azureDisk", "photonPersistentDisk", "projected", "portworxVolume", "scaleIO",
    "storageos", "csi", "ephemeral", "image",
)


def _default_volume(volume: dict) -> None:
    if all(volume.get(source) is None for source in _VOLUME_SOURCES):
        volume["emptyDir"] = {}  # also turns `emptyDir:` (null in YAML) into {}
        return
    for key in ("configMap", "secret", "downwardAPI", "projected"):
        source = _dict(volume, key)
        if source is not None:
            _default(source, "defaultMode", SECRET_FILE_MODE if key == "secret" else DEFAULT_FILE_MODE)
    host_path = _dict(volume, "hostPath")
    if host_path is not None:
        _default(host_path, "type", "")
    downward = _dict(volume, "downwardAPI")
    if downward is not None:
        for item in _dicts(downward, "items"):
            _default_field_ref(item)
    projected = _dict(volume, "projected")
    if projected is not None:
        for source in _dicts(projected, "sources"):
            token = _dict(source, "serviceAccountToken")
            if token is not None:
                _default(token, "expirationSeconds", 3600)
            downward = _dict(source, "downwardAPI")
            if downward is not None:
                for item in _dicts(downward, "items"):
                    _default_field_ref(item)


def _default_pod_spec(spec: dict, *, restart_policy: str | None = "Always") -> None:
    """SetDefaults_PodSpec and the defaults of everything a PodSpec contains."""
    if _is_unset(spec.get("dnsPolicy")):
        spec["dnsPolicy"] = "ClusterFirst"
    if restart_policy is not None and _is_unset(spec.get("restartPolicy")):
        spec["restartPolicy"] = restart_policy
    if _is_unset(spec.get("schedulerName")):
        spec["schedulerName"] = "default-scheduler"
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = TERMINATION_GRACE_PERIOD_SECONDS
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in _dicts(spec, key):
            _default_container(container)
    for volume in _dicts(spec, "volumes"):
        _default_volume(volume)


def _default_pod_template(owner_spec: dict | None, *, restart_policy: str | None = "Always") -> None:
    """The PodTemplateSpec at owner_spec.template (Deployment, ReplicaSet, DaemonSet, Job)."""
    if owner_spec is None:
        return
    template = _dict(owner_spec, "template")
    if template is None:
        return
    spec = _dict(template, "spec")
    if spec is not None:
        _default_pod_spec(spec, restart_policy=restart_policy)


def _requests_from_limits(container: dict) -> None:
    """SetDefaults_Pod: a resource with a limit and no request gets the limit as request."""
    resources = _dict(container, "resources")
    if resources is None:
        return
    limits = _dict(resources, "limits")
    if not limits:
        return
    requests = _ensure_dict(resources, "requests")
    if requests is None:
        return
    for name, quantity in limits.items():
        requests.setdefault(name, quantity)


# --------------------------------------------------------------------------- kinds


def _default_pod(obj: dict) -> None:
    spec = _spec(obj)
    if spec is None:
        return
    _default_pod_spec(spec)
    # SetDefaults_Pod: only for Pods, not for templates (their pods get it when created).
    for key in ("initContainers", "containers"):
        for container in _dicts(spec, key):
            _requests_from_limits(container)
    if spec.get("hostNetwork") is True:
        for key in ("initContainers", "containers"):
            for container in _dicts(spec, key):
                for port in _dicts(container, "ports"):
                    if not port.get("hostPort") and port.get("containerPort") is not None:
                        port["hostPort"] = port["containerPort"]


def _default_rolling_update(spec: dict, key: str, *, max_unavailable: int | str, max_surge: int | str) -> None:
    """strategy.type RollingUpdate unless set, and its rollingUpdate bounds (Deployment, DaemonSet)."""
    strategy = _ensure_dict(spec, key)
    if strategy is None:
        return
    if _is_unset(strategy.get("type")):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = _ensure_dict(strategy, "rollingUpdate")
        if rolling is not None:
            _default(rolling, "maxUnavailable", max_unavailable)
            _default(rolling, "maxSurge", max_surge)


def _default_deployment(obj: dict) -> None:
    spec = _spec(obj)
    if spec is None:
        return
    _default(spec, "replicas", 1)
    _default_rolling_update(spec, "strategy", max_unavailable="25%", max_surge="25%")
    _default(spec, "revisionHistoryLimit", 10)
    _default(spec, "progressDeadlineSeconds", 600)
    _default_pod_template(spec)


def _default_replica_set(obj: dict) -> None:
    spec = _spec(obj)
    if spec is None:
        return
    _default(spec, "replicas", 1)
    _default_pod_template(spec)


def _default_daemon_set(obj: dict) -> None:
    spec = _spec(obj)
    if spec is None:
        return
    _default_rolling_update(spec, "updateStrategy", max_unavailable=1, max_surge=0)
    _default(spec, "revisionHistoryLimit", 10)
    _default_pod_template(spec)


def _default_stateful_set(obj: dict) -> None:
    """SetDefaults_StatefulSet: OrderedReady, RollingUpdate with partition 0, Retain claims, 1 replica,
    history 10; each volumeClaimTemplate as a claim (volumeMode Filesystem, phase Pending)."""
    spec = _spec(obj)
    if spec is None:
        return
    _default(spec, "podManagementPolicy", "OrderedReady")
    strategy = _ensure_dict(spec, "updateStrategy")
    if strategy is not None:
        if _is_unset(strategy.get("type")):
            strategy["type"] = "RollingUpdate"
            _ensure_dict(strategy, "rollingUpdate")
        rolling = _dict(strategy, "rollingUpdate")
        if strategy["type"] == "RollingUpdate" and rolling is not None:
            _default(rolling, "partition", 0)
    retention = _ensure_dict(spec, "persistentVolumeClaimRetentionPolicy")
    if retention is not None:
        _default(retention, "whenDeleted", "Retain")
        _default(retention, "whenScaled", "Retain")
    _default(spec, "replicas", 1)
    _default(spec, "revisionHistoryLimit", 10)
    _default_pod_template(spec)
    for template in _dicts(spec, "volumeClaimTemplates"):
        claim_spec = _dict(template, "spec")
        if claim_spec is not None:
            _default(claim_spec, "volumeMode", "Filesystem")
        status = _ensure_dict(template, "status")
        if status is not None:
            _default(status, "phase", "Pending")


def _default_job(obj: dict) -> None:
    spec = _spec(obj)
    if spec is None:
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6
    if _is_unset(spec.get("completionMode")):
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    failure_policy = _dict(spec, "podFailurePolicy")
    if failure_policy is not None:
        for rule in _dicts(failure_policy, "rules"):
            for pattern in _dicts(rule, "onPodConditions"):
                if _is_unset(pattern.get("status")):
                    pattern["status"] = "True"
    if _is_unset(spec.get("podReplacementPolicy")):
        spec["podReplacementPolicy"] = "Failed" if failure_policy is not None else "TerminatingOrFailed"
    # batch/v1 (unlike apps/v1) gives a Job without labels its pod template's labels.
    template = _dict(spec, "template")
    template_meta = _dict(template, "metadata") if template is not None else None
    template_labels = _dict(template_meta, "labels") if template_meta is not None else None
    if template_labels:
        metadata = _ensure_dict(obj, "metadata")
        if metadata is not None and not metadata.get("labels"):
            metadata["labels"] = dict(template_labels)
    _default_pod_template(spec, restart_policy=None)


def _default_cron_job(obj: dict) -> None:
    spec = _spec(obj)
    if spec is None:
        return
    if _is_unset(spec.get("concurrencyPolicy")):
        spec["concurrencyPolicy"] = "Allow"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    _default(spec, "successfulJobsHistoryLimit", 3)
    _default(spec, "failedJobsHistoryLimit", 1)
    job_template = _dict(spec, "jobTemplate")
    if job_template is not None:
        _default_pod_template(_dict(job_template, "spec"), restart_policy=None)


def _default_service(obj: dict) -> None:
    spec = _spec(obj)
    if spec is None:
        return
    if _is_unset(spec.get("sessionAffinity")):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "ClientIP":
        config = _ensure_dict(spec, "sessionAffinityConfig")
        client_ip = _ensure_dict(config, "clientIP") if config is not None else None
        if client_ip is not None:
            _default(client_ip, "timeoutSeconds", 10800)
    if _is_unset(spec.get("type")):
        spec["type"] = "ClusterIP"
    for port in _dicts(spec, "ports"):
        if _is_unset(port.get("protocol")):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, "") and port.get("port") is not None:
            port["targetPort"] = port["port"]
    kind = spec["type"]
    if kind in ("NodePort", "LoadBalancer") and _is_unset(spec.get("externalTrafficPolicy")):
        spec["externalTrafficPolicy"] = "Cluster"
    if kind in ("ClusterIP", "NodePort", "LoadBalancer") and _is_unset(spec.get("internalTrafficPolicy")):
        spec["internalTrafficPolicy"] = "Cluster"
    if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True


def _default_endpoints(obj: dict) -> None:
    for subset in _dicts(obj, "subsets"):
        for port in _dicts(subset, "ports"):
            if _is_unset(port.get("protocol")):
                port["protocol"] = "TCP"


def _default_secret(obj: dict) -> None:
    if _is_unset(obj.get("type")):
        obj["type"] = "Opaque"


def _default_namespace(obj: dict) -> None:
    metadata = _dict(obj, "metadata")
    name = metadata.get("name") if metadata is not None else None
    if not isinstance(name, str) or not name:
        return
    labels = _ensure_dict(metadata, "labels")
    if labels is not None:
        labels[NAMESPACE_NAME_LABEL] = name  # Kubernetes forces this label, set or not


def _default_node(obj: dict) -> None:
    status = _dict(obj, "status")
    if status is None:
        return
    capacity = _dict(status, "capacity")
    if capacity is not None and status.get("allocatable") is None:
        status["allocatable"] = dict(capacity)


def _default_hook(obj: dict) -> None:
    spec = _spec(obj)
    if spec is None:
        return
    if spec.get("timeoutSeconds") is None:
        spec["timeoutSeconds"] = HOOK_TIMEOUT_SECONDS
    if _is_unset(spec.get("failurePolicy")):
        spec["failurePolicy"] = "Fail"


def _default_persistent_volume(obj: dict) -> None:
    """SetDefaults_PersistentVolume: reclaim policy Retain, volumeMode Filesystem, phase Pending."""
    spec = _spec(obj)
    if spec is not None:
        _default(spec, "persistentVolumeReclaimPolicy", "Retain")
        _default(spec, "volumeMode", "Filesystem")
    status = _ensure_dict(obj, "status")
    if status is not None:
        _default(status, "phase", "Pending")


def _default_persistent_volume_claim(obj: dict) -> None:
    """SetDefaults_PersistentVolumeClaim(Spec): volumeMode Filesystem, phase Pending."""
    spec = _spec(obj)
    if spec is not None:
        _default(spec, "volumeMode", "Filesystem")
    status = _ensure_dict(obj, "status")
    if status is not None:
        _default(status, "phase", "Pending")


def _default_storage_class(obj: dict) -> None:
    """SetDefaults_StorageClass: reclaimPolicy Delete, volumeBindingMode Immediate."""
    _default(obj, "reclaimPolicy", "Delete")
    _default(obj, "volumeBindingMode", "Immediate")


def _default_hpa_rules(behavior: dict, key: str, policies: list[dict], window: int | None) -> None:
    """GenerateHPAScaleUpRules / ScaleDownRules: the default for each field a direction's rules leave out."""
    rules = _ensure_dict(behavior, key)
    if rules is None:
        return
    if window is not None:
        _default(rules, "stabilizationWindowSeconds", window)
    _default(rules, "selectPolicy", "Max")
    _default(rules, "policies", policies)


def _default_horizontal_pod_autoscaler(obj: dict) -> None:
    """autoscaling/v2 SetDefaults_HorizontalPodAutoscaler: minReplicas 1, cpu at 80% when no metric, a given
    behavior's gaps filled (scale-down's window is left to the controller's flag, as Kubernetes leaves it)."""
    spec = _spec(obj)
    if spec is None:
        return
    _default(spec, "minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    behavior = _dict(spec, "behavior")
    if behavior is not None:
        _default_hpa_rules(behavior, "scaleUp", [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                                 {"type": "Percent", "value": 100, "periodSeconds": 15}], 0)
        _default_hpa_rules(behavior, "scaleDown", [{"type": "Percent", "value": 100, "periodSeconds": 15}], None)


_BY_KIND: dict[tuple[str, str], Callable[[dict], None]] = {
    ("", "Pod"): _default_pod,
    ("", "Service"): _default_service,
    ("", "Endpoints"): _default_endpoints,
    ("", "Secret"): _default_secret,
    ("", "Namespace"): _default_namespace,
    ("", "Node"): _default_node,
    ("apps", "Deployment"): _default_deployment,
    ("apps", "ReplicaSet"): _default_replica_set,
    ("apps", "DaemonSet"): _default_daemon_set,
    ("apps", "StatefulSet"): _default_stateful_set,
    ("batch", "Job"): _default_job,
    ("batch", "CronJob"): _default_cron_job,
    (KCTL_GROUP, "MutatingAdmissionHook"): _default_hook,
    (KCTL_GROUP, "ValidatingAdmissionHook"): _default_hook,
    ("", "PersistentVolume"): _default_persistent_volume,
    ("", "PersistentVolumeClaim"): _default_persistent_volume_claim,
    ("storage.k8s.io", "StorageClass"): _default_storage_class,
    ("autoscaling", "HorizontalPodAutoscaler"): _default_horizontal_pod_autoscaler,
}


# --------------------------------------------------------------------------- create-time fields


def tracks_generation(rt: ResourceType) -> bool:
    """Whether objects of kind `rt` carry metadata.generation (custom and kctl.io kinds do)."""
    return rt.group_kind in GENERATION_KINDS or rt.is_custom or rt.group == KCTL_GROUP


def prepare_for_create(obj: dict, rt: ResourceType) -> dict:
    """What Kubernetes' strategies set on a new object, filled where unset; `obj` is changed.

    A Pod gets status.phase Pending, its status.qosClass, and a PodScheduled=False
    condition (reason SchedulingGated) while it has schedulingGates; the scheduler and the
    node agent take over from there. A Namespace gets status.phase Active.
    """
    if rt.group == "" and rt.kind == "Pod":
        _prepare_pod(obj)
    elif rt.group == "" and rt.kind == "Namespace":
        status = _ensure_dict(obj, "status")
        if status is not None and _is_unset(status.get("phase")):
            status["phase"] = "Active"
    return obj


def _prepare_pod(pod: dict) -> None:
    status = _ensure_dict(pod, "status")
    if status is None:
        return
    if _is_unset(status.get("phase")):
        status["phase"] = "Pending"
    spec = _spec(pod)
    if spec is None:
        return
    if _is_unset(status.get("qosClass")):
        status["qosClass"] = pod_qos_class(spec)
    if _is_unset(spec.get("serviceAccountName")):  # the ServiceAccount admission plugin's default
        spec["serviceAccountName"] = spec.get("serviceAccount") or "default"
    if spec.get("schedulingGates") and status.get("phase") == "Pending":
        conditions = status.get("conditions")
        if conditions is None:
            conditions = status["conditions"] = []
        if isinstance(conditions, list) and not any(
                isinstance(c, dict) and c.get("type") == "PodScheduled" for c in conditions):
            conditions.append({"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                               "message": "Scheduling is blocked due to non-empty scheduling gates"})


def _positive(quantity: Any) -> Any:
    """The quantity's exact value if it parses and is > 0, else None."""
    try:
        value = parse_quantity(quantity)
    except (ValueError, TypeError):
        return None
    return value if value > 0 else None


def pod_qos_class(spec: dict) -> str:
    """Guaranteed, Burstable or BestEffort, exactly as Kubernetes' GetPodQOS computes it."""
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    guaranteed = True
    for container in _dicts(spec, "containers") + _dicts(spec, "initContainers"):
        resources = _dict(container, "resources") or {}
        for name, quantity in (_dict(resources, "requests") or {}).items():
            value = _positive(quantity) if name in ("cpu", "memory") else None
            if value is not None:
                requests[name] = requests.get(name, 0) + value
        found = set()
        for name, quantity in (_dict(resources, "limits") or {}).items():
            value = _positive(quantity) if name in ("cpu", "memory") else None
            if value is not None:
                found.add(name)
                limits[name] = limits.get(name, 0) + value
        if not {"cpu", "memory"} <= found:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(name) == value for name, value in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def generate_job_selector(job: dict, *, old: dict | None = None) -> dict:
    """The Job strategy's generateSelector, unless spec.manualSelector is true; `job` is changed.

    The pod template gets the labels `controller-uid` and `batch.kubernetes.io/controller-uid`
    (the Job's uid) and `job-name` and `batch.kubernetes.io/job-name` (its name), each unless
    already set; spec.selector.matchLabels gets `batch.kubernetes.io/controller-uid`. On an
    update (`old` given) whose new object has no selector, the stored one is kept (Kubernetes
    would refuse the update as changing an immutable field; kctl keeps what it generated);
    a stored Job without a selector (written by an older kctl) is left alone.
    A selector that is not the generated one is left for validation to refuse.
    """
    spec = _spec(job)
    metadata = _dict(job, "metadata")
    if spec is None or metadata is None or spec.get("manualSelector") is True:
        return job
    uid, name = metadata.get("uid"), metadata.get("name")
    if not isinstance(uid, str) or not uid or not isinstance(name, str):
        return job
    if old is not None:
        old_selector = _dict(_spec(old) or {}, "selector")
        if old_selector is None:
            return job  # stored before kctl generated selectors: left as it is
        if spec.get("selector") is None:
            spec["selector"] = _copy(old_selector)
    template = _ensure_dict(spec, "template")
    template_meta = _ensure_dict(template, "metadata") if template is not None else None
    labels = _ensure_dict(template_meta, "labels") if template_meta is not None else None
    if labels is None:
        return job
    for key in JOB_NAME_LABELS:
        labels.setdefault(key, name)
    for key in JOB_CONTROLLER_UID_LABELS:
        labels.setdefault(key, uid)
    if not metadata.get("labels"):
        # batch/v1 defaulting (run again when Kubernetes reads the Job back) gives a Job
        # without labels its template's, which now include the generated ones.
        metadata["labels"] = dict(labels)
    selector = _ensure_dict(spec, "selector")
    match_labels = _ensure_dict(selector, "matchLabels") if selector is not None else None
    if match_labels is not None:
        match_labels.setdefault(JOB_SELECTOR_LABEL, uid)
    return job
