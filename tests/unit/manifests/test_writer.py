"""kctl.manifests.writer: YAML as kubectl writes it (quoting what would read back as something else), and JSON."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from kctl.manifests.writer import dump_json, dump_yaml, dump_yaml_all
from kctl.manifests.yamlio import load_documents

#: a Deployment of the usual shape, for the speed test
DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "labels": {"app": "web", "app.kubernetes.io/name": "web"},
                 "annotations": {"kctl.io/note": "a: b # not a comment", "empty": ""}},
    "spec": {"replicas": 3, "template": {"spec": {
        "containers": [{"name": "web", "image": "docker.io/library/nginx:1.25", "args": ["--port=8080", "-v"],
                        "command": ["nginx", "-g", "daemon off;"],
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "it's"}]}],
        "volumes": [{"name": "config", "configMap": {"name": "web-config"}}]}}},
}


def load(text: str) -> list:
    """Just the data of each document, as kctl reads it back."""
    return [data for _, _, data in load_documents(text, source="f.yaml")]


def timed(function, *args, **kwargs) -> float:
    """Seconds one call takes."""
    started = time.perf_counter()
    function(*args, **kwargs)
    return time.perf_counter() - started


QUOTED = ["yes", "no", "on", "off", "y", "N", "true", "False", "null", "~", "", " x", "x ", "1",
          "1.0", "0777", "0o17", "0x10", "1_000", "1e3", ".inf", ".nan", "-1", "+1", "1:20",
          "2024-01-01", "2024-01-01T00:00:00Z", ":", "a: b", "a #b", "#a", "- a", "-", "---x",
          "...", "? a", "&a", "*a", "!a", "|", ">", "%a", "@a", "`a", "'a", '"a', "[a]", "{a}",
          ",a", "<<", "=", "a:", "tab\there", "bell\x07", "\ufeffbom", "nel\x85", "ls\u2028"]


@pytest.mark.parametrize("text", QUOTED, ids=[repr(t) for t in QUOTED])
def test_strings_that_read_as_something_else_are_quoted(text):
    """Strings YAML 1.2 or 1.1 would read as another type or structure are quoted, and read back."""
    written = dump_yaml({"k": text})
    assert written[3] in "'\"", written
    assert load(written) == [{"k": text}]


PLAIN = ["web", "docker.io/library/nginx:1.25", "100m", "a b", "a#b", "--port=8080", "-v",
         "10.88.0.1", "daemon off;", "a,b", "é", "http://x/y?z=1"]


@pytest.mark.parametrize("text", PLAIN, ids=PLAIN)
def test_ordinary_strings_stay_plain(text):
    """Ordinary strings are written unquoted."""
    assert dump_yaml({"k": text}) == f"k: {text}\n"


WRITTEN = [
    ({"b": 1, "a": {"c": [1, "x"]}}, "b: 1\na:\n  c:\n  - 1\n  - x\n"),
    ({"a": [], "b": {}, "c": None, "d": True, "e": 1.5, "f": -0.0},
     "a: []\nb: {}\nc: null\nd: true\ne: 1.5\nf: -0.0\n"),
    ({"a": [{"b": 1, "c": 2}, [3, [4]]]}, "a:\n- b: 1\n  c: 2\n- - 3\n  - - 4\n"),
    ({"s": "x\ny\n"}, "s: |\n  x\n  y\n"),
    ({"s": "x\ny"}, "s: |-\n  x\n  y\n"),
    ({"s": "x\n\n"}, "s: |+\n  x\n\n"),
    ({"s": " x\ny"}, 's: " x\\ny"\n'),
    ({"s": ["a\nb\n"]}, "s:\n- |\n  a\n  b\n"),
    ({"it's": 'say "hi"'}, "it's: say \"hi\"\n"),
    ({"q": '"b" \'c\''}, "q: '\"b\" ''c'''\n"),
    ({"n": 1, "y": "yes"}, '"n": 1\n"y": "yes"\n'),
    ({"-k": 1, "a,b": 2}, '"-k": 1\n"a,b": 2\n'),
    ([], "[]\n"),
    ("x", "x\n"),
    (None, "null\n"),
]


@pytest.mark.parametrize(("obj", "expected"), WRITTEN, ids=[repr(c[0])[:30] for c in WRITTEN])
def test_dump_yaml_layout(obj, expected):
    """Block style as kubectl writes it: keys in order, indentless lists, `|` blocks; it reads back."""
    assert dump_yaml(obj) == expected
    assert load(expected) == [obj]


def test_long_keys_use_explicit_form():
    """Keys longer than an implicit key may be are written as `? key` and read back."""
    obj = {"k" * 1500: {"x": [1]}, "short": 1}
    assert load(dump_yaml(obj)) == [obj]


def test_dump_yaml_all_separates_documents():
    """Documents are separated by `---` lines and read back as separate documents."""
    objs = [{"a": 1}, {"b": "x\n\n"}, {"c": [1]}]
    written = dump_yaml_all(objs)
    assert written == "a: 1\n---\nb: |+\n  x\n\n---\nc:\n- 1\n"
    assert load(written) == objs
    assert dump_yaml_all([]) == ""


def test_dump_json_like_kubectl():
    """JSON is indented by 4, keeps non-ASCII characters and ends with a newline."""
    assert dump_json({"a": "é", "b": [1]}) == '{\n    "a": "é",\n    "b": [\n        1\n    ]\n}\n'


BAD_DATA = [({1: "a"}, TypeError), ({"a": object()}, TypeError), ({"a": {2.5: 1}}, TypeError)]


@pytest.mark.parametrize(("obj", "exception"), BAD_DATA, ids=["int-key", "object", "float-key"])
def test_dump_yaml_refuses_non_plain_data(obj, exception):
    """Only plain data with string keys can be written."""
    with pytest.raises(exception):
        dump_yaml(obj)


def test_dumping_1000_pods_is_fast():
    """`kctl get pods -o yaml` of 1,000 pods is written in well under 300 ms (asserted loosely for CI)."""
    pods = [DEPLOYMENT | {"metadata": {"name": f"web-{n}"}} for n in range(1000)]
    best = min(timed(dump_yaml, {"apiVersion": "v1", "kind": "List", "items": pods}) for _ in range(3))
    assert best < 1.0, f"{best:.3f} s"


def test_writing_loads_no_reader():
    """`-o yaml|json` output loads the writer and YAML 1.1 resolution only: no reader, no ruamel.yaml."""
    code = ("import json, sys\nfrom kctl.manifests.writer import dump_json, dump_yaml\n"
            "dump_yaml({'a': ['yes', 'x\\ny', 1.5]}); dump_json({})\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('kctl', 'ruamel')))))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["kctl", "kctl.manifests", "kctl.manifests.bounds", "kctl.manifests.charsets",
                                         "kctl.manifests.errors", "kctl.manifests.writer", "kctl.manifests.yaml11"]
