"""Keeping a Secret's values out of error messages.

kctl.apiserver.server calls `redact_error` on an error met while patching a Secret, with
the values `secret_values` found in the stored object: any of them (the base64 text as
stored, or the text it decodes to) that appears in the message, or in one of its field
causes, is replaced by `[redacted]`. The patch appliers (kctl.machinery.patch) already name
only the path and the operation; this is the safety net for messages built elsewhere
(schema validation quoting a value a JSON patch moved, for instance).
"""

from __future__ import annotations

import base64
import binascii

from kctl.machinery.errors import APIError, FieldError

MASK = "[redacted]"
#: values shorter than this are not masked (a one-letter value would garble every message)
MIN_LENGTH = 4


def secret_values(secret: dict | None) -> list[str]:
    """Every value of a Secret's data (as stored, and decoded when it is text), longest first."""
    if not isinstance(secret, dict):
        return []
    values: set[str] = set()
    for field in ("data", "stringData"):
        data = secret.get(field)
        if not isinstance(data, dict):
            continue
        for value in data.values():
            if not isinstance(value, str):
                continue
            values.add(value)
            if field == "data":
                try:
                    values.add(base64.b64decode(value, validate=True).decode("utf-8"))
                except (binascii.Error, ValueError):
                    pass
    return sorted((v for v in values if len(v) >= MIN_LENGTH), key=len, reverse=True)


def redact(text: str, values: list[str]) -> str:
    """text with every one of values replaced by MASK."""
    for value in values:
        if value in text:
            text = text.replace(value, MASK)
    return text


def redact_error(exc: APIError, values: list[str]) -> APIError:
    """Mask values in exc's message and causes, in place; returns exc."""
    if not values:
        return exc
    exc.message = redact(exc.message, values)
    exc.args = (exc.message,)
    causes = getattr(exc, "causes", None)
    if causes:
        exc.causes = [FieldError(redact(c.path, values), redact(c.message, values)) for c in causes]
    return exc


__all__ = ["MASK", "redact", "redact_error", "secret_values"]
