"""kctl.output.formats: every `-o` value kubectl accepts parses to its format; a bad one is kubectl's error line."""

from __future__ import annotations

import pytest

from kctl.machinery.errors import BadRequest
from kctl.output.formats import OutputFormat, parse_output


PARSE_CASES = [
    (None, OutputFormat("table")),
    ("", OutputFormat("table")),
    ("wide", OutputFormat("wide")),
    ("yaml", OutputFormat("yaml")),
    ("json", OutputFormat("json")),
    ("name", OutputFormat("name")),
    ("jsonpath={.metadata.name}", OutputFormat("jsonpath", template="{.metadata.name}")),
    ("custom-columns=NAME:.metadata.name,IMG:spec.containers[*].image",
     OutputFormat("custom-columns", columns=(("NAME", "{.metadata.name}"),
                                             ("IMG", "{.spec.containers[*].image}")))),
]


@pytest.mark.parametrize("spec,expected", PARSE_CASES, ids=[str(c[0]) for c in PARSE_CASES])
def test_parse_output(spec, expected):
    """Every -o value kubectl accepts for get parses to its format."""
    assert parse_output(spec) == expected


PARSE_ERRORS = [
    ("xml", 'unable to match a printer suitable for the output format "xml", allowed formats are: '
            "custom-columns,custom-columns-file,go-template,go-template-file,json,jsonpath,jsonpath-file,name,"
            "template,templatefile,wide,yaml"),
    ("jsonpath", "template format specified but no template given"),
    ("jsonpath=", "template format specified but no template given"),
    ("jsonpath={.a", "error parsing jsonpath {.a, unclosed action"),
    ("custom-columns", "custom-columns format specified but no custom columns given"),
    ("custom-columns=NAME", "unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>"),
]


@pytest.mark.parametrize("spec,message", PARSE_ERRORS, ids=[c[0] for c in PARSE_ERRORS])
def test_parse_output_errors(spec, message):
    """A bad -o value is a BadRequest with kubectl's wording."""
    with pytest.raises(BadRequest) as info:
        parse_output(spec)
    assert info.value.message == message
