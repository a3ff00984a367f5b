"""A container's environment, resolved as the kubelet does (makeEnvironmentVariables).

kctl.agent.lifecycle calls `resolve_env` before creating each container, and
kctl.agent.containers uses `expand` for `$(VAR)` in command and args;
kctl.agent.volumes uses `field_value` and `resource_value` for downwardAPI volumes.

Order, as in Kubernetes: every `envFrom` source in turn (a later one overrides an
earlier one), then `env` in order (overriding envFrom); an `env[].value` may refer to a
variable defined before it as `$(NAME)` (`$$` is a literal `$`; an unknown `$(NAME)` is
left as written). Values from valueFrom and envFrom are never expanded. A reference to a
ConfigMap, Secret or key that does not exist, and is not `optional`, is an error whose
text is the kubelet's (`configmap "x" not found`); podsync then shows the container as
waiting with reason CreateContainerConfigError.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from fractions import Fraction
from typing import Callable, Mapping

from kctl.machinery.quantity import parse_quantity

Lookup = Callable[[str, str, str], "dict | None"]  # (kind, namespace, name) -> ConfigMap | Secret | None
Allocatable = Callable[[], Mapping[str, object]]      # the node's allocatable resources, asked for lazily

_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")


class ReferenceError_(Exception):
    """A reference cannot be resolved; the message is the kubelet's words."""


# -- $(VAR) expansion (k8s.io/kubernetes/third_party/forked/golang/expansion) ---------------

def expand(text: str, env: Mapping[str, str]) -> str:
    """`text` with `$(NAME)` replaced from env; `$$` gives `$`; unknown names stay as written."""
    out: list[str] = []
    checkpoint = cursor = 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            read, is_var, advance = _read_name(text[cursor + 1:])
            out.append(text[checkpoint:cursor])
            out.append((env[read] if read in env else f"$({read})") if is_var else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)


def _read_name(rest: str) -> tuple[str, bool, int]:
    """(name or literal, whether it is a reference, characters consumed after the `$`)."""
    if rest[0] == "$":
        return "$", False, 1
    if rest[0] == "(":
        closer = rest.find(")", 1)
        if closer != -1:
            return rest[1:closer], True, closer + 1
        return "$" + rest, False, len(rest)  # unterminated: kept as written
    return "$" + rest[0], False, 1


# -- pieces of the pod ------------------------------------------------------------------------

def field_value(pod: dict, path: str, *, node_name: str = "", host_ip: str = "", pod_ip: str = "") -> str:
    """The value of a downward-API fieldRef path; ReferenceError_ for an unsupported one."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    subscript = _SUBSCRIPT.match(path)
    if subscript:
        return str((meta.get(subscript[1]) or {}).get(subscript[2], ""))
    simple: dict[str, Callable[[], str]] = {
        "metadata.name": lambda: meta.get("name", ""),
        "metadata.namespace": lambda: meta.get("namespace", ""),
        "metadata.uid": lambda: meta.get("uid", ""),
        "metadata.labels": lambda: _format_map(meta.get("labels") or {}),
        "metadata.annotations": lambda: _format_map(meta.get("annotations") or {}),
        "spec.nodeName": lambda: spec.get("nodeName") or node_name,
        "spec.serviceAccountName": lambda: spec.get("serviceAccountName") or spec.get("serviceAccount") or "",
        "status.podIP": lambda: pod_ip,
        "status.podIPs": lambda: pod_ip,
        "status.hostIP": lambda: host_ip,
        "status.hostIPs": lambda: host_ip,
    }
    if path not in simple:
        raise ReferenceError_(f"unsupported fieldPath: {path}")
    return str(simple[path]())


def _format_map(values: Mapping[str, object]) -> str:
    """labels/annotations as a downwardAPI file holds them: key="value" lines, sorted."""
    return "\n".join(f'{key}="{_quote(str(value))}"' for key, value in sorted(values.items()))


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def resource_value(pod: dict, ref: dict, *, container_name: str = "",
                   allocatable: Allocatable | None = None) -> str:
    """A resourceFieldRef's value: cpu rounded up to whole `divisor`s (1 core), memory in bytes."""
    name = ref.get("containerName") or container_name
    container = _find_container(pod, name)
    if container is None:
        raise ReferenceError_(f'container "{name}" not found in pod')
    resource = str(ref.get("resource", ""))
    section, _, kind = resource.partition(".")
    if section not in ("limits", "requests") or kind not in ("cpu", "memory", "ephemeral-storage"):
        raise ReferenceError_(f"unsupported container resource : {resource}")
    try:
        divisor = parse_quantity(ref.get("divisor") or "1")
    except ValueError as error:
        raise ReferenceError_(f"invalid divisor of {resource}: {error}") from None
    if divisor <= 0:
        raise ReferenceError_(f"invalid divisor of {resource}: it must be positive")
    amount = _resource_amount(container, section, kind, allocatable)
    if kind == "cpu":  # in whole divisors, both counted in millicores rounded up, as MilliValue()
        return str(math.ceil(Fraction(math.ceil(amount * 1000), math.ceil(divisor * 1000))))
    return str(math.ceil(Fraction(math.ceil(amount), math.ceil(divisor))))


def _resource_amount(container: dict, section: str, kind: str, allocatable: Allocatable | None) -> Fraction:
    value = ((container.get("resources") or {}).get(section) or {}).get(kind)
    if value is None and section == "requests":
        value = ((container.get("resources") or {}).get("limits") or {}).get(kind)
    if value is None and section == "limits" and allocatable is not None:
        value = allocatable().get(kind)  # as the kubelet: no limit means the node's allocatable
    if value is None:
        return Fraction(0)
    try:
        return parse_quantity(value)  # type: ignore[arg-type]
    except ValueError as error:
        raise ReferenceError_(f"invalid {section}.{kind}: {error}") from None


def _find_container(pod: dict, name: str) -> dict | None:
    spec = pod.get("spec") or {}
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            if container.get("name") == name:
                return container
    return None


# -- ConfigMaps and Secrets -------------------------------------------------------------------

def source_data(obj: dict) -> dict[str, str]:
    """A ConfigMap's data, or a Secret's data base64-decoded (stringData too, if stored so)."""
    if obj.get("kind") != "Secret":
        return {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
    decoded: dict[str, str] = {}
    for key, value in (obj.get("data") or {}).items():
        try:
            decoded[str(key)] = base64.b64decode(str(value), validate=True).decode("utf-8", errors="replace")
        except (binascii.Error, ValueError):
            raise ReferenceError_(f'secret "{obj.get("metadata", {}).get("name")}" key {key} is not '
                                  "valid base64") from None
    for key, value in (obj.get("stringData") or {}).items():
        decoded[str(key)] = str(value)
    return decoded


def _key_ref(ref: dict, kind: str, namespace: str, lookup: Lookup) -> str | None:
    """configMapKeyRef / secretKeyRef: the value, None when optional and missing."""
    name, key, optional = ref.get("name", ""), ref.get("key", ""), bool(ref.get("optional"))
    obj = lookup(kind, namespace, name)
    if obj is None:
        if optional:
            return None
        raise ReferenceError_(f'{kind.lower()} "{name}" not found')
    data = source_data(obj)
    if key not in data:
        if optional:
            return None
        raise ReferenceError_(f"couldn't find key {key} in {kind} {namespace}/{name}")
    return data[key]


def _env_from(source: dict, namespace: str, lookup: Lookup) -> dict[str, str]:
    """One envFrom entry: its variables (with prefix), {} when optional and missing."""
    for field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
        ref = source.get(field)
        if not isinstance(ref, dict):
            continue
        name = ref.get("name", "")
        obj = lookup(kind, namespace, name)
        if obj is None:
            if ref.get("optional"):
                return {}
            raise ReferenceError_(f'{kind.lower()} "{name}" not found')
        prefix = source.get("prefix") or ""
        return {prefix + key: value for key, value in source_data(obj).items() if key and "=" not in key}
    return {}


# -- the whole environment ----------------------------------------------------------------------

def kubernetes_service_env(service: dict | None) -> dict[str, str]:
    """The variables of the `kubernetes` Service every container gets (the kubelet's master service env):
    KUBERNETES_SERVICE_HOST/PORT(_HTTPS) and the Docker-link style KUBERNETES_PORT*; {} without it."""
    spec = (service or {}).get("spec") or {}
    host = spec.get("clusterIP")
    ports = [p for p in spec.get("ports") or () if isinstance(p, dict) and p.get("port")]
    if not host or host == "None" or not ports:
        return {}
    env = {"KUBERNETES_SERVICE_HOST": str(host), "KUBERNETES_SERVICE_PORT": str(ports[0]["port"])}
    for port in ports:
        if port.get("name"):
            env[f"KUBERNETES_SERVICE_PORT_{str(port['name']).upper().replace('-', '_')}"] = str(port["port"])
    first = ports[0]
    env["KUBERNETES_PORT"] = f"{str(first.get('protocol') or 'TCP').lower()}://{host}:{first['port']}"
    for port in ports:
        proto = str(port.get("protocol") or "TCP")
        prefix = f"KUBERNETES_PORT_{port['port']}_{proto.upper()}"
        env[prefix] = f"{proto.lower()}://{host}:{port['port']}"
        env[f"{prefix}_PROTO"], env[f"{prefix}_PORT"], env[f"{prefix}_ADDR"] = proto.lower(), str(port["port"]), \
            str(host)
    return env


def resolve_env(pod: dict, container: dict, *, lookup: Lookup, node_name: str, host_ip: str, pod_ip: str,
                allocatable: Allocatable | None = None,
                base: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """(environment, errors) of `container` in `pod`; errors are the kubelet's messages.

    `base` (the `kubernetes` Service's variables, kubernetes_service_env) comes first: envFrom and env
    override it and may refer to it, as the kubelet's service environment. Resolution goes on after an
    error, so every problem is listed at once.
    """
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    env: dict[str, str] = dict(base or {})
    errors: list[str] = []
    for source in container.get("envFrom") or ():
        try:
            env.update(_env_from(source, namespace, lookup))
        except ReferenceError_ as error:
            errors.append(str(error))
    for var in container.get("env") or ():
        name = var.get("name", "")
        try:
            value = _env_value(pod, container, var, env, namespace=namespace, lookup=lookup, node_name=node_name,
                               host_ip=host_ip, pod_ip=pod_ip, allocatable=allocatable)
        except ReferenceError_ as error:
            errors.append(str(error))
            continue
        if value is not None:
            env[name] = value
    return env, errors


def _env_value(pod: dict, container: dict, var: dict, env: Mapping[str, str], *, namespace: str,
               lookup: Lookup, node_name: str, host_ip: str, pod_ip: str,
               allocatable: Allocatable | None) -> str | None:
    """One env entry's value; None when an optional reference is missing."""
    value_from = var.get("valueFrom")
    if not isinstance(value_from, dict):
        return expand(str(var.get("value") or ""), env)
    if isinstance(value_from.get("configMapKeyRef"), dict):
        return _key_ref(value_from["configMapKeyRef"], "ConfigMap", namespace, lookup)
    if isinstance(value_from.get("secretKeyRef"), dict):
        return _key_ref(value_from["secretKeyRef"], "Secret", namespace, lookup)
    if isinstance(value_from.get("fieldRef"), dict):
        return field_value(pod, str(value_from["fieldRef"].get("fieldPath", "")), node_name=node_name,
                           host_ip=host_ip, pod_ip=pod_ip)
    if isinstance(value_from.get("resourceFieldRef"), dict):
        return resource_value(pod, value_from["resourceFieldRef"], container_name=container.get("name", ""),
                              allocatable=allocatable)
    raise ReferenceError_(f"env {var.get('name')}: unsupported valueFrom {sorted(value_from)}")


__all__ = ["Allocatable", "Lookup", "ReferenceError_", "expand", "field_value", "kubernetes_service_env",
           "resolve_env",
           "resource_value", "source_data"]
