"""The Swagger 2.0 document as gnostic's `openapi.v2.Document` protobuf, the form kubectl fetches /openapi/v2 in.

kctl.kubeapi.discovery.openapi serves it when the Accept header asks for
`application/com.github.proto-openapi.spec.v2@v1.0+protobuf` (kubectl asks only for that: for
client-side validation of what the server cannot check itself, e.g. a `kind: List` file, and for
`kubectl explain --output plaintext-openapiv2`). `encode(document)` writes the protobuf wire format
by hand for the messages and fields kctl's documents use (google/gnostic openapiv2/OpenAPIv2.proto:
Document, Info, Paths, PathItem, Operation, parameters, responses, Definitions, Schema, and
vendor extensions as `Any.yaml`, JSON being YAML); keys without a field there are left out, as
gnostic drops what it does not know.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Callable

__all__ = ["ACCEPTED", "CONTENT_TYPE", "encode"]

#: what kubectl asks for, and (a valid media type, as kube-openapi answers) the Content-Type of the answer
ACCEPTED = ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
CONTENT_TYPE = ACCEPTED[1]
_VARINT, _FIXED64, _BYTES = 0, 1, 2


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes(field: int, data: bytes) -> bytes:
    return _key(field, _BYTES) + _varint(len(data)) + data


def _string(field: int, value: Any) -> bytes:
    return _bytes(field, str(value).encode()) if value not in (None, "") else b""


def _strings(field: int, values: Any) -> bytes:
    return b"".join(_string(field, v) for v in values or ())


def _bool(field: int, value: Any) -> bytes:
    return _key(field, _VARINT) + _varint(1) if value is True else b""


def _int(field: int, value: Any) -> bytes:
    return _key(field, _VARINT) + _varint(int(value)) if isinstance(value, int) and not isinstance(value, bool) \
        and value else b""


def _double(field: int, value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value:
        return b""
    return _key(field, _FIXED64) + struct.pack("<d", float(value))


def _message(field: int, encode: Callable[[Any], bytes], value: Any) -> bytes:
    """A nested message (written even when empty, so that a present-but-empty message stays present)."""
    return _bytes(field, encode(value))


def _any(value: Any) -> bytes:
    """openapi.v2.Any with the value as YAML (JSON)."""
    return _string(2, json.dumps(value, separators=(",", ":")))


def _extensions(field: int, node: dict) -> bytes:
    return b"".join(_bytes(field, _string(1, k) + _message(2, _any, v))
                    for k, v in node.items() if k.startswith("x-"))


def _schema(node: Any) -> bytes:
    if not isinstance(node, dict):
        return b""
    out = [_string(1, node.get("$ref")), _string(2, node.get("format")), _string(3, node.get("title")),
           _string(4, node.get("description"))]
    if "default" in node:
        out.append(_message(5, _any, node["default"]))
    out += [_double(6, node.get("multipleOf")), _double(7, node.get("maximum")),
            _bool(8, node.get("exclusiveMaximum")), _double(9, node.get("minimum")),
            _bool(10, node.get("exclusiveMinimum")), _int(11, node.get("maxLength")), _int(12, node.get("minLength")),
            _string(13, node.get("pattern")), _int(14, node.get("maxItems")), _int(15, node.get("minItems")),
            _bool(16, node.get("uniqueItems")), _int(17, node.get("maxProperties")),
            _int(18, node.get("minProperties")), _strings(19, node.get("required"))]
    out += [_message(20, _any, v) for v in node.get("enum") or ()]
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out.append(_bytes(21, _message(1, _schema, extra)))
    elif isinstance(extra, bool):
        out.append(_bytes(21, _key(2, _VARINT) + _varint(int(extra))))
    kind = node.get("type")
    if kind:
        out.append(_bytes(22, _strings(1, [kind] if isinstance(kind, str) else kind)))
    items = node.get("items")
    if isinstance(items, dict):
        out.append(_bytes(23, _message(1, _schema, items)))
    elif isinstance(items, list):
        out.append(_bytes(23, b"".join(_message(1, _schema, i) for i in items)))
    out += [_message(24, _schema, sub) for sub in node.get("allOf") or ()]
    properties = node.get("properties")
    if isinstance(properties, dict):
        out.append(_bytes(25, b"".join(_bytes(1, _string(1, name) + _message(2, _schema, sub))
                                       for name, sub in properties.items())))
    out += [_string(26, node.get("discriminator")), _bool(27, node.get("readOnly")), _extensions(31, node)]
    return b"".join(out)


def _parameter(param: dict) -> bytes:
    """One ParametersItem: a body parameter, or a query/path parameter."""
    if param.get("in") == "body":
        body = (_string(1, param.get("description")) + _string(2, param.get("name")) + _string(3, "body")
                + _bool(4, param.get("required")) + _message(5, _schema, param.get("schema") or {}))
        return _bytes(1, _bytes(1, body))
    common = (_bool(1, param.get("required")) + _string(2, param.get("in")) + _string(3, param.get("description"))
              + _string(4, param.get("name")))
    if param.get("in") == "path":
        sub = common + _string(5, param.get("type")) + _bool(19, param.get("uniqueItems"))
        non_body = _bytes(4, sub)
    else:
        sub = common + _string(6, param.get("type")) + _bool(20, param.get("uniqueItems"))
        non_body = _bytes(3, sub)
    return _bytes(1, _bytes(2, non_body))


def _response(response: dict) -> bytes:
    body = _string(1, response.get("description"))
    if isinstance(response.get("schema"), dict):
        body += _bytes(2, _message(1, _schema, response["schema"]))
    return _bytes(1, body)


def _operation(op: dict) -> bytes:
    out = [_strings(1, op.get("tags")), _string(2, op.get("summary")), _string(3, op.get("description")),
           _string(5, op.get("operationId")), _strings(6, op.get("produces")), _strings(7, op.get("consumes"))]
    out += [_bytes(8, _parameter(p)) for p in op.get("parameters") or ()]
    responses = op.get("responses") or {}
    out.append(_bytes(9, b"".join(_bytes(1, _string(1, code) + _message(2, _response, r))
                                  for code, r in responses.items())))
    out += [_strings(10, op.get("schemes")), _bool(11, op.get("deprecated")), _extensions(13, op)]
    return b"".join(out)


_METHODS = (("get", 2), ("put", 3), ("post", 4), ("delete", 5), ("options", 6), ("head", 7), ("patch", 8))


def _path_item(item: dict) -> bytes:
    out = [_message(field, _operation, item[method]) for method, field in _METHODS if method in item]
    out += [_bytes(9, _parameter(p)) for p in item.get("parameters") or ()]
    out.append(_extensions(10, item))
    return b"".join(out)


def encode(document: dict) -> bytes:
    """The protobuf bytes of a Swagger 2.0 document (as kctl.kubeapi.discovery.openapi.v2_document builds it)."""
    info = document.get("info") or {}
    out = [_string(1, document.get("swagger")),
           _bytes(2, _string(1, info.get("title")) + _string(2, info.get("version")))]
    paths = document.get("paths") or {}
    out.append(_bytes(8, b"".join(_bytes(2, _string(1, path) + _message(2, _path_item, item))
                                  for path, item in paths.items())))
    definitions = document.get("definitions") or {}
    out.append(_bytes(9, b"".join(_bytes(1, _string(1, name) + _message(2, _schema, schema))
                                  for name, schema in definitions.items())))
    out.append(_extensions(16, document))
    return b"".join(out)
