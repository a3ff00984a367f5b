"""YAML and JSON manifests in: the documents `kctl apply -f`, git sync and `kctl edit` read.

`decode_text` turns bytes into text (UTF-8, or UTF-16/32 with a BOM); `load_documents` splits
a stream into its documents and reads each exactly as Kubernetes does (kubectl and the API
server decode YAML with sigs.k8s.io/yaml, that is go-yaml v2 and its YAML 1.1 scalars, then
round-trip it through JSON: kctl.manifests.yaml11). Only plain data comes back: dicts with str
keys, lists, str, int, float, bool and None; any problem is one ManifestError
(kctl.manifests.errors) and inputs past kctl.manifests.bounds are refused.

Three readers, tried in this order, give the same data:

1. JSON text (one value or a stream of them) goes to the json module (kctl.manifests.jsonreader);
2. block YAML of the shapes manifests have goes to the fast line-based reader
   (kctl.manifests.fastreader);
3. every other document -- anchors and aliases, tags, folded or multi-line scalars, and
   every document with an error -- goes to ruamel.yaml (kctl.manifests.ruamelreader), whose
   messages are condensed to one line. ruamel.yaml is imported only then, so reading ordinary
   manifests never loads it.

Writing is kctl.manifests.writer. Called by kctl.manifests.sources (which finds and reads files,
directories, stdin and URLs), by git sync (kustomize) and `kctl edit`.
"""

from __future__ import annotations

import codecs

from kctl.manifests import bounds
from kctl.manifests.charsets import ASCII_CONTROL, NON_PRINTABLE, SPECIAL_BREAKS
from kctl.manifests.errors import ManifestError
from kctl.manifests.fastreader import FastReader, TooManyNodes, Unsupported
from kctl.manifests.jsonreader import JSON_SPACE, json_documents

__all__ = ["decode_text", "load_documents"]


def decode_text(data: bytes, *, source: str) -> str:
    """Manifest bytes as text: UTF-8 (a BOM allowed), or UTF-16/32 with a BOM.

    Raises ManifestError for binary data (a NUL byte in what should be UTF-8) and for bytes
    that are not valid in the encoding.
    """
    if len(data) > bounds.MAX_INPUT_BYTES:
        raise ManifestError(source, f"larger than {bounds.MAX_INPUT_BYTES >> 20} MiB: refusing it")
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        encoding = "utf-32"
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
        nul = data.find(b"\0")
        if nul != -1:
            raise ManifestError(source, f"binary data (a NUL byte at offset {nul}), "
                                        f"not a YAML or JSON document")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        name = "UTF-8" if encoding == "utf-8-sig" else encoding.upper()
        line = data.count(b"\n", 0, error.start) + 1
        raise ManifestError(source, f"not {name} text (invalid byte 0x{data[error.start]:02x} "
                                    f"at offset {error.start})", line=line) from None


def load_documents(text: str, *, source: str) -> list[tuple[int, int, object]]:
    """Parse a YAML (or JSON) stream into (document index, start line, data) per document.

    The index counts from 0 over every document of the stream, empty ones included; empty
    documents (only comments or `---`) are left out. The line (1-based) is where the
    document's content starts. Data is plain: dict (str keys), list, str, int, float, bool,
    None; aliases come back as independent copies. Raises ManifestError, and nothing else,
    for any input that is not such a stream or exceeds the bounds above.
    """
    length = len(text)
    if length > bounds.MAX_INPUT_BYTES or (
            length * 4 > bounds.MAX_INPUT_BYTES
            and len(text.encode("utf-8", "surrogatepass")) > bounds.MAX_INPUT_BYTES):
        raise ManifestError(source, f"larger than {bounds.MAX_INPUT_BYTES >> 20} MiB: refusing it")
    if text.startswith("\ufeff"):
        text = text[1:]
    bad = ASCII_CONTROL.search(text) if text.isascii() else NON_PRINTABLE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        char = bad.group()
        if char == "\0":
            message = "binary data (a NUL character), not a YAML or JSON document"
        elif "\ud800" <= char <= "\udfff":
            message = f"invalid text (an unpaired surrogate U+{ord(char):04X})"
        else:
            message = f"the control character U+{ord(char):04X} is not allowed in YAML"
        raise ManifestError(source, message, line=line)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    budget = [bounds.MAX_NODES]
    start = JSON_SPACE.match(text).end()
    if text[start:start + 1] in ("{", "["):
        documents = json_documents(text, start, source, budget)
        if documents is not None:
            return [(index, line, value) for index, (line, value) in enumerate(documents)]
        budget = [bounds.MAX_NODES]
    if any(char in text for char in SPECIAL_BREAKS):
        from kctl.manifests.ruamelreader import ruamel_documents

        return ruamel_documents(text, source, 0, budget)[0]
    return _yaml_documents(text, source, budget)


def _yaml_documents(text: str, source: str, budget: list[int]) -> list[tuple[int, int, object]]:
    """Split the stream at `---` lines; each document goes to the fast reader or ruamel.yaml."""
    lines = text.split("\n")
    if text.endswith("\n"):
        count, open_line = len(lines) - 1, -1
    else:
        count, open_line = len(lines), len(lines) - 1
    separators = []
    for number in range(count):
        line = lines[number]
        if line.startswith(("---", "...", "%")):
            if line[:3] == "---" and (len(line) == 3 or line[3] in " \t"):
                separators.append(number)
            elif line[0] == "%" or (line[:3] == "..." and (len(line) == 3 or line[3] in " \t")):
                # directives and document-end markers: ruamel.yaml reads the whole stream
                from kctl.manifests.ruamelreader import ruamel_documents

                return ruamel_documents(text, source, 0, budget)[0]
    documents: list[tuple[int, int, object]] = []
    index = 0
    starts = [(None, 0)] + [(number, number + 1) for number in separators]
    ends = separators + [count]
    for (separator, start), end in zip(starts, ends):
        head = lines[separator][3:].strip(" \t") if separator is not None else ""
        try:
            if head and head[0] != "#":
                raise Unsupported  # content on the `---` line itself
            reader = FastReader(lines[start:end], budget[0], open_line - start)
            try:
                found = reader.document()
            except (Unsupported, TooManyNodes):
                raise
            except Exception:  # a fast-reader bug must not lose a document: ruamel.yaml reads it
                raise Unsupported from None
            if found is None:
                index += separator is not None  # an empty document still has its number
                continue
            first, value = found
            budget[0] -= reader.nodes
            documents.append((index, start + first + 1, value))
            index += 1
        except TooManyNodes:
            raise bounds.too_many_nodes(source, index, None) from None
        except Unsupported:
            body = "\n".join(lines[start:end]) + ("\n" if end - 1 != open_line else "")
            parsed = None
            if not head:
                offset = JSON_SPACE.match(body).end()
                if body[offset:offset + 1] in ("{", "["):
                    parsed = json_documents(body, offset, source, budget, index=index,
                                            first_line=start)
            if parsed is not None and len(parsed) == 1:
                documents.append((index, parsed[0][0], parsed[0][1]))
                index += 1
                continue
            if separator is None:
                segment, top = body, start
            else:
                segment, top = lines[separator] + "\n" + body, separator
            from kctl.manifests.ruamelreader import ruamel_documents

            found_documents, seen = ruamel_documents(segment, source, index, budget,
                                                     first_line=top)
            documents.extend(found_documents)
            index += seen
    return documents
