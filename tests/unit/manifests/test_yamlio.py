"""kctl.manifests.yamlio: loading YAML/JSON streams (values, lines, errors, safety bounds) as Kubernetes does."""

from __future__ import annotations

import pickle
import subprocess
import sys
import time

import pytest

from kctl.manifests import bounds
from kctl.manifests.bounds import MAX_DEPTH, MAX_INPUT_BYTES
from kctl.manifests.errors import ManifestError
from kctl.manifests.ruamelreader import ruamel_documents
from kctl.manifests.yamlio import decode_text, load_documents


def load(text: str) -> list:
    """Just the data of each document."""
    return [data for _, _, data in load_documents(text, source="f.yaml")]


def error(text: str) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        load_documents(text, source="f.yaml")
    return caught.value


def ruamel_reading(text: str) -> list:
    """What the ruamel.yaml path alone makes of text (the reference for the fast reader)."""
    documents, _ = ruamel_documents(text, "f.yaml", 0, [bounds.MAX_NODES])
    return documents


# --- loading: values -----------------------------------------------------------------------

SCALARS = [
    ("yes", True), ("no", False), ("on", True), ("off", False), ("y", True), ("oN", "oN"),
    ("true", True), ("False", False), ("TRUE", True),
    ("null", None), ("~", None), ("", None), ("Null", None),
    ("0", 0), ("-12", -12), ("+3", 3), ("0777", 511), ("0o17", 15), ("0x1F", 31), ("0b101", 5),
    ("1_000", 1000), ("1.5", 1.5), ("1e3", 1000), ("-.5", -0.5), ("1.", 1),
    ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z"), ("2024-01-01", "2024-01-01"),
    ("2001-12-14 21:59:43.10 -5", "2001-12-14 21:59:43.10 -5"),
    ("100m", "100m"), ("128Mi", "128Mi"), ("1:20", "1:20"), ("-_", "-_"), ("=", "="),
    ("a b", "a b"), ("a#b", "a#b"), ("http://x:80/y", "http://x:80/y"), ("-x", "-x"),
    ("'it''s'", "it's"), ('"tab\\there"', "tab\there"), ('"\\x41\\u00e9\\U0001F600"', "Aé😀"),
    ('"yes"', "yes"), ("'1'", "1"), ("[a, 'b', \"c\", 1]", ["a", "b", "c", 1]), ("{}", {}),
    ("{a: 1, b: [x, {c: ~}]}", {"a": 1, "b": ["x", {"c": None}]}),
]


@pytest.mark.parametrize(("text", "expected"), SCALARS, ids=[repr(c[0]) for c in SCALARS])
def test_scalar_values(text, expected):
    """Scalars resolve as Kubernetes reads them (YAML 1.1, go-yaml v2); timestamps stay strings."""
    [data] = load(f"v: {text}\n")
    assert data == {"v": expected} and type(data["v"]) is type(expected)
    [reference] = ruamel_reading(f"v: {text}\n")
    assert reference[2] == data


@pytest.mark.parametrize("text", [".nan", ".inf", "-.Inf", "[.NaN]"])
def test_infinity_and_nan_are_refused(text):
    """.inf and .nan have no JSON form: refused with the line, as kubectl refuses them."""
    problem = error(f"a: 1\nv: {text}\n")
    assert problem.line == 2 and "cannot be represented in JSON" in problem.message


DOCUMENT_CASES = [
    ("a: 1\n---\nb: 2\n", [(0, 1, {"a": 1}), (1, 3, {"b": 2})]),
    ("# head\n---\na: 1\n", [(0, 3, {"a": 1})]),
    ("a: 1\n---\n---\n# only a comment\n---\nb: 2\n", [(0, 1, {"a": 1}), (3, 6, {"b": 2})]),
    ("---\n\n  # c\nkind: Pod\n", [(0, 4, {"kind": "Pod"})]),
    ("", []),
    ("# nothing\n", []),
    ("---\n---\n", []),
    ("- a\n- b\n", [(0, 1, ["a", "b"])]),
    ("--- # c\na: 1\n...\n---\nb: 2\n", [(0, 2, {"a": 1}), (1, 5, {"b": 2})]),
    ("--- {a: 1}\n--- [2]\n", [(0, 1, {"a": 1}), (1, 2, [2])]),
    ("null\n", [(0, 1, None)]),
    ('{"a": [1, 2.5, "x", true, null]}\n', [(0, 1, {"a": [1, 2.5, "x", True, None]})]),
    ('{"a": 1}\n\n{"b": 2}\n[3]', [(0, 1, {"a": 1}), (1, 3, {"b": 2}), (2, 4, [3])]),
    ('{"a": 1}\n---\n{"b": 2}\n', [(0, 1, {"a": 1}), (1, 3, {"b": 2})]),
    ("\ufeffa: 1\r\nb: |\r\n  x\r\n", [(0, 1, {"a": 1, "b": "x\n"})]),
]


@pytest.mark.parametrize(("text", "expected"), DOCUMENT_CASES,
                         ids=[repr(c[0][:30]) for c in DOCUMENT_CASES])
def test_documents_indices_and_lines(text, expected):
    """Each document comes with its 0-based index (empty ones counted, not returned) and first line."""
    assert load_documents(text, source="f.yaml") == expected


BLOCKS = [
    ("a: |\n  x\n  y\n", "x\ny\n"),
    ("a: |-\n  x\n  y\n", "x\ny"),
    ("a: |+\n  x\n\n\nb: 1\n", "x\n\n\n"),
    ("a: |\n  x\n\n  # not a comment\n   indented\nb: 1\n", "x\n\n# not a comment\n indented\n"),
    ("a: >\n  folded\n  text\n", "folded text\n"),
    ("a: |2\n   x\n", " x\n"),
    ("a: plain\n  continued\n", "plain continued"),
    ('a: "multi\n  line"\n', "multi line"),
    ("- |\n  in a list\n", None),
]


@pytest.mark.parametrize(("text", "expected"), BLOCKS, ids=[repr(c[0][:24]) for c in BLOCKS])
def test_multi_line_scalars(text, expected):
    """Block and multi-line scalars, read by the fast reader or ruamel.yaml, as YAML defines them."""
    [data] = load(text)
    if expected is None:
        assert data == ["in a list\n"]
    else:
        assert data["a"] == expected
    assert ruamel_reading(text)[0][2] == data


def test_aliases_become_independent_copies():
    """An alias loads as a copy: changing one place leaves the other alone; merge keys apply."""
    [data] = load("base: &b {x: 1, z: [1]}\nother: *b\nmerged:\n  <<: *b\n  z: 2\n")
    assert data == {"base": {"x": 1, "z": [1]}, "other": {"x": 1, "z": [1]}, "merged": {"x": 1, "z": 2}}
    data["base"]["z"].append(2)
    assert data["other"] == {"x": 1, "z": [1]}


def test_kubernetes_manifest_matches_ruamel():
    """A realistic multi-document manifest loads the same through the fast reader and ruamel.yaml."""
    text = MANIFEST * 3
    assert load_documents(text, source="f.yaml") == ruamel_reading(text)


MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, "app.kubernetes.io/name": web}
  annotations:
    kctl.io/note: "a: b # not a comment"
    empty: ''
spec:
  replicas: 3
  template:
    spec:
      containers:
      - name: web
        image: docker.io/library/nginx:1.25   # trailing comment
        args:
        - --port=8080
        - -v
        command: ["nginx", "-g", "daemon off;"]
        env:
        - {name: A, value: "1"}
        -
          name: B
          value: 'it''s'
      volumes:
        - name: config
          configMap:
            name: web-config
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-config}
data:
  nginx.conf: |
    server {
      listen 80;
    }
  script.sh: |-
    #!/bin/sh
    echo hi
---
"""


# --- loading: errors -----------------------------------------------------------------------

ERRORS = [
    ("a: 1\n---\nb: 2\n---\nc: d: e\n", 2, 5, "mapping values are not allowed here"),
    ("a: 1\nb: [1, 2\nc: 3\n", 0, None, "while parsing a flow sequence"),
    ("a: 1\na: 2\n", 0, 2, 'duplicate key "a" (first at line 1)'),
    ("metadata:\n  name: x\n  name: y\n", 0, 3, 'duplicate key "name"'),
    ('{"a": 1, "a": 2}\n', 0, 1, 'duplicate key "a"'),
    ("~: a\n", 0, 1, "mapping key null is not a string Kubernetes accepts (quote it)"),
    ("12345678901234567890: a\n", 0, 1, "mapping key 12345678901234567890 is not a string"),
    ("? [a]\n: b\n", 0, 1, "a mapping key must be a string, not a collection"),
    ("a: !!binary aGk=\n", 0, 1, "unsupported tag 'tag:yaml.org,2002:binary'"),
    ("a: !!python/object:os.system x\n", 0, 1, "unsupported tag"),
    ("a: !custom x\n", 0, 1, "unsupported tag '!custom'"),
    ("a: !!set {x}\n", 0, 1, "unsupported tag 'tag:yaml.org,2002:set'"),
    ("a: !!int abc\n", 0, 1, "'abc' is not an integer"),
    ("a: *nothing\n", 0, 1, "found undefined alias 'nothing'"),
    ("a: &x [*x]\n", 0, 1, "an alias refers to a node that contains it"),
    ("a: b\n\tc: d\n", 0, 2, "found character '\\t' that cannot start any token"),
    ("a: 1\n b: 2\n", 0, 2, "mapping values are not allowed here"),
    ("- a\nb: c\n", 0, 2, "expected <block end>, but found '?'"),
    ('a: "unterminated\n', 0, 2, "found unexpected end of stream"),
]


@pytest.mark.parametrize(("text", "index", "line", "message"), ERRORS,
                         ids=[repr(c[0][:24]) for c in ERRORS])
def test_errors_name_document_line_and_problem(text, index, line, message):
    """Errors say which document (1-based in the text), which line, and what, on one line."""
    caught = error(text)
    assert caught.source == "f.yaml" and caught.index == index
    if line is not None:
        assert caught.line == line
    assert message in caught.message
    shown = str(caught)
    assert "\n" not in shown and "Traceback" not in shown
    prefix = f"f.yaml: document {index + 1}" + (f" (line {caught.line}): " if caught.line else ": ")
    assert shown.startswith(prefix)


def test_error_in_third_document_reads_as_kubectl_would():
    """The exact one-line message for a syntax error in the 3rd document."""
    assert str(error("a: 1\n---\nb: 2\n---\nc: d: e\n")) == (
        "f.yaml: document 3 (line 5): mapping values are not allowed here")


def test_manifest_error_pickles():
    """A ManifestError survives pickling with all its fields (for multiprocessing)."""
    original = ManifestError("f.yaml", "bad", index=1, line=4, item=2)
    copy = pickle.loads(pickle.dumps(original))
    assert (copy.source, copy.message, copy.index, copy.line, copy.item) == ("f.yaml", "bad", 1, 4, 2)
    assert str(copy) == str(original) == "f.yaml: document 2, item 3 (line 4): bad"


BAD_TEXT = [
    ("a: 1\nb: \0\n", 2, "binary data (a NUL character)"),
    ("a: \x07\n", 1, "control character U+0007"),
    ("a: 1\n\n\x1b[0m\n", 3, "control character U+001B"),
    ("a: \ud800\n", 1, "unpaired surrogate"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD_TEXT, ids=["nul", "bell", "escape", "surrogate"])
def test_unprintable_characters(text, line, message):
    """NUL bytes and other characters YAML forbids are refused with their line."""
    caught = error(text)
    assert caught.index is None and caught.line == line and message in caught.message


BAD_BYTES = [
    (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10", "binary data (a NUL byte at offset 8)"),
    (b"a: caf\xe9\n", "not UTF-8 text (invalid byte 0xe9 at offset 6)"),
    (b"\xff\xfea\x00:\x00 \x00\x00\xd8\n\x00", "not UTF-16 text"),
]


@pytest.mark.parametrize(("data", "message"), BAD_BYTES, ids=["png", "latin1", "bad-utf16"])
def test_decode_text_refuses_binary_and_bad_encodings(data, message):
    """Binary data and invalid encodings give a clear error naming the source."""
    with pytest.raises(ManifestError) as caught:
        decode_text(data, source="f.bin")
    assert str(caught.value).startswith("f.bin: ") and message in str(caught.value)


ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-32"]


@pytest.mark.parametrize("encoding", ENCODINGS, ids=ENCODINGS)
def test_decode_text_encodings(encoding):
    """UTF-8 (with or without BOM) and UTF-16/32 with a BOM decode to the same text."""
    assert load_documents(decode_text("a: é\n".encode(encoding), source="f"), source="f") == [
        (0, 1, {"a": "é"})]


# --- loading: safety bounds ----------------------------------------------------------------

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""

MERGE_BOMB = "a: &a {x: 1}\n" + "".join(
    f"l{n}: &l{n} {{<<: [{', '.join([f'*{prev}'] * 10)}]}}\n"
    for n, prev in enumerate(["a"] + [f"l{m}" for m in range(11)]))


@pytest.mark.parametrize("text", [BILLION_LAUGHS, MERGE_BOMB], ids=["billion-laughs", "merge-keys"])
def test_yaml_bomb_refused_fast(text):
    """An alias bomb is measured on its graph, never expanded, and refused in well under a second."""
    started = time.perf_counter()
    caught = error(text)
    assert time.perf_counter() - started < 2
    assert "more than 1,000,000 nodes after expanding aliases" in caught.message


def test_alias_count_limited(monkeypatch):
    """More aliases than MAX_ALIASES are refused."""
    monkeypatch.setattr(bounds, "MAX_ALIASES", 5)
    assert "more than 5 aliases" in error("a: &a 1\nb: [" + ", ".join(["*a"] * 6) + "]\n").message


def test_node_limit(monkeypatch):
    """More nodes than MAX_NODES are refused, whichever reader meets them."""
    monkeypatch.setattr(bounds, "MAX_NODES", 50)
    for text in ["".join(f"- {n}\n" for n in range(60)), "[" + ", ".join(["1"] * 60) + "]\n",
                 "a: &a [1, 2, 3, 4, 5, 6, 7, 8]\nb: [*a, *a, *a, *a, *a, *a, *a]\n"]:
        assert "more than" in error(text).message
    assert len(load("".join(f"- {n}\n" for n in range(40)))[0]) == 40


def nested_flow(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_map(depth: int) -> str:
    return "a: " + "{a: " * (depth - 1) + "1" + "}" * (depth - 1)


def nested_block(depth: int) -> str:
    return "".join(" " * level + "a:\n" for level in range(depth - 1)) + " " * depth + "a: 1\n"


DEEP = [
    ("flow-10000", nested_flow(10_000)),
    ("json-10000", "{\"a\": " * 10_000 + "1" + "}" * 10_000),
    ("map-10000", nested_map(10_000)),
    ("block-2000", nested_block(2000)),
    ("flow-101", nested_flow(101)),
]


@pytest.mark.parametrize("text", [c[1] for c in DEEP], ids=[c[0] for c in DEEP])
def test_deep_nesting_refused(text):
    """Nesting past MAX_DEPTH is refused with a clear message, never a RecursionError."""
    started = time.perf_counter()
    caught = error(text)
    assert "nested deeper than 100 levels" in caught.message and caught.index == 0
    assert time.perf_counter() - started < 20  # (generous: ~1 s here, 4 s on a loaded 2-core host)


@pytest.mark.parametrize("text", [nested_flow(MAX_DEPTH), nested_map(MAX_DEPTH - 1),
                                  nested_block(MAX_DEPTH - 1)], ids=["flow", "map", "block"])
def test_nesting_up_to_the_limit_loads(text):
    """Nesting of exactly MAX_DEPTH levels (the leaf counted) loads."""
    assert len(load(text)) == 1


def test_alias_cannot_exceed_depth():
    """An alias that puts a deep node deeper than MAX_DEPTH is refused too."""
    text = "a: &a " + nested_flow(60) + "\nb: " + "[" * 50 + "*a" + "]" * 50 + "\n"
    assert "nested deeper than 100 levels" in error(text).message


def test_size_limit_refused_before_parsing():
    """Text over MAX_INPUT_BYTES (in UTF-8) is refused without being parsed."""
    started = time.perf_counter()
    assert "larger than 32 MiB" in error("a" * (MAX_INPUT_BYTES + 1)).message
    assert "larger than 32 MiB" in error("é" * (MAX_INPUT_BYTES // 2 + 1)).message
    assert time.perf_counter() - started < 2


def test_loading_1000_documents_is_fast():
    """1,000 Deployment-sized documents load in well under 300 ms (asserted loosely for CI)."""
    text = "---\n".join(MANIFEST.split("---\n")[0].replace("name: web\n", f"name: web-{n}\n", 1)
                        for n in range(1000))
    best = min(timed(load_documents, text, source="f.yaml") for _ in range(3))
    assert best < 1.0, f"{best:.3f} s"


def timed(function, *args, **kwargs) -> float:
    started = time.perf_counter()
    function(*args, **kwargs)
    return time.perf_counter() - started


def test_ruamel_is_imported_only_when_needed():
    """Reading ordinary manifests and writing YAML/JSON do not import ruamel.yaml."""
    code = ("import sys\nfrom kctl.manifests import sources, writer, yamlio\n"
            "yamlio.load_documents('a: [1, {b: c}]\\n---\\nd: |\\n  x\\n', source='f')\n"
            "writer.dump_yaml({'a': ['yes', 'x\\ny']}); writer.dump_json({})\n"
            "assert not [m for m in sys.modules if m.startswith('ruamel')], 'imported'\n"
            "yamlio.load_documents('a: &x 1\\nb: *x\\n', source='f')\n"
            "assert 'ruamel.yaml' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
