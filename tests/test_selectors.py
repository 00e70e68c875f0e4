from __future__ import annotations

import pytest

from kubeutil import selectors


def test_string_selector_operators() -> None:
    sel = selectors.parse("app=web,tier!=db,env in (prod, staging),!legacy,track")
    assert sel.matches({"app": "web", "env": "prod", "track": "x"})
    assert not sel.matches({"app": "web", "env": "dev", "track": "x"})
    assert not sel.matches({"app": "web", "env": "prod", "track": "x", "legacy": "1"})
    assert not sel.matches({"app": "web", "env": "prod"})
    assert not sel.matches({"app": "web", "env": "prod", "track": "x", "tier": "db"})


def test_label_selector_nil_matches_nothing_empty_matches_everything() -> None:
    assert not selectors.from_label_selector(None).matches({"a": "b"})
    assert selectors.from_label_selector({}).matches({"a": "b"})
    sel = selectors.from_label_selector(
        {
            "matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "v", "operator": "NotIn", "values": ["1"]}],
        }
    )
    assert sel.matches({"app": "x"})
    assert not sel.matches({"app": "x", "v": "1"})


def test_invalid_selectors_are_rejected() -> None:
    with pytest.raises(selectors.SelectorError):
        selectors.from_label_selector({"matchExpressions": [{"key": "a", "operator": "Bogus"}]})
    with pytest.raises(selectors.SelectorError):
        selectors.parse("a in (b")


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"rack": "6"}, True),
        ({"rack": "5"}, False),
        ({"rack": "1_0"}, False),
        ({"rack": " 9"}, False),
        ({}, False),
    ],
)
def test_greater_than_parses_as_strconv_parse_int(labels: dict[str, str], expected: bool) -> None:
    """`labels.Requirement.Matches` reads the label with `strconv.ParseInt`: `1_0` is no number."""
    assert selectors.parse("rack>5").matches(labels) is expected


def test_greater_than_needs_a_go_integer() -> None:
    with pytest.raises(selectors.SelectorError):
        selectors.parse("rack>1_0")


def test_field_selectors() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    assert selectors.fields_match(pod, selectors.parse_fields("spec.nodeName=n1,status.phase!=Failed"))
    assert not selectors.fields_match(pod, selectors.parse_fields("spec.nodeName!=n1"))
