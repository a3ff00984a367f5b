"""The size limits of Kubernetes' API server and etcd, checked on every write.

Called by the API layer (kctl.apiserver.server) for each object a client sends
(`check_request`, before admission) and each object about to be stored (`check_object`,
after admission), so the CLI, git sync, `kctl serve --stdio` and the controllers all
meet the same limits, with Kubernetes' own words:

- a request body over 3 MiB: `Request entity too large: limit is 3145728`
  (kube-apiserver's MaxRequestBodyBytes);
- an object over etcd's request limit of 1.5 MiB: `etcdserver: request is too large`;
- a ConfigMap's `data` + `binaryData`, or a Secret's `data`, over 1 MiB:
  `ConfigMap "x" is invalid: []: Too long: must have at most 1048576 bytes` (field `data`
  for a Secret), as Kubernetes' ValidateConfigMap / ValidateSecret say it.

Sizes are those of the compact JSON encoding (Kubernetes measures the request body; etcd
the protobuf it stores, which is smaller than JSON, so this is on the safe side).
"""

from __future__ import annotations

import base64
import binascii

from kctl.machinery import compactjson
from kctl.machinery.errors import FieldError, Invalid, RequestEntityTooLarge

#: kube-apiserver's limit on a request body (3 MiB)
MAX_REQUEST_BYTES = 3 * 1024 * 1024
#: etcd's default --max-request-bytes (1.5 MiB): the largest object that can be stored
MAX_OBJECT_BYTES = 1536 * 1024
#: core.MaxSecretSize: the most a ConfigMap's or a Secret's data may hold (1 MiB)
MAX_DATA_BYTES = 1024 * 1024


def encoded_size(obj: object) -> int:
    """Bytes of obj as compact UTF-8 JSON (what the store writes)."""
    try:
        return len(compactjson.encode(obj))
    except (TypeError, ValueError):
        return 0  # not JSON at all: validation says what is wrong with it


def check_request(obj: object) -> None:
    """RequestEntityTooLarge if obj, as a request body, is over 3 MiB."""
    if encoded_size(obj) > MAX_REQUEST_BYTES:
        raise RequestEntityTooLarge(f"Request entity too large: limit is {MAX_REQUEST_BYTES}")


def check_object(group_kind: str, obj: dict) -> None:
    """Invalid for ConfigMap/Secret data over 1 MiB; RequestEntityTooLarge over etcd's 1.5 MiB."""
    if group_kind in ("ConfigMap", "Secret"):
        _check_data(group_kind, obj)
    if encoded_size(obj) > MAX_OBJECT_BYTES:
        raise RequestEntityTooLarge("etcdserver: request is too large")


def _check_data(group_kind: str, obj: dict) -> None:
    total = 0
    if group_kind == "ConfigMap":
        for _key, value in _items(obj.get("data")):
            total += len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 0
        for _key, value in _items(obj.get("binaryData")):
            total += _decoded_len(value)
        path = "[]"  # ValidateConfigMap names the whole object
    else:
        for _key, value in _items(obj.get("data")):
            total += _decoded_len(value)
        path = "data"
    if total > MAX_DATA_BYTES:
        name = (obj.get("metadata") or {}).get("name", "")
        raise Invalid(f'{group_kind} "{name}"',
                      FieldError(path, f"Too long: must have at most {MAX_DATA_BYTES} bytes"))


def _items(value: object) -> list[tuple[str, object]]:
    return [(str(k), v) for k, v in value.items()] if isinstance(value, dict) else []


def _decoded_len(value: object) -> int:
    """Bytes a base64 value stands for (its own length when it is not base64)."""
    if not isinstance(value, str):
        return 0
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return len(value.encode("utf-8", "surrogatepass"))


__all__ = ["MAX_DATA_BYTES", "MAX_OBJECT_BYTES", "MAX_REQUEST_BYTES", "RequestEntityTooLarge",
           "check_object", "check_request", "encoded_size"]
