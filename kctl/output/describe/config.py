"""kubectl describe's layouts for configuration: a Secret (value sizes only, never the values)
and a ConfigMap (its data and binary data sizes).

Entries of the kind -> describer table in kctl.output.describe.
"""

from __future__ import annotations

import base64
import binascii

from kctl.output.describe.context import Context
from kctl.output.describe.sections import write_annotations, write_events, write_header, write_labels
from kctl.output.describe.writer import PrefixWriter

__all__ = ["describe_configmap", "describe_secret"]


def _decoded_size(value: object) -> int:
    try:
        return len(base64.b64decode(str(value), validate=True))
    except (binascii.Error, ValueError):
        return len(str(value).encode())


def describe_secret(w: PrefixWriter, secret: dict, ctx: Context) -> None:
    """kubectl's layout; values are never printed, only their decoded sizes."""
    meta = secret.get("metadata") or {}
    write_header(w, meta)
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"\nType:\t{secret.get('type') or 'Opaque'}\n")
    w.write(0, "\nData\n====\n")
    sizes = {k: _decoded_size(v) for k, v in (secret.get("data") or {}).items()}
    for k, v in (secret.get("stringData") or {}).items():
        sizes[k] = len(str(v).encode())
    for key in sorted(sizes):
        w.write(0, f"{key}:\t{sizes[key]} bytes\n")


def describe_configmap(w: PrefixWriter, cm: dict, ctx: Context) -> None:
    """kubectl's describeConfigMap: each data key and value, binary data as sizes."""
    meta = cm.get("metadata") or {}
    write_header(w, meta)
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, "\nData\n====\n")
    data = cm.get("data") or {}
    for key in sorted(data):
        w.write(0, f"{key}:\n----\n{data[key]}\n")
    w.write(0, "\nBinaryData\n====\n")
    binary = cm.get("binaryData") or {}
    for key in sorted(binary):
        w.write(0, f"{key}: {_decoded_size(binary[key])} bytes\n")
    w.write(0, "\n")
    write_events(w, ctx.events, ctx.now)
