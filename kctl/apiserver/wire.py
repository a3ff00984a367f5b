"""The wire format of kctl's remote API: JSON lines between kctl.apiserver.remote and kctl.apiserver.serve.

`kctl --server ssh://...` (the client, RemoteAPIServer) and `kctl serve --stdio` (the
server, on the control host) exchange one JSON object per line:

    request   {"id": 7, "method": "get", "args": [], "kwargs": {"rt": "deployments.apps", ...}}
    response  {"id": 7, "result": ..., "warnings": ["..."]}     (warnings only when any)
    error     {"id": 7, "error": {"type": "NotFound", "reason": "NotFound", "code": 404, "message": "..."}}
    watch     {"id": 7, "event": ["ADDED", {...}]} ... then {"id": 7, "end": true} (or an error)
    cancel    {"id": 7, "cancel": true}                          (client -> server, ends a watch)

Objects, patches and plain values travel as JSON. The typed values are encoded here,
explicitly: a ResourceType argument as its name (`plural.group`, resolved again by the
server), selectors as their terms, Bindings and WriteResults field by field, errors as
their kctl.machinery.errors class name with reason, code, message (and an Invalid's causes).
"""

from __future__ import annotations

import json

from kctl.machinery import errors
from kctl.machinery.errors import APIError, FieldError
from kctl.machinery.resources import ResourceType

#: bumped when a message changes shape; `hello` tells the client which one the server speaks
PROTOCOL = 1


class ServerUnavailable(APIError):
    """The control plane cannot be reached: ssh failed, or the connection died mid-call."""

    reason, code, exit_code = "ServiceUnavailable", 503, 1


def dumps(message: dict) -> bytes:
    """One message as one line (json escapes the newlines inside strings)."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def loads(line: bytes) -> dict:
    """One line as a message; ValueError when it is not a JSON object."""
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("a message must be a JSON object")
    return message


# -- kinds ------------------------------------------------------------------------------------

def rt_name(rt: ResourceType | None) -> str | None:
    """How a ResourceType argument travels: the name `resource()` resolves back to it."""
    return None if rt is None else rt.group_resource


def encode_rt(rt: ResourceType) -> dict:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind, "plural": rt.plural,
            "namespaced": rt.namespaced, "shortNames": list(rt.short_names), "crdSchema": rt.crd_schema,
            "hasStatus": rt.has_status}


def decode_rt(data: dict) -> ResourceType:
    return ResourceType(data["group"], data["version"], data["kind"], data["plural"], data["namespaced"],
                        tuple(data.get("shortNames") or ()), crd_schema=data.get("crdSchema"),
                        has_status=data.get("hasStatus", True))


# -- selectors --------------------------------------------------------------------------------

def encode_label_selector(selector) -> dict | None:
    if selector is None:
        return None
    return {"requirements": [[r.key, r.operator.value, list(r.values)] for r in selector.requirements],
            "matchNothing": selector.match_nothing}


def decode_label_selector(data: dict | None):
    if data is None:
        return None
    from kctl.machinery.selectors import LabelSelector, Operator, Requirement

    return LabelSelector(tuple(Requirement(key, Operator(op), tuple(values))
                               for key, op, values in data.get("requirements") or ()),
                         match_nothing=bool(data.get("matchNothing")))


def encode_field_selector(selector) -> dict | None:
    if selector is None:
        return None
    return {"terms": [[t.field, t.operator.value, t.value] for t in selector.terms]}


def decode_field_selector(data: dict | None):
    if data is None:
        return None
    from kctl.machinery.selectors import FieldSelector, FieldTerm, Operator

    return FieldSelector(tuple(FieldTerm(field, Operator(op), value) for field, op, value in data.get("terms") or ()))


# -- errors -----------------------------------------------------------------------------------

def _error_classes() -> dict[str, type[APIError]]:
    classes = {name: cls for name, cls in vars(errors).items()
               if isinstance(cls, type) and issubclass(cls, APIError)}
    from kctl.machinery.managedfields import ApplyConflict
    from kctl.store.contract import CommitConflict, StoreError, StoreUnavailable, TransactionTooLarge

    classes.update(ServerUnavailable=ServerUnavailable, StoreError=StoreError, ApplyConflict=ApplyConflict,
                   StoreUnavailable=StoreUnavailable, CommitConflict=CommitConflict,
                   TransactionTooLarge=TransactionTooLarge)
    return classes


def encode_error(exc: BaseException) -> dict:
    """An error as the client re-raises it; anything but an APIError becomes an InternalError."""
    if not isinstance(exc, APIError):
        return {"type": "APIError", "reason": "InternalError", "code": 500,
                "message": f"internal error on the control host: {type(exc).__name__}: {exc}"}
    data = {"type": type(exc).__name__, "reason": exc.reason, "code": exc.code, "message": exc.message}
    causes = getattr(exc, "causes", None)
    if causes:
        data["causes"] = [[c.path, c.message] for c in causes]
    return data


def decode_error(data: dict) -> APIError:
    """The same kctl.machinery.errors class the server raised, with its message (and causes)."""
    cls = _error_classes().get(data.get("type", ""), APIError)
    exc = cls.__new__(cls)
    APIError.__init__(exc, str(data.get("message", "")))
    if cls is APIError or exc.reason != data.get("reason", exc.reason):
        exc.reason = str(data.get("reason") or "InternalError")
        exc.code = int(data.get("code") or 500)
    if "causes" in data:
        exc.causes = [FieldError(path, message) for path, message in data["causes"]]
    return exc


# -- results ----------------------------------------------------------------------------------

def encode_write_result(result) -> dict:
    return {"obj": result.obj, "action": result.action, "warnings": list(result.warnings),
            "error": encode_error(result.error) if result.error is not None else None}


def decode_write_result(data: dict):
    from kctl.apiserver.contract import WriteResult

    return WriteResult(obj=data.get("obj"), action=data.get("action", ""),
                       error=decode_error(data["error"]) if data.get("error") else None,
                       warnings=list(data.get("warnings") or ()))


def encode_binding(binding) -> dict:
    return {"namespace": binding.namespace, "name": binding.name, "nodeName": binding.node_name,
            "uid": binding.uid}


def decode_binding(data: dict):
    from kctl.apiserver.contract import Binding

    return Binding(data["namespace"], data["name"], data["nodeName"], uid=data.get("uid"))


__all__ = ["PROTOCOL", "ServerUnavailable", "decode_binding", "decode_error", "decode_field_selector",
           "decode_label_selector", "decode_rt", "decode_write_result", "dumps", "encode_binding", "encode_error",
           "encode_field_selector", "encode_label_selector", "encode_rt", "encode_write_result", "loads", "rt_name"]
