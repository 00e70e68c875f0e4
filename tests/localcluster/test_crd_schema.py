"""Structural-schema processing of custom resources: pruning, defaults, validation, CEL rules."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.cel import CelError, CelSyntaxError, compile_rule
from localcluster.schema import apply_defaults, check_schema, prune, validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["reason"],
            "x-kubernetes-validations": [
                {"rule": "!self.drain || self.cordon", "message": "drain requires cordon"},
                {"rule": "self.reason == oldSelf.reason", "message": "reason is immutable"},
            ],
            "properties": {
                "cordon": {"type": "boolean", "default": False},
                "drain": {"type": "boolean", "default": False},
                "reason": {"type": "string", "minLength": 1, "maxLength": 20},
                "mode": {"type": "string", "enum": ["Fast", "Slow"]},
                "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "items": {
                    "type": "array",
                    "maxItems": 3,
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "weight": {"type": "integer", "default": 1},
                        },
                    },
                },
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def _obj(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "a"}, "spec": spec}


def _messages(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [f"{c.field}: {c.message}" for c in validate(obj, SCHEMA, old)]


def test_prune_drops_unknown_fields_and_reports_their_paths() -> None:
    obj = _obj(
        reason="r",
        bogus=1,
        extra={"anything": {"goes": 1}},
        labels={"a": "b"},
        items=[{"name": "x", "junk": True}],
    )
    obj["status"] = {"phase": "Done", "replicasToEvacuate": 3}
    obj["topLevel"] = "x"
    dropped = prune(obj, SCHEMA)
    assert sorted(dropped) == ["spec.bogus", "spec.items[0].junk", "status.replicasToEvacuate", "topLevel"]
    assert obj["spec"]["extra"] == {"anything": {"goes": 1}}
    assert obj["spec"]["labels"] == {"a": "b"}
    assert obj["metadata"] == {"name": "a"} and obj["kind"] == "Thing"


def test_defaults_fill_missing_fields_inside_present_objects_and_array_items() -> None:
    obj = _obj(reason="r", drain=True, items=[{"name": "x"}, {"name": "y", "weight": 5}])
    apply_defaults(obj, SCHEMA)
    assert obj["spec"]["cordon"] is False and obj["spec"]["drain"] is True
    assert [i["weight"] for i in obj["spec"]["items"]] == [1, 5]
    assert "status" not in obj


def test_validation_reports_each_violation_with_its_field_path_and_apiserver_wording() -> None:
    obj = _obj(
        cordon=True, drain=False, reason="", mode="Medium", replicas=11, items=[{"name": "a"}, {"name": "a"}]
    )
    msgs = _messages(obj)
    assert 'spec.reason: Invalid value: "": spec.reason in body should be at least 1 chars long' in msgs
    assert 'spec.mode: Unsupported value: "Medium": supported values: "Fast", "Slow"' in msgs
    assert (
        "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10" in msgs
    )
    assert any(m.startswith("spec.items[1]: Duplicate value:") for m in msgs)


def test_type_errors_and_required_fields() -> None:
    msgs = _messages(_obj(cordon="yes"))
    assert "spec.reason: Required value" in msgs
    assert (
        'spec.cordon: Invalid value: "string": spec.cordon in body must be of type boolean: "string"' in msgs
    )


def test_rule_drain_requires_cordon() -> None:
    assert _messages(_obj(reason="r", cordon=False, drain=True)) == [
        'spec: Invalid value: "object": drain requires cordon'
    ]
    assert _messages(_obj(reason="r", cordon=True, drain=True)) == []


def test_transition_rule_runs_only_on_update() -> None:
    new = _obj(reason="new", cordon=False, drain=False)
    assert _messages(new) == []
    old = _obj(reason="old", cordon=False, drain=False)
    assert _messages(new, old) == ['spec: Invalid value: "object": reason is immutable']
    assert _messages(old, old) == []


def test_rule_on_missing_field_is_a_runtime_error_not_a_pass() -> None:
    msgs = _messages(_obj(reason="r"))  # no defaults applied: self.drain does not exist
    assert msgs == [
        'spec: Invalid value: "object": no such key: drain evaluating rule: drain requires cordon'
    ]


def test_check_schema_rejects_rules_that_do_not_compile() -> None:
    items = {"type": "array", "items": {"type": "object", "properties": {"weight": {"type": "integer"}}}}
    bad = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"items": items},
                "x-kubernetes-validations": [
                    {"rule": "self.items.all(i, weight > 0)"},
                    {"rule": "self.items.all(i, i.weight > 0)"},
                    {"rule": "self.items.all(i, i.wieght > 0)"},
                ],
            }
        },
    }
    causes = check_schema(bad)
    prefix = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations"
    assert [c.field for c in causes] == [f"{prefix}[0].rule", f"{prefix}[2].rule"]
    assert "compilation failed: ERROR: <input>:1:19: undeclared reference to 'weight'" in causes[0].message
    assert "compilation failed: ERROR: <input>:1:20: undefined field 'wieght'" in causes[1].message
    assert check_schema(SCHEMA) == []


def test_check_schema_requires_types_for_structural_schemas() -> None:
    causes = check_schema(
        {"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}
    )
    assert [c.field for c in causes] == ["spec.versions[0].schema.openAPIV3Schema.properties[spec].type"]


@pytest.mark.parametrize(
    ("rule", "value", "expected"),
    [
        ("has(self.a) && self.a > 2", {"a": 3}, True),
        ("has(self.a) && self.a > 2", {}, False),
        ("size(self.s) <= 3 && self.s.startsWith('ab')", {"s": "abc"}, True),
        ("self.n % 3 == 1 ? self.m in ['x', 'y'] : false", {"n": 7, "m": "y"}, True),
        ("self.l.size() == 2 && self.l[1] == 'b'", {"l": ["a", "b"]}, True),
        ("-self.n + 2 * 3 == 1 && 7 / 2 == 3 && -7 / 2 == -3", {"n": 5}, True),
        ("self.missing || true", {}, True),  # CEL's || absorbs errors on the other side
        ("self.x != null && self.x.matches('^[a-z]+$')", {"x": "abc"}, True),
    ],
)
def test_cel_core_semantics(rule: str, value: dict[str, Any], expected: bool) -> None:
    assert compile_rule(rule).evaluate(value) is expected


@pytest.mark.parametrize(
    "rule", ["self.a ==", "self.a = 1", "foo(self.a)", "self.l.map(1, x)", "other.a", "has(self)"]
)
def test_cel_rejects_rules_that_do_not_compile(rule: str) -> None:
    with pytest.raises(CelSyntaxError):
        compile_rule(rule)


def test_cel_type_mismatch_is_an_error() -> None:
    with pytest.raises(CelError, match="no such overload"):
        compile_rule("self.a == 'x'").evaluate({"a": 1})
