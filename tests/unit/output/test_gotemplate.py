"""kctl's Go template subset gives what kubectl gives on the same object (kubectl was the oracle)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from kctl.output import gotemplate
from kctl.output.gotemplate.values import go_quote

#: the object every case runs on (what `kubectl annotate --local -f obj.json zz- -o json` prints)
OBJECT = {"apiVersion": "v1", "data": {"a": "aGVsbG8=", "b": "2", "empty": ""}, "kind": "ConfigMap", "metadata": {"annotations": {"note": "say \"hi\"\tnow"}, "labels": {"app": "web", "tier": "front"}, "name": "web", "namespace": "prod"}, "spec": {"big": 1000000, "empty": [], "flag": True, "huge": 1e+21, "list": [1, "two", 3.5], "m": {}, "nil": None, "off": False, "ratio": 0.25, "replicas": 3}}

#: (template, what kubectl printed on stdout); recorded with kubectl v1.32
OUTPUTS = [
    ('{{.metadata.name}}', 'web'),
    ('{{.missing}}', '<no value>'),
    ('{{.missing.x}}', '<no value>'),
    ('{{.spec.nil}}', '<no value>'),
    ('{{.spec}}', 'map[big:1000000 empty:[] flag:true huge:1e+21 list:[1 two 3.5] m:map[] nil:<nil> off:false ratio:0.25 replicas:3]'),
    ('{{.spec.list}}', '[1 two 3.5]'),
    ('{{.spec.ratio}} {{.spec.big}} {{.spec.huge}}', '0.25 1000000 1e+21'),
    ('{{range $k, $v := .data}}{{$k}}={{$v}};{{end}}', 'a=aGVsbG8=;b=2;empty=;'),
    ('{{range .spec.list}}[{{.}}]{{end}}', '[1][two][3.5]'),
    ('{{range $i, $e := .spec.list}}{{$i}}:{{$e}} {{end}}', '0:1 1:two 2:3.5 '),
    ('{{range .spec.empty}}x{{else}}none{{end}}', 'none'),
    ('{{if .spec.flag}}yes{{else}}no{{end}}', 'yes'),
    ('{{if .spec.off}}a{{else if .spec.flag}}b{{else}}c{{end}}', 'b'),
    ('{{if .spec.off}}a{{else if .spec.nil}}b{{else}}c{{end}}', 'c'),
    ('{{with .metadata.labels}}{{.app}}{{end}}', 'web'),
    ('{{with .missing}}x{{else}}y{{end}}', 'y'),
    ('{{$n := .metadata.name}}{{$n}}-{{$n | printf "%q"}}', 'web-"web"'),
    ('{{.metadata.name | printf "%s!"}}', 'web!'),
    ('{{printf "%d|%v|%s|%q|%5d|%-5s|%.2f|%t|%x" .spec.replicas .spec.ratio .metadata.name .metadata.name .spec.replicas .metadata.name .spec.ratio .spec.flag .spec.big}}', '3|0.25|web|"web"|    3|web  |0.25|true|f4240'),
    ('{{printf "%d %s" .metadata.name}}', '%!d(string=web) %!s(MISSING)'),
    ('{{printf "%s" .spec.replicas}}', '%!s(int64=3)'),
    ('{{printf "%v %v" .spec.list .data}}', '[1 two 3.5] map[a:aGVsbG8= b:2 empty:]'),
    ('{{printf "%s" .spec.list}}', '[%!s(int64=1) two %!s(float64=3.5)]'),
    ('{{printf "a" 1 "b"}}', 'a%!(EXTRA int=1, string=b)'),
    ('{{print 1 2 "a" "b" 3}}', '1 2ab3'),
    ('{{println .metadata.name 1}}', 'web 1\n'),
    ('{{len .data}} {{len .metadata.name}} {{len .spec.list}}', '3 3 3'),
    ('{{index .data "a"}} {{index .spec.list 1}} {{index .metadata.labels "nope"}}', 'aGVsbG8= two <no value>'),
    ('{{eq .metadata.name "web"}} {{eq .spec.replicas 3}} {{ne .spec.replicas 2}} {{eq .metadata.name "a" "web"}}', 'true true true true'),
    ('{{eq .missing "x"}}', 'false'),
    ('{{eq .spec.nil nil}}', 'true'),
    ('{{lt 1 2}} {{le 2 2}} {{gt "b" "a"}} {{ge 1.5 2.5}}', 'true true true false'),
    ('{{and 1 0 2}} {{and 1 2}} {{or 0 "" "x"}} {{or 0 ""}} {{not .spec.flag}} {{not .missing}}', '0 2 x  false true'),
    ('{{base64decode .data.a}}', 'hello'),
    ('{{.data.a | base64decode}}', 'hello'),
    ('{{- .metadata.name -}}   {{- "x" }}', 'webx'),
    ('a {{/* comment */}} b {{- /* c2 */ -}} c', 'a  bc'),
    ('{{"\\n"}}{{`raw\\n`}}{{"\\u00e9\\t"}}', '\nraw\\né\t'),
    ('{{.metadata.annotations.note | printf "%q"}}', '"say \\"hi\\"\\tnow"'),
    ('{{range $i, $e := .spec.list}}{{if eq $i 1}}{{continue}}{{end}}{{if eq $i 2}}{{break}}{{end}}{{$e}}{{end}}', '1'),
    ('{{$x := 1}}{{if true}}{{$x = 2}}{{end}}{{$x}}', '2'),
    ('{{(index .spec.list 1)}} {{(.metadata).name}}', 'two web'),
    ('{{printf "%s" nil}}', '%!s(<nil>)'),
    ('{{index .metadata "labels" "app"}}', 'web'),
    ('{{exists . "metadata" "name"}} {{exists . "nope"}}', 'true false'),
    ('{{.kind}}/{{.apiVersion}}', 'ConfigMap/v1'),
    ('{{ .metadata.name }}{{"x" | len}}', 'web1'),
    ('{{.a | }}', '<no value>'),
    ('{{.spec.ratio | printf "%.1f %e %g"}}', '0.2 %!e(MISSING) %!g(MISSING)'),
    ('{{printf "%v" .spec.huge}}', '1e+21'),
    ('{{printf "%05d|%+d|%x|%X|%8.3f" 42 5 255 "hi" 3.14159}}', '00042|+5|ff|6869|   3.142'),
]

#: (template, kubectl's error line), parse and execution errors
ERRORS = [
    ('{{.metadata.name.x}}',
     'error: error executing template "{{.metadata.name.x}}": template: output:1:11: executing "output" at <.metadata.name.x>: can\'t evaluate field x in type interface {}'),
    ('{{.spec.nil.x}}',
     'error: error executing template "{{.spec.nil.x}}": template: output:1:7: executing "output" at <.spec.nil.x>: nil pointer evaluating interface {}.x'),
    ('{{len .spec.replicas}}',
     'error: error executing template "{{len .spec.replicas}}": template: output:1:2: executing "output" at <len .spec.replicas>: error calling len: len of type int64'),
    ('{{index .spec.list 5}}',
     'error: error executing template "{{index .spec.list 5}}": template: output:1:2: executing "output" at <index .spec.list 5>: error calling index: index out of range: 5'),
    ('{{index .spec.replicas 0}}',
     'error: error executing template "{{index .spec.replicas 0}}": template: output:1:2: executing "output" at <index .spec.replicas 0>: error calling index: can\'t index item of type int64'),
    ('{{index .data 1}}',
     'error: error executing template "{{index .data 1}}": template: output:1:2: executing "output" at <index .data 1>: error calling index: value has type int; should be string'),
    ('{{eq .spec.replicas "3"}}',
     'error: error executing template "{{eq .spec.replicas \\"3\\"}}": template: output:1:2: executing "output" at <eq .spec.replicas "3">: error calling eq: incompatible types for comparison'),
    ('{{lt .spec.replicas 3.5}}',
     'error: error executing template "{{lt .spec.replicas 3.5}}": template: output:1:2: executing "output" at <lt .spec.replicas 3.5>: error calling lt: incompatible types for comparison'),
    ('{{base64decode "!!"}}',
     'error: error executing template "{{base64decode \\"!!\\"}}": template: output:1:2: executing "output" at <base64decode "!!">: error calling base64decode: base64 decode failed: illegal base64 data at input byte 0'),
    ('{{.metadata.name',
     'error: error parsing template {{.metadata.name, template: output:1: unclosed action'),
    ('{{foo 1}}',
     'error: error parsing template {{foo 1}}, template: output:1: function "foo" not defined'),
    ('{{if}}{{end}}',
     'error: error parsing template {{if}}{{end}}, template: output:1: missing value for if'),
    ('{{range .x}}',
     'error: error parsing template {{range .x}}, template: output:1: unexpected EOF'),
    ('{{end}}',
     'error: error parsing template {{end}}, template: output:1: unexpected {{end}}'),
    ('{{else}}',
     'error: error parsing template {{else}}, template: output:1: unexpected {{else}}'),
    ('{{$x}}',
     'error: error parsing template {{$x}}, template: output:1: undefined variable "$x"'),
    ('{{.metadata.name 1}}',
     'error: error executing template "{{.metadata.name 1}}": template: output:1:11: executing "output" at <.metadata.name>: name is not a method but has arguments'),
    ('{{1 2}}',
     'error: error executing template "{{1 2}}": template: output:1:2: executing "output" at <1>: can\'t give argument to non-function 1'),
    ('{{range .spec.replicas}}{{.}}{{end}}',
     'error: error executing template "{{range .spec.replicas}}{{.}}{{end}}": template: output:1:13: executing "output" at <.spec.replicas>: range can\'t iterate over 3'),
    ('{{range .metadata.name}}{{.}}{{end}}',
     'error: error executing template "{{range .metadata.name}}{{.}}{{end}}": template: output:1:17: executing "output" at <.metadata.name>: range can\'t iterate over web'),
    ('{{"unterminated}}',
     'error: error parsing template {{"unterminated}}, template: output:1: unterminated quoted string'),
    ('{{| .a}}',
     'error: error parsing template {{| .a}}, template: output:1: unexpected "|" in command'),
    ('{{(1}}',
     'error: error parsing template {{(1}}, template: output:1: unclosed left paren'),
]


def _run(template: str) -> str:
    """What `kctl get -o go-template=` prints for OBJECT, or kubectl's error line."""
    try:
        return gotemplate.parse(template).execute(OBJECT)
    except gotemplate.ParseError as exc:
        return f"error: error parsing template {template}, {exc}"
    except gotemplate.ExecError as exc:
        return f"error: error executing template {json.dumps(template)}: {exc}"


@pytest.mark.parametrize(("template", "expected"), OUTPUTS, ids=[t for t, _ in OUTPUTS])
def test_output_matches_kubectl(template, expected):
    """Each template renders exactly what kubectl rendered."""
    assert _run(template) == expected


@pytest.mark.parametrize(("template", "expected"), ERRORS, ids=[t for t, _ in ERRORS])
def test_errors_match_kubectl(template, expected):
    """Parse and execution errors carry kubectl's wording and positions."""
    assert _run(template) == expected


@pytest.mark.parametrize(("value", "quoted"), [
    ("plain", '"plain"'), ('a"b\\c', '"a\\"b\\\\c"'), ("tab\there\n", '"tab\\there\\n"'),
    ("\x00\x7f", '"\\x00\\x7f"'), ("héllo ✓", '"héllo ✓"'), ("\u200b", '"\\u200b"'),
], ids=["plain", "escapes", "controls", "hex", "unicode", "non-printable"])
def test_go_quote(value, quoted):
    """%q quotes as Go's strconv.Quote does."""
    assert go_quote(value) == quoted


def test_list_object_ranges_items():
    """A List (what `get pods` hands the template) ranges over .items as kubectl users write."""
    data = {"apiVersion": "v1", "kind": "List", "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}
    template = '{{range .items}}{{.metadata.name}}{{"\\n"}}{{end}}'
    assert gotemplate.parse(template).execute(data) == "a\nb\n"


def test_deep_nesting_is_an_error_not_a_crash():
    """A template nested thousands deep gives a template error, not a Python traceback."""
    template = "{{if true}}" * 3000 + "x" + "{{end}}" * 3000
    with pytest.raises(gotemplate.TemplateError):
        gotemplate.parse(template).execute({})


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_oracle_still_agrees(tmp_path):
    """Where kubectl is installed, a sample of the table is re-checked against it live."""
    path = tmp_path / "obj.json"
    path.write_text(json.dumps(OBJECT))
    for template, expected in OUTPUTS[:: max(1, len(OUTPUTS) // 8)]:
        result = subprocess.run(["kubectl", "annotate", "--local", "-f", str(path), "zz-", "-o",
                                 f"go-template={template}"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout == expected, template
