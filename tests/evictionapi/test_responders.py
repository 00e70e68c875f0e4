"""A pod's responders: where they are read from, what is refused, and their order."""

from __future__ import annotations

from typing import Any

import pytest

from evictionapi import names
from evictionapi.responders import (
    DEFAULT_RESPONDER,
    Responder,
    pod_responders,
    responders_annotation,
)

SURGE = ("surge.aiokcm.io/replicaset", 10000)


def pod(*, field: list[Any] | None = None, annotation: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {}}
    if field is not None:
        obj["spec"]["evictionResponders"] = field
    if annotation is not None:
        obj["metadata"]["annotations"] = {names.POD_RESPONDERS_ANNOTATION: annotation}
    return obj


def test_a_pod_without_responders_gets_the_imperative_evictor() -> None:
    result = pod_responders(pod())
    assert result.responders == (DEFAULT_RESPONDER,)
    assert result.valid
    assert result.as_target_responders() == [
        {"name": names.IMPERATIVE_EVICTOR, "priority": 100, "state": names.STATE_INACTIVE}
    ]


def test_the_field_is_read_before_the_annotation() -> None:
    result = pod_responders(
        pod(
            field=[{"name": "field.example.com/a", "priority": 2000}],
            annotation=responders_annotation([("annotation.example.com/a", 3000)]),
        )
    )
    assert result.names() == ["field.example.com/a", names.IMPERATIVE_EVICTOR]


def test_annotation_responders_are_ordered_with_the_default_last() -> None:
    annotation = responders_annotation(
        [("b.example.com/x", 5000), ("a.example.com/x", 5000), ("z.io/x", 20000)]
    )
    result = pod_responders(pod(annotation=annotation))
    assert result.valid
    assert result.responders == (
        Responder("z.io/x", 20000),
        Responder("a.example.com/x", 5000),
        Responder("b.example.com/x", 5000),
        DEFAULT_RESPONDER,
    )


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        pytest.param("{not json", "invalid JSON", id="invalid JSON"),
        pytest.param(
            '{"name": "a.io/x", "priority": 1000}', "must be a JSON list", id="an object, not a list"
        ),
        pytest.param('["a.io/x"]', 'must be an object with "name" and "priority"', id="a bare string"),
        pytest.param('[{"priority": 1000}]', ".name: Required value", id="no name"),
        pytest.param('[{"name": "k8s.io/x", "priority": 1000}]', "are reserved", id="reserved domain"),
        pytest.param(
            '[{"name": "a.io/x", "priority": 10}]', "priorities 0-999 are reserved", id="reserved priority"
        ),
        pytest.param(
            '[{"name": "a.io/x"}]', ".priority: Invalid value: None: Required value", id="no priority"
        ),
        pytest.param(
            '[{"name": "a.io/x", "priority": "1000"}]', "must be an integer", id="priority as a string"
        ),
    ],
)
def test_invalid_declarations_are_reported_not_raised(annotation: str, expected: str) -> None:
    result = pod_responders(pod(annotation=annotation))
    assert not result.valid
    assert any(expected in e for e in result.errors), result.errors
    assert result.responders == (DEFAULT_RESPONDER,)


def test_one_bad_entry_leaves_the_others() -> None:
    result = pod_responders(
        pod(field=[{"name": "bad", "priority": 1000}, {"name": "good.example.com/x", "priority": 1000}])
    )
    assert result.names() == ["good.example.com/x", names.IMPERATIVE_EVICTOR]
    assert result.errors == (
        "spec.evictionResponders[0].name: Invalid value: 'bad': "
        'must be a domain-prefixed key (such as "acme.io/foo")',
    )


def test_duplicates_keep_the_first() -> None:
    result = pod_responders(
        pod(
            field=[
                {"name": "a.example.com/x", "priority": 2000},
                {"name": "a.example.com/x", "priority": 3000},
            ]
        )
    )
    assert result.responders[0] == Responder("a.example.com/x", 2000)
    assert "Duplicate value" in result.errors[0]


def test_at_most_ten_pod_responders_plus_the_default() -> None:
    declared = [(f"r{i}.example.com/x", 1000 + i) for i in range(12)]
    result = pod_responders(pod(annotation=responders_annotation(declared)), implicit=[SURGE])
    assert len(result.responders) == names.MAX_TARGET_RESPONDERS
    assert result.responders[-1] == DEFAULT_RESPONDER
    assert SURGE[0] not in result.names()
    assert any("must have at most 10 items" in e for e in result.errors)
    assert any(e.startswith(SURGE[0]) for e in result.errors)


def test_implicit_responders_join_in_priority_order() -> None:
    result = pod_responders(
        pod(annotation=responders_annotation([("high.example.com/x", 20000), ("low.example.com/x", 5000)])),
        implicit=[SURGE],
    )
    assert result.valid
    assert result.names() == ["high.example.com/x", SURGE[0], "low.example.com/x", names.IMPERATIVE_EVICTOR]


def test_a_declared_responder_overrides_the_implicit_one_of_the_same_name() -> None:
    result = pod_responders(pod(field=[{"name": SURGE[0], "priority": 1500}]), implicit=[SURGE])
    assert result.responders == (Responder(SURGE[0], 1500), DEFAULT_RESPONDER)


def test_without_the_default() -> None:
    assert pod_responders(pod(), include_default=False).responders == ()
