"""The compiled schema checks: definitions compiled when an object first reaches them, never more lenient."""

from __future__ import annotations

from kctl.admission.validation.schema import _compile_schema

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {"$ref": "#/$defs/Spec"},
        "odd": {"$ref": "#/$defs/Odd"},
        "tree": {"$ref": "#/$defs/Tree"},
    },
    "$defs": {
        "Spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        "Odd": {"not": {"type": "string"}},  # a keyword the compiler leaves to jsonschema
        "Tree": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Tree"},
                                                  "name": {"type": "string"}}},
        "Unused": {"type": "object", "properties": {"x": {"type": "string"}}},
    },
}


def test_definitions_are_compiled_when_reached_so_one_the_compiler_cannot_handle_spoils_no_other():
    compiled = _compile_schema(SCHEMA)
    assert compiled.is_valid is not None  # compiled whole, "Odd" made the whole schema jsonschema's
    assert compiled.is_valid({"spec": {"replicas": 3}})
    assert not compiled.is_valid({"spec": {"replicas": "3"}})


def test_a_definition_the_compiler_cannot_handle_answers_not_valid_and_jsonschema_decides():
    compiled = _compile_schema(SCHEMA)
    assert not compiled.is_valid({"odd": 5})  # "not valid" here: jsonschema decides...
    assert compiled.validator.is_valid({"odd": 5})  # ...and says valid
    assert not compiled.validator.is_valid({"odd": "x"})


def test_recursive_definitions_check_every_level():
    compiled = _compile_schema(SCHEMA)
    assert compiled.is_valid({"tree": {"name": "a", "child": {"name": "b", "child": {"name": "c"}}}})
    assert not compiled.is_valid({"tree": {"name": "a", "child": {"name": "b", "child": {"name": 7}}}})
