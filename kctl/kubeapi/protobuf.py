"""Request bodies in Kubernetes' protobuf encoding, for the few kinds kubectl's typed clients post.

kubectl sends `application/vnd.kubernetes.protobuf` bodies from its generated clients: `kubectl create
namespace|configmap|secret|serviceaccount|role|rolebinding|...`, `kubectl auth can-i|whoami`'s access
reviews (kctl.kubeapi.authz.reviews) and `kubectl drain`'s evictions among them (`create -f`,
`apply`, `edit`, `patch` and every other command send JSON). kctl.kubeapi.resources calls
`decode(raw)` for such a body: the `k8s\\x00` magic, then a runtime.Unknown {typeMeta{apiVersion, kind},
raw} whose raw bytes are the object's message, read here with the field numbers of the kind's message
in Kubernetes' generated.proto (core/v1, apps/v1, batch/v1, policy/v1, networking/v1, ...), as JSON
would give the object. A kind not in `MESSAGES` is a 415 UnsupportedMediaType naming it (send it as JSON:
`kubectl create -f`).
Unknown fields are skipped, as protobuf readers do; answers are always JSON, which kubectl accepts.
"""

from __future__ import annotations

import base64
from typing import Any, Iterator

from kctl.machinery.errors import APIError, BadRequest

MAGIC = b"k8s\x00"

# A message: field number -> (JSON name, type); a type is "string", "int", "bool", "bytes" (base64 in JSON),
# "quantity", "intorstr", a message (dict), ("map", value type), ("list", item type); maps are entries
# {1: key, 2: value}. A scalar type ending in "!" is a pointer field in Go: its zero value is kept.
OWNER_REFERENCE = {1: ("kind", "string"), 3: ("name", "string"), 4: ("uid", "string"), 5: ("apiVersion", "string"),
                   6: ("controller", "bool!"), 7: ("blockOwnerDeletion", "bool!")}
OBJECT_META = {1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"),
               11: ("labels", ("map", "string")), 12: ("annotations", ("map", "string")),
               13: ("ownerReferences", ("list", OWNER_REFERENCE)), 14: ("finalizers", ("list", "string"))}
PRECONDITIONS = {1: ("uid", "string"), 2: ("resourceVersion", "string")}
DELETE_OPTIONS = {1: ("gracePeriodSeconds", "int!"), 2: ("preconditions", PRECONDITIONS),
                  3: ("orphanDependents", "bool!"), 4: ("propagationPolicy", "string"),
                  5: ("dryRun", ("list", "string"))}
LOCAL_OBJECT_REFERENCE = {1: ("name", "string")}
OBJECT_REFERENCE = {1: ("kind", "string"), 2: ("namespace", "string"), 3: ("name", "string"),
                    4: ("uid", "string"), 5: ("apiVersion", "string")}
#: (apiVersion, kind) -> the object's message
MESSAGES: dict[tuple[str, str], dict] = {
    ("v1", "Namespace"): {1: ("metadata", OBJECT_META), 2: ("spec", {1: ("finalizers", ("list", "string"))})},
    ("v1", "ConfigMap"): {1: ("metadata", OBJECT_META), 2: ("data", ("map", "string")),
                          3: ("binaryData", ("map", "bytes")), 4: ("immutable", "bool!")},
    ("v1", "Secret"): {1: ("metadata", OBJECT_META), 2: ("data", ("map", "bytes")), 3: ("type", "string"),
                       4: ("stringData", ("map", "string")), 5: ("immutable", "bool!")},
    ("v1", "ServiceAccount"): {1: ("metadata", OBJECT_META), 2: ("secrets", ("list", OBJECT_REFERENCE)),
                               3: ("imagePullSecrets", ("list", LOCAL_OBJECT_REFERENCE)),
                               4: ("automountServiceAccountToken", "bool!")},
    ("policy/v1", "Eviction"): {1: ("metadata", OBJECT_META), 2: ("deleteOptions", DELETE_OPTIONS)},
    ("v1", "Binding"): {1: ("metadata", OBJECT_META), 2: ("target", OBJECT_REFERENCE)},
}
# kubectl create role|clusterrole|rolebinding|clusterrolebinding (rbac/v1; added by H3)
POLICY_RULE = {1: ("verbs", ("list", "string")), 2: ("apiGroups", ("list", "string")),
               3: ("resources", ("list", "string")), 4: ("resourceNames", ("list", "string")),
               5: ("nonResourceURLs", ("list", "string"))}
LABEL_SELECTOR = {1: ("matchLabels", ("map", "string")),
                  2: ("matchExpressions", ("list", {1: ("key", "string"), 2: ("operator", "string"),
                                                    3: ("values", ("list", "string"))}))}
_SUBJECTS = (2, ("subjects", ("list", {1: ("kind", "string"), 2: ("apiGroup", "string"), 3: ("name", "string"),
                                       4: ("namespace", "string")})))
_ROLE_REF = (3, ("roleRef", {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")}))
MESSAGES.update({
    ("rbac.authorization.k8s.io/v1", "Role"): {1: ("metadata", OBJECT_META), 2: ("rules", ("list", POLICY_RULE))},
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): {
        1: ("metadata", OBJECT_META), 2: ("rules", ("list", POLICY_RULE)),
        3: ("aggregationRule", {1: ("clusterRoleSelectors", ("list", LABEL_SELECTOR))})},
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): {1: ("metadata", OBJECT_META), **dict([_SUBJECTS, _ROLE_REF])},
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): {1: ("metadata", OBJECT_META),
                                                             **dict([_SUBJECTS, _ROLE_REF])},
})
# kubectl create deployment|job|cronjob|service: the fields their generators set, and the common ones of a pod
# (k8s.io/api core/v1, apps/v1, batch/v1 generated.proto)
CONTAINER_PORT = {1: ("name", "string"), 2: ("hostPort", "int"), 3: ("containerPort", "int"),
                  4: ("protocol", "string"), 5: ("hostIP", "string")}
ENV_VAR = {1: ("name", "string"), 2: ("value", "string")}
RESOURCES = {1: ("limits", ("map", "quantity")), 2: ("requests", ("map", "quantity"))}
CONTAINER = {1: ("name", "string"), 2: ("image", "string"), 3: ("command", ("list", "string")),
             4: ("args", ("list", "string")), 5: ("workingDir", "string"), 6: ("ports", ("list", CONTAINER_PORT)),
             7: ("env", ("list", ENV_VAR)), 8: ("resources", RESOURCES), 13: ("terminationMessagePath", "string"),
             14: ("imagePullPolicy", "string"), 16: ("stdin", "bool"), 17: ("stdinOnce", "bool"), 18: ("tty", "bool"),
             20: ("terminationMessagePolicy", "string")}
POD_SPEC = {2: ("containers", ("list", CONTAINER)), 3: ("restartPolicy", "string"),
            4: ("terminationGracePeriodSeconds", "int!"), 5: ("activeDeadlineSeconds", "int!"),
            6: ("dnsPolicy", "string"), 7: ("nodeSelector", ("map", "string")), 8: ("serviceAccountName", "string"),
            10: ("nodeName", "string"), 11: ("hostNetwork", "bool"), 19: ("schedulerName", "string"),
            20: ("initContainers", ("list", CONTAINER))}
POD_TEMPLATE_SPEC = {1: ("metadata", OBJECT_META), 2: ("spec", POD_SPEC)}
DEPLOYMENT_SPEC = {1: ("replicas", "int!"), 2: ("selector", LABEL_SELECTOR),
                   3: ("template", POD_TEMPLATE_SPEC),
                   4: ("strategy", {1: ("type", "string"), 2: ("rollingUpdate", {1: ("maxUnavailable", "intorstr!"),
                                                                                 2: ("maxSurge", "intorstr!")})}),
                   5: ("minReadySeconds", "int"), 6: ("revisionHistoryLimit", "int!"), 7: ("paused", "bool"),
                   9: ("progressDeadlineSeconds", "int!")}
JOB_SPEC = {1: ("parallelism", "int!"), 2: ("completions", "int!"), 3: ("activeDeadlineSeconds", "int!"),
            4: ("selector", LABEL_SELECTOR), 5: ("manualSelector", "bool!"), 6: ("template", POD_TEMPLATE_SPEC),
            7: ("backoffLimit", "int!"), 8: ("ttlSecondsAfterFinished", "int!"), 9: ("completionMode", "string!"),
            10: ("suspend", "bool!")}
CRONJOB_SPEC = {1: ("schedule", "string"), 2: ("startingDeadlineSeconds", "int!"), 3: ("concurrencyPolicy", "string"),
                4: ("suspend", "bool!"), 5: ("jobTemplate", {1: ("metadata", OBJECT_META), 2: ("spec", JOB_SPEC)}),
                6: ("successfulJobsHistoryLimit", "int!"), 7: ("failedJobsHistoryLimit", "int!"),
                8: ("timeZone", "string!")}
SERVICE_PORT = {1: ("name", "string"), 2: ("protocol", "string"), 3: ("port", "int"), 4: ("targetPort", "intorstr"),
                5: ("nodePort", "int"), 6: ("appProtocol", "string!")}
SERVICE_SPEC = {1: ("ports", ("list", SERVICE_PORT)), 2: ("selector", ("map", "string")), 3: ("clusterIP", "string"),
                4: ("type", "string"), 5: ("externalIPs", ("list", "string")), 7: ("sessionAffinity", "string"),
                10: ("externalName", "string"), 11: ("externalTrafficPolicy", "string"),
                18: ("clusterIPs", ("list", "string"))}
MESSAGES.update({
    ("apps/v1", "Deployment"): {1: ("metadata", OBJECT_META), 2: ("spec", DEPLOYMENT_SPEC)},
    ("batch/v1", "Job"): {1: ("metadata", OBJECT_META), 2: ("spec", JOB_SPEC)},
    ("batch/v1", "CronJob"): {1: ("metadata", OBJECT_META), 2: ("spec", CRONJOB_SPEC)},
    ("v1", "Service"): {1: ("metadata", OBJECT_META), 2: ("spec", SERVICE_SPEC)},
})
# kubectl create quota|poddisruptionbudget|ingress|priorityclass (core/v1, policy/v1, networking/v1, scheduling/v1;
# added by W2).
# A field named "" is inline in JSON: IngressRule's ingressRuleValue (its `http` is a field of the rule).
INGRESS_BACKEND = {3: ("resource", {1: ("apiGroup", "string!"), 2: ("kind", "string"), 3: ("name", "string")}),
                   4: ("service", {1: ("name", "string"), 2: ("port", {1: ("name", "string"), 2: ("number", "int")})})}
INGRESS_SPEC = {1: ("defaultBackend", INGRESS_BACKEND),
                2: ("tls", ("list", {1: ("hosts", ("list", "string")), 2: ("secretName", "string")})),
                3: ("rules", ("list", {1: ("host", "string"), 2: ("", {1: ("http", {1: ("paths", ("list", {
                    1: ("path", "string"), 2: ("backend", INGRESS_BACKEND), 3: ("pathType", "string!")}))})})})),
                4: ("ingressClassName", "string!")}
QUOTA_SPEC = {1: ("hard", ("map", "quantity")), 2: ("scopes", ("list", "string")),
              3: ("scopeSelector", {1: ("matchExpressions", ("list", {1: ("scopeName", "string"),
                                                                      2: ("operator", "string"),
                                                                      3: ("values", ("list", "string"))}))})}
PDB_SPEC = {1: ("minAvailable", "intorstr!"), 2: ("selector", LABEL_SELECTOR), 3: ("maxUnavailable", "intorstr!"),
            4: ("unhealthyPodEvictionPolicy", "string!")}
MESSAGES.update({
    ("v1", "ResourceQuota"): {1: ("metadata", OBJECT_META), 2: ("spec", QUOTA_SPEC)},
    ("policy/v1", "PodDisruptionBudget"): {1: ("metadata", OBJECT_META), 2: ("spec", PDB_SPEC)},
    ("networking.k8s.io/v1", "Ingress"): {1: ("metadata", OBJECT_META), 2: ("spec", INGRESS_SPEC)},
    ("scheduling.k8s.io/v1", "PriorityClass"): {1: ("metadata", OBJECT_META), 2: ("value", "int!"),
                                                3: ("globalDefault", "bool"), 4: ("description", "string"),
                                                5: ("preemptionPolicy", "string!")},
})
# kubectl auth can-i [--list], auth whoami: the access reviews (kctl.kubeapi.authz.reviews; added by H3).
# SubjectAccessReviewSpec.extra is map<string, ExtraValue{repeated string items = 1}>: {"k": {"items": [...]}} here
_ACCESS_SPEC = {1: ("resourceAttributes", {1: ("namespace", "string"), 2: ("verb", "string"), 3: ("group", "string"),
                                           4: ("version", "string"), 5: ("resource", "string"),
                                           6: ("subresource", "string"), 7: ("name", "string")}),
                2: ("nonResourceAttributes", {1: ("path", "string"), 2: ("verb", "string")}),
                3: ("user", "string"), 4: ("groups", ("list", "string")),
                5: ("extra", ("map", {1: ("items", ("list", "string"))})), 6: ("uid", "string")}
MESSAGES.update({
    ("authorization.k8s.io/v1", kind): {1: ("metadata", OBJECT_META), 2: ("spec", _ACCESS_SPEC)}
    for kind in ("SelfSubjectAccessReview", "SubjectAccessReview", "LocalSubjectAccessReview")})
MESSAGES[("authorization.k8s.io/v1", "SelfSubjectRulesReview")] = {1: ("metadata", OBJECT_META),
                                                                   2: ("spec", {1: ("namespace", "string")})}
MESSAGES[("authentication.k8s.io/v1", "SelfSubjectReview")] = {1: ("metadata", OBJECT_META)}
# kubectl create token: a TokenRequest (kctl.kubeapi.authn.tokens)
MESSAGES[("authentication.k8s.io/v1", "TokenRequest")] = {
    1: ("metadata", OBJECT_META),
    2: ("spec", {1: ("audiences", ("list", "string")), 4: ("expirationSeconds", "int!"),
                 3: ("boundObjectRef", {1: ("kind", "string"), 2: ("apiVersion", "string"), 3: ("name", "string"),
                                        4: ("uid", "string")})})}
# kubectl autoscale (1.32 and older): an autoscaling/v1 HPA (stored as v2: kctl.machinery.hpaconversion; added by W1)
MESSAGES[("autoscaling/v1", "HorizontalPodAutoscaler")] = {
    1: ("metadata", OBJECT_META),
    2: ("spec", {1: ("scaleTargetRef", {1: ("kind", "string"), 2: ("name", "string"), 3: ("apiVersion", "string")}),
                 2: ("minReplicas", "int!"), 3: ("maxReplicas", "int"), 4: ("targetCPUUtilizationPercentage", "int!")})}


class UnsupportedProtobuf(APIError):
    """A protobuf body of a kind kctl does not read in that encoding (415)."""

    reason, code = "UnsupportedMediaType", 415


class _Truncated(Exception):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _Truncated
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of a message: an int for a varint, bytes for length-delimited."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise _Truncated
            yield number, data[pos:pos + size]
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            if pos > len(data):
                raise _Truncated
        else:
            raise _Truncated


_ZERO = object()


def _int64(value: int | bytes) -> int:
    number = value if isinstance(value, int) else 0
    return number - (1 << 64) if number >= 1 << 63 else number  # int64 two's complement


def _scalar(kind: str, value: int | bytes) -> Any:
    """A scalar's JSON value; _ZERO for Go's zero value of a field JSON omits when empty (kind without "!")."""
    keep = kind.endswith("!")
    kind = kind.rstrip("!")
    if kind == "string":
        result: Any = value.decode() if isinstance(value, bytes) else str(value)
    elif kind == "bytes":
        result = base64.b64encode(value if isinstance(value, bytes) else b"").decode()
    elif kind == "bool":
        result = bool(value)
    elif kind == "int":
        result = _int64(value)
    elif kind == "quantity":  # resource.Quantity {string = 1}
        result = next((v.decode() for n, v in _fields(value if isinstance(value, bytes) else b"")
                       if n == 1 and isinstance(v, bytes)), "")
    elif kind == "intorstr":  # intstr.IntOrString {type = 1 (0 int, 1 string), intVal = 2, strVal = 3}
        parts = dict(_fields(value if isinstance(value, bytes) else b""))
        text = parts.get(3, b"")
        result = (text.decode() if isinstance(text, bytes) else str(text)) if parts.get(1) == 1 \
            else _int64(parts.get(2, 0))
    else:
        raise _Truncated
    if not keep and result in ("", 0, False) and not (kind == "intorstr" and isinstance(result, str) and result):
        return _ZERO
    return result


def _value(kind: Any, value: int | bytes) -> Any:
    if isinstance(kind, dict):
        return message(kind, value if isinstance(value, bytes) else b"")
    return _scalar(kind, value)


def message(spec: dict, data: bytes) -> dict:
    """One message as a JSON-shaped dict. Fields spec does not name are skipped, and so are the zero values Go
    writes for fields that are not pointers (JSON omits them: `omitempty`); a type ending in "!" (a pointer
    field: `replicas`, `gracePeriodSeconds`) keeps its zero value."""
    out: dict = {}
    for number, value in _fields(data):
        if number not in spec:
            continue
        name, kind = spec[number]
        if isinstance(kind, tuple) and kind[0] == "map":
            key, item = "", None
            for entry_number, entry_value in _fields(value if isinstance(value, bytes) else b""):
                if entry_number == 1:
                    key = value_of("string!", entry_value)
                elif entry_number == 2:
                    item = value_of(kind[1], entry_value)
            out.setdefault(name, {})[key] = item if item is not None else value_of(kind[1], b"")
        elif isinstance(kind, tuple) and kind[0] == "list":
            out.setdefault(name, []).append(value_of(kind[1], value))
        else:
            found = _value(kind, value)
            if name == "" and isinstance(found, dict):  # an inline (embedded) message: its fields are ours
                out.update(found)
            elif found is not _ZERO:
                out[name] = found
    return out


def value_of(kind: Any, value: int | bytes) -> Any:
    """A value of a map or list (kept whatever it is: an empty string in a map is data)."""
    if isinstance(kind, str) and not kind.endswith("!"):
        kind = kind + "!"
    return _value(kind, value)


def decode(raw: bytes) -> dict:
    """The object a protobuf request body holds, as JSON would give it; UnsupportedProtobuf for a kind not in
    MESSAGES, BadRequest for a body that is not Kubernetes' protobuf."""
    if not raw.startswith(MAGIC):
        raise BadRequest("the protobuf body does not start with Kubernetes' magic number")
    try:
        type_meta: dict = {}
        data = b""
        for number, value in _fields(raw[len(MAGIC):]):
            if number == 1 and isinstance(value, bytes):
                type_meta = message({1: ("apiVersion", "string"), 2: ("kind", "string")}, value)
            elif number == 2 and isinstance(value, bytes):
                data = value
        key = (type_meta.get("apiVersion", ""), type_meta.get("kind", ""))
        spec = MESSAGES.get(key)
        if spec is None:
            raise UnsupportedProtobuf(f"kctl's API does not read {key[1] or 'this kind'} in protobuf: send it as "
                                      "JSON (kubectl create -f FILE or kubectl apply -f FILE)")
        return {"apiVersion": key[0], "kind": key[1], **message(spec, data)}
    except (_Truncated, UnicodeDecodeError):
        raise BadRequest("the protobuf body is truncated or not valid") from None


__all__ = ["MESSAGES", "UnsupportedProtobuf", "decode", "message"]
