"""Manifests read exactly as Kubernetes reads them: YAML 1.1 scalars (go-yaml v2 through
sigs.k8s.io/yaml), then Kubernetes' JSON round trip; both of kctl's readers agree on every case.

The tables were recorded from /usr/bin/kubectl v1.32 with
`kubectl label --local -f x.yaml z=1 -o json` (the same manifest reader as
`kubectl create -f x.yaml --dry-run=client -o json`, which needs a server for its REST mapping):
the JSON text kubectl printed for `foo: {k: TEXT}` (values) and `foo: {TEXT: v}` (keys), or
ERROR when kubectl refused the file. When kubectl is installed, one test re-records them live.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess

import pytest

from kctl.admission import validation
from kctl.machinery.resources import builtin_registry
from kctl.manifests import bounds
from kctl.manifests.errors import ManifestError
from kctl.manifests.ruamelreader import ruamel_documents
from kctl.manifests.yamlio import load_documents

# (plain scalar, what kubectl printed for it as a value)
VALUES = [
    ('yes', 'true'),
    ('Yes', 'true'),
    ('YES', 'true'),
    ('yEs', '"yEs"'),
    ('y', 'true'),
    ('Y', 'true'),
    ('n', 'false'),
    ('N', 'false'),
    ('no', 'false'),
    ('NO', 'false'),
    ('on', 'true'),
    ('On', 'true'),
    ('ON', 'true'),
    ('oN', '"oN"'),
    ('off', 'false'),
    ('Off', 'false'),
    ('OFF', 'false'),
    ('true', 'true'),
    ('True', 'true'),
    ('TRUE', 'true'),
    ('tRUE', '"tRUE"'),
    ('false', 'false'),
    ('~', 'null'),
    ('null', 'null'),
    ('Null', 'null'),
    ('NULL', 'null'),
    ('nULL', '"nULL"'),
    ('0644', '420'),
    ('0o17', '15'),
    ('0x1F', '31'),
    ('0X1F', '31'),
    ('0b101', '5'),
    ('0B101', '5'),
    ('1_000', '1000'),
    ('1:20', '"1:20"'),
    ('190:20:30', '"190:20:30"'),
    ('-1:20', '"-1:20"'),
    ('1:20.5', '"1:20.5"'),
    ('1e3', '1000'),
    ('1.5', '1.5'),
    ('2024-01-01', '"2024-01-01"'),
    ('2001-12-14t21:59:43.10-05:00', '"2001-12-14t21:59:43.10-05:00"'),
    ('+12', '12'),
    ('-0644', '-420'),
    ('08', '8'),
    ('09.5', '9.5'),
    ('0.5', '0.5'),
    ('1_0.5', '10.5'),
    ('0x_1F', '31'),
    ('=', '"="'),
    ('<<', '"\\u003c\\u003c"'),
    ('1e+3', '1000'),
    ('1E3', '1000'),
    ('+.5', '0.5'),
    ('._', '"._"'),
    ('-_', '"-_"'),
    ('12e03', '12000'),
    ('0777', '511'),
    ('01', '1'),
    ('-0', '0'),
    ('0.', '0'),
    ('0b', '"0b"'),
    ('0x', '"0x"'),
    ('-0x1F', '-31'),
    ('+0x1F', '31'),
    ('0b_1', '1'),
    ('1__0', '10'),
    ('-1_0', '-10'),
    ('00', '0'),
    ('0_7', '7'),
    ('1.0e3', '1000'),
    ('.5e3', '500'),
    ('1e-3', '0.001'),
    ('1.2.3', '"1.2.3"'),
    ('685230.15', '685230.15'),
    ('1_0e3', '10000'),
    ('0.1_2', '0.12'),
    ('+0b11', '3'),
    ('123456789012345678901234567890', '1.2345678901234568e+29'),
    ('9223372036854775807', '9223372036854775807'),
    ('9223372036854775808', '9223372036854776000'),
    ('18446744073709551615', '18446744073709552000'),
    ('18446744073709551616', '18446744073709552000'),
    ('-9223372036854775808', '-9223372036854775808'),
    ('-9223372036854775809', '-9223372036854776000'),
    ('0xFFFFFFFFFFFFFFFF', '18446744073709552000'),
    ('0xFFFFFFFFFFFFFFFFF', '"0xFFFFFFFFFFFFFFFFF"'),
    ('0777777777777777777777', '9223372036854775807'),
    ('.inf', 'ERROR'),
    ('1.5e400', '"1.5e400"'),
    ('_1', '"_1"'),
    ('1_', '1'),
    ('-.5', '-0.5'),
    ('0.0', '0'),
    ('1e5000', '"1e5000"'),
    ('+', '"+"'),
    ('.', '"."'),
    ('0o', '"0o"'),
    ('0_', '0'),
    ('1e', '"1e"'),
    ('1.e3', '1000'),
    ('1.5E+3', '1500'),
    ('.E3', '".E3"'),
    ('+1_000', '1000'),
    ('0x1f', '31'),
    ('0xabc_def', '11259375'),
    ('1.0_0', '1'),
    ('TRUE_', '"TRUE_"'),
    ('Yes!', '"Yes!"'),
    ('0b2', '"0b2"'),
    ('078', '78'),
    ('0_8', '8'),
    ('1.5.x', '"1.5.x"'),
    ('-.Inf', 'ERROR'),
    ('.nan', 'ERROR'),
]

# (plain scalar, what kubectl printed for it as a mapping key)
KEYS = [
    ('on', '"true"'),
    ('yes', '"true"'),
    ('y', '"true"'),
    ('Y', '"true"'),
    ('NO', '"false"'),
    ('Off', '"false"'),
    ('0644', '"420"'),
    ('1_000', '"1000"'),
    ('1.5', '"1.5"'),
    ('1e3', '"1000"'),
    ('0x1F', '"31"'),
    ('/root', '"/root"'),
    ('null', 'ERROR'),
    ('2024-01-01', '"2024-01-01"'),
    ('12345678901234567890', 'ERROR'),
    ('1.0', '"1"'),
    ('0.1', '"0.1"'),
    ('1e30', '"1e+30"'),
    ('1.5e400', '"1.5e400"'),
    ('-0', '"0"'),
    ('.nan', '".nan"'),
    ('.inf', '".inf"'),
    ('-.inf', '"-.inf"'),
    ('1e6', '"1e+06"'),
    ('123456', '"123456"'),
    ('1234567', '"1234567"'),
    ('0.0001', '"0.0001"'),
    ('0.00001', '"1e-05"'),
    ('3.14159265358979', '"3.1415927"'),
    ("'on'", '"on"'),
    ('"0644"', '"0644"'),
    ('0b11', '"3"'),
    ('-12', '"-12"'),
]


def value_document(text: str, name: str = "x") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\nfoo:\n  k: {text}\n"


def key_document(text: str, name: str = "x") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\nfoo:\n  {text}: v\n"


def readers(text: str) -> dict[str, object]:
    """What each reader makes of the one-document text: the data, or the ManifestError."""
    found: dict[str, object] = {}
    for name, read in (("fast", lambda: load_documents(text, source="x.yaml")),
                       ("ruamel", lambda: ruamel_documents(text, "x.yaml", 0, [bounds.MAX_NODES])[0])):
        try:
            found[name] = read()[0][2]
        except ManifestError as error:
            found[name] = error
    return found


def same_as_kubectl(value: object, printed: str) -> bool:
    """Whether kctl's value is what kubectl's JSON text means (Go prints big floats as digits)."""
    expected = json.loads(printed)
    if isinstance(expected, int) and isinstance(value, float) and not isinstance(value, bool):
        return abs(value) >= 2**63 and float(expected) == value  # a float64 Go printed as digits
    return type(value) is type(expected) and value == expected


@pytest.mark.parametrize(("text", "printed"), VALUES, ids=[repr(v[0]) for v in VALUES])
def test_plain_values_read_as_kubectl_reads_them(text, printed):
    """Each plain value reads as kubectl reads it (`0644` is 420, `on` true), in both readers."""
    for reader, data in readers(value_document(text)).items():
        if printed == "ERROR":
            assert isinstance(data, ManifestError), reader
            assert data.line == 6 and "\n" not in str(data), reader
        else:
            assert not isinstance(data, ManifestError), (reader, data)
            assert same_as_kubectl(data["foo"]["k"], printed), (reader, data["foo"]["k"])


@pytest.mark.parametrize(("text", "printed"), KEYS, ids=[repr(k[0]) for k in KEYS])
def test_mapping_keys_read_as_kubectl_reads_them(text, printed):
    """Each plain key becomes the JSON key kubectl makes of it (`on:` is "true"), in both readers."""
    for reader, data in readers(key_document(text)).items():
        if printed == "ERROR":
            assert isinstance(data, ManifestError) and data.line == 6, reader
        else:
            assert not isinstance(data, ManifestError), (reader, data)
            assert list(data["foo"]) == [json.loads(printed)], reader


POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: files
  labels:
    tier: on
spec:
  containers:
  - name: c
    image: busybox
  volumes:
  - name: config
    configMap:
      name: config
      defaultMode: 0644
      items:
      - key: a
        path: a
        mode: 0400
  - name: secret
    secret:
      secretName: s
      defaultMode: 0o600
"""


def test_file_modes_are_octal_as_in_kubernetes():
    """`defaultMode: 0644` is 420 and `mode: 0400` 256 (not 644 and 400), in both readers."""
    for reader, pod in readers(POD).items():
        volumes = pod["spec"]["volumes"]
        assert volumes[0]["configMap"]["defaultMode"] == 420, reader
        assert volumes[0]["configMap"]["items"][0]["mode"] == 256, reader
        assert volumes[1]["secret"]["defaultMode"] == 384, reader
        assert pod["metadata"]["labels"]["tier"] is True, reader


def test_a_boolean_where_a_string_belongs_is_refused_with_a_hint():
    """An unquoted `on` label value is refused (as by the API server), saying to quote it."""
    [(_, _, pod)] = load_documents(POD, source="pod.yaml")
    rt = builtin_registry().for_object(pod)
    [problem] = validation.validate(pod, rt)
    assert problem.path == "metadata.labels.tier"
    assert "must be a string" in str(problem) and "quote" in str(problem)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_tables_match_live_kubectl(tmp_path):
    """kubectl, run now on every value of the table in one file, prints what the table says."""
    texts = [text for text, printed in VALUES if printed != "ERROR"]
    manifest = tmp_path / "values.yaml"
    manifest.write_text("---\n".join(value_document(text, f"x{i}") for i, text in enumerate(texts)))
    result = subprocess.run(["kubectl", "label", "--local", "-f", str(manifest), "z=1", "-o", "json"],
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        pytest.skip(f"kubectl label --local failed: {result.stderr.strip()[:200]}")
    decoder, items, position = json.JSONDecoder(), [], 0
    while result.stdout[position:].strip():  # one JSON object per document, one after another
        item, position = decoder.raw_decode(result.stdout, len(result.stdout) - len(
            result.stdout[position:].lstrip()))
        items.extend(item.get("items", [item]))
    printed = {item["metadata"]["name"]: item["foo"]["k"] for item in items}
    for i, (text, recorded) in enumerate((t, p) for t, p in VALUES if p != "ERROR"):
        live = printed[f"x{i}"]
        assert json.loads(recorded) == live or (
            isinstance(live, (int, float)) and math.isclose(float(json.loads(recorded)), float(live))), text
