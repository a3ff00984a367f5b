"""kubectl's generic describer, for every kind without its own layout (custom resources included):
the object's fields as indented `Key:  value` lines, keys labelled as kubectl's smartLabelFor.

The fallback of the kind -> describer table in kctl.output.describe.
"""

from __future__ import annotations

from kctl.output.describe.context import Context
from kctl.output.describe.sections import write_annotations, write_events, write_header, write_labels
from kctl.output.describe.writer import PrefixWriter
from kctl.output.jsonpath import go_sprint

__all__ = ["describe_generic", "smart_label"]


_GENERIC_SKIP = frozenset({".metadata.managedFields", ".metadata.name", ".metadata.namespace",
                           ".metadata.labels", ".metadata.annotations"})
_ACRONYMS = frozenset({"API", "URL", "UID", "OSB", "GUID"})


def _camel_split(text: str) -> list[str]:
    """github.com/fatih/camelcase Split: `apiVersion` -> [api, Version], `PDFLoader` -> [PDF, Loader]."""
    runs: list[list[str]] = []
    last = 0
    for ch in text:
        cls = 1 if ch.islower() else 2 if ch.isupper() else 3 if ch.isdigit() else 4
        if cls == last:
            runs[-1].append(ch)
        else:
            runs.append([ch])
        last = cls
    for i in range(len(runs) - 1):
        if runs[i] and runs[i][0].isupper() and runs[i + 1][0].islower():
            runs[i + 1].insert(0, runs[i].pop())
    return ["".join(r) for r in runs if r]


def smart_label(field: str) -> str:
    """kubectl's smartLabelFor: `creationTimestamp` -> `Creation Timestamp`, `uid` -> `UID`."""
    if any(not (ch.isalpha() or ch == "-") for ch in field):
        return field
    parts = []
    for part in _camel_split(field):
        if part == "_":
            continue
        parts.append(part.upper() if part.upper() in _ACRONYMS else _go_title(part))
    return " ".join(parts)


def _go_title(word: str) -> str:
    out, prev_letter = [], False
    for ch in word:
        out.append(ch if prev_letter else ch.upper())
        prev_letter = ch.isalnum() or ch == "_"
    return "".join(out)


def _unstructured(w: PrefixWriter, level: int, content: dict, skip_prefix: str) -> None:
    for field in sorted(content):
        value = content[field]
        path = f"{skip_prefix}.{field}"
        if path in _GENERIC_SKIP:
            continue
        if isinstance(value, dict):
            w.write(level, f"{smart_label(field)}:\n")
            _unstructured(w, level + 1, value, path)
        elif isinstance(value, list):
            w.write(level, f"{smart_label(field)}:\n")
            for child in value:
                if isinstance(child, dict):
                    _unstructured(w, level + 1, child, path)
                else:
                    w.write(level + 1, f"{go_sprint(child)}\n")
        else:
            w.write(level, f"{smart_label(field)}:\t{go_sprint(value)}\n")


def describe_generic(w: PrefixWriter, obj: dict, ctx: Context) -> None:
    meta = obj.get("metadata") or {}
    write_header(w, meta)
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    _unstructured(w, 0, obj, "")
    write_events(w, ctx.events, ctx.now)
