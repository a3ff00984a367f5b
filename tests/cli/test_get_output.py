"""`kctl get` output: sorted keys (-o yaml/json, and `kctl diff`), go-template(-file), jsonpath-file,
--sort-by, `get all,cm`, a CRD's printer columns, and `api-resources -o wide`."""

from __future__ import annotations

import json

import pytest

CMS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: web-10, labels: {z: "1", a: "2"}}
data: {zeta: "1", alpha: "2", size: 2Gi}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-9}
data: {size: 512Mi}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-1}
data: {size: "3"}
"""

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Ratio, type: number, jsonPath: .spec.ratio, priority: 1}
    - {name: Ready, type: boolean, jsonPath: .status.ready}
    - {name: Born, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
              ratio: {type: number}
          status:
            type: object
            properties:
              ready: {type: boolean}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {size: 3, color: red, ratio: 0.5}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w2}
spec: {size: 10}
"""


@pytest.fixture
def cms(kctl):
    """Three ConfigMaps, written with their keys out of order."""
    result = kctl("apply", "-f", "-", input=CMS)
    assert result.code == 0, result.err
    return kctl


def _key_paths(value, path=""):
    """Every mapping's key list, by path."""
    if isinstance(value, dict):
        yield path, list(value)
        for k, v in value.items():
            yield from _key_paths(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _key_paths(v, f"{path}[{i}]")


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_keys_sorted_at_every_level(cms, fmt):
    """-o yaml and -o json print every mapping's keys sorted, as kubectl prints what a server sends."""
    from kctl.manifests.yamlio import load_documents

    out = cms("get", "cm", "web-10", "-o", fmt).out
    obj = json.loads(out) if fmt == "json" else load_documents(out, source="out")[0][2]
    for path, keys in _key_paths(obj):
        assert keys == sorted(keys), path
    assert out.startswith("apiVersion: v1\ndata:\n  alpha:" if fmt == "yaml" else '{\n    "apiVersion": "v1",\n')


def test_diff_shows_sorted_keys_and_real_changes_only(cms):
    """`kctl diff` normalises both sides as `get -o yaml` does: a new key shows in its sorted place."""
    changed = CMS.split("---\n")[0].replace('zeta: "1", alpha: "2"', 'alpha: "2", mid: "3", zeta: "1"')
    result = cms("diff", "-f", "-", input=changed)
    assert result.code == 1, result.err
    body = [line for line in result.out.splitlines() if not line.startswith(("---", "+++", "@@"))]
    data = body[body.index(" data:") + 1:][:4]
    assert data == ['   alpha: "2"', '+  mid: "3"', "   size: 2Gi", '   zeta: "1"']


@pytest.mark.parametrize(("output", "expected"), [
    ('go-template={{range .items}}{{.metadata.name}}{{"\\n"}}{{end}}', "web-1\nweb-10\nweb-9\n"),
    ("go-template={{.metadata.name}}:{{len .data}}", None),
    ('template={{range .items}}{{if eq .metadata.name "web-9"}}{{.data.size}}{{end}}{{end}}', "512Mi"),
    ("go-template={{range $k, $v := (index .items 1).metadata.labels}}{{$k}}={{$v}} {{end}}", "a=2 z=1 "),
], ids=["range-items", "single-object", "template-alias", "map-in-key-order"])
def test_go_template(cms, output, expected):
    """-o go-template= renders the List (or the one named object) as kubectl does."""
    if expected is None:
        result = cms("get", "cm", "web-10", "-o", output)
        assert result.out == "web-10:3"
        return
    result = cms("get", "cm", "-o", output)
    assert result.code == 0, result.err
    assert result.out == expected


@pytest.mark.parametrize(("kind", "text"), [
    ("go-template-file", '{{range .items}}{{.metadata.name}} {{end}}'),
    ("templatefile", '{{range .items}}{{.metadata.name}} {{end}}'),
    ("jsonpath-file", '{range .items[*]}{.metadata.name} {end}'),
], ids=["go-template-file", "templatefile", "jsonpath-file"])
def test_template_files(cms, tmp_path, kind, text):
    """-o go-template-file= and -o jsonpath-file= read the template from a file."""
    path = tmp_path / "t.tmpl"
    path.write_text(text)
    result = cms("get", "cm", "-o", f"{kind}={path}")
    assert result.code == 0, result.err
    assert result.out == "web-1 web-10 web-9 "


@pytest.mark.parametrize(("output", "message"), [
    ("go-template={{.metadata.name", "error: error parsing template {{.metadata.name, template: output:1: "
                                    "unclosed action\n"),
    ("go-template={{index .items 7}}", 'error: error executing template "{{index .items 7}}": template: output:1:2: '
                                       'executing "output" at <index .items 7>: error calling index: '
                                       "index out of range: 7\n"),
    ("go-template-file=/nonexistent/t", "error: error reading template /nonexistent/t: No such file or directory\n"),
    ("go-template=", "error: template format specified but no template given\n"),
], ids=["parse", "execute", "missing-file", "empty"])
def test_template_errors(cms, output, message):
    """Template errors are kubectl's one line, with a non-zero exit and nothing on stdout."""
    result = cms("get", "cm", "-o", output)
    assert result.code != 0
    assert result.err == message
    assert result.out == ""


def test_go_template_error_does_not_dump_secret_values(kctl):
    """A failing template never prints the object (kubectl dumps it; a Secret's data must not leak)."""
    kctl("create", "-f", "-", input="apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n"
                                    "stringData: {password: hunter2-value}\n")
    result = kctl("get", "secret", "s", "-o", "go-template={{index .data.password 99}}")
    assert result.code != 0
    assert "hunter2" not in result.out + result.err
    assert "aHVudGVy" not in result.out + result.err


@pytest.mark.parametrize(("sort_by", "names"), [
    (".metadata.name", ["web-1", "web-9", "web-10"]),
    ("{.metadata.name}", ["web-1", "web-9", "web-10"]),
    (".data.size", ["web-1", "web-9", "web-10"]),
    ("{.metadata.labels.z}", ["web-1", "web-9", "web-10"]),
], ids=["natural-names", "braced", "quantities", "missing-first"])
def test_sort_by(cms, sort_by, names):
    """--sort-by orders as kubectl: digit runs numerically, quantities by value, objects without the field first."""
    result = cms("get", "cm", "--sort-by", sort_by, "-o", "name")
    assert result.code == 0, result.err
    assert result.out.split() == [f"configmap/{n}" for n in names]


def test_sort_by_table_and_unknown_field(cms):
    """--sort-by orders table rows; a field no object has is kubectl's error."""
    rows = cms("get", "cm", "--sort-by=.metadata.name", "--no-headers").out.splitlines()
    assert [r.split()[0] for r in rows] == ["web-1", "web-9", "web-10"]
    result = cms("get", "cm", "--sort-by=.spec.nothing")
    assert result.code != 0
    assert result.err == 'error: couldn\'t find any field with path "{.spec.nothing}" in the list of objects\n'


def test_get_all_in_a_comma_list(cms):
    """`get all,cm` lists the "all" kinds and ConfigMaps; `all` alone is unchanged."""
    cms("create", "-f", "-", input="apiVersion: v1\nkind: Service\nmetadata: {name: svc}\n"
                                  "spec: {ports: [{port: 80}]}\n")
    result = cms("get", "all,cm", "-o", "name")
    assert result.code == 0, result.err
    assert result.out.split() == ["service/svc", "configmap/web-1", "configmap/web-10", "configmap/web-9"]
    assert cms("get", "all", "-o", "name").out.split() == ["service/svc"]
    assert cms("get", "cm,all,cm", "-o", "name").out.split()[0] == "configmap/web-1"


def test_crd_printer_columns(kctl):
    """A custom kind prints its CRD's additionalPrinterColumns; priority > 0 only with -o wide."""
    crd, *widgets = CRD.split("---\n")
    assert kctl("apply", "-f", "-", input=crd).code == 0
    assert kctl("apply", "-f", "-", input="---\n".join(widgets)).code == 0
    rows = [line.split() for line in kctl("get", "widgets").out.splitlines()]
    assert rows[0] == ["NAME", "SIZE", "COLOR", "READY", "BORN"]
    assert rows[1][:3] == ["w1", "3", "red"] and rows[1][3].endswith("s")
    assert rows[2][:2] == ["w2", "10"] and len(rows[2]) == 3  # missing cells print empty
    wide = [line.split() for line in kctl("get", "widgets", "-o", "wide").out.splitlines()]
    assert wide[0] == ["NAME", "SIZE", "COLOR", "RATIO", "READY", "BORN"]
    assert wide[1][:4] == ["w1", "3", "red", "0.5"]
    # the CRD puts its kind in the "all" category
    assert kctl("get", "all", "-o", "name").out.split() == ["widget.example.com/w1", "widget.example.com/w2"]


def test_crd_without_columns_prints_age(kctl):
    """A CRD version without printer columns shows NAME and AGE, as the API server's default."""
    crd = CRD.split("---\n")[0]
    crd = crd[:crd.index("    additionalPrinterColumns:")] + crd[crd.index("    schema:"):]
    assert kctl("apply", "-f", "-", input=crd).code == 0
    assert kctl("apply", "-f", "-", input=CRD.split("---\n")[1]).code == 0
    assert kctl("get", "widgets").out.split()[:3] == ["NAME", "AGE", "w1"]


def test_api_resources_wide_cluster_scoped(kctl):
    """`api-resources --namespaced=false -o wide` lists cluster-scoped kinds with VERBS and CATEGORIES."""
    result = kctl("api-resources", "--namespaced=false", "-o", "wide")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert "namespaces" in rows and "nodes" in rows and "pods" not in rows
    assert all("false" in r and "true" not in r for r in rows.values())
    assert rows["namespaces"][-1] == "create,delete,get,list,patch,update,watch"
    pods = kctl("api-resources", "--namespaced=true", "-o", "wide").out
    assert any(line.split()[0] == "pods" and line.split()[-1] == "all" for line in pods.splitlines())


def test_api_resources_bad_output(kctl):
    """An -o api-resources cannot print is one error line."""
    result = kctl("api-resources", "-o", "yaml")
    assert result.code != 0 and result.err == "error: --output yaml is not available\n"
