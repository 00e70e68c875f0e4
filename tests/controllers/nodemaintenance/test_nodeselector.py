"""Node selection with the scheduler's NodeSelector semantics."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.nodemaintenance.nodeselector import named_nodes, names_selector
from kubeutil.nodeaffinity import selector_matches
from tests.support.objects import node


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    req: dict[str, Any] = {"key": key, "operator": op}
    if values:
        req["values"] = list(values)
    return req


def sel(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeSelectorTerms": list(terms)}


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        (expr("zone", "In", "a", "b"), {"zone": "a"}, True),
        (expr("zone", "In", "a", "b"), {"zone": "c"}, False),
        (expr("zone", "In", "a"), {}, False),
        (expr("zone", "NotIn", "a"), {"zone": "b"}, True),
        (expr("zone", "NotIn", "a"), {}, True),
        (expr("zone", "NotIn", "a"), {"zone": "a"}, False),
        (expr("gpu", "Exists"), {"gpu": ""}, True),
        (expr("gpu", "Exists"), {}, False),
        (expr("gpu", "DoesNotExist"), {}, True),
        (expr("gpu", "DoesNotExist"), {"gpu": "x"}, False),
        (expr("rack", "Gt", "3"), {"rack": "4"}, True),
        (expr("rack", "Gt", "3"), {"rack": "3"}, False),
        (expr("rack", "Lt", "3"), {"rack": "2"}, True),
        (expr("rack", "Lt", "3"), {"rack": "x"}, False),
        (expr("rack", "Gt", "3", "4"), {"rack": "9"}, False),  # Gt takes exactly one value
        (expr("zone", "Exists", "a"), {"zone": "a"}, False),  # Exists takes no values
        (expr("zone", "Bogus", "a"), {"zone": "a"}, False),
    ],
)
def test_match_expressions(requirement: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert selector_matches(sel({"matchExpressions": [requirement]}), node("n", **labels)) is expected


def test_terms_are_ored_and_requirements_anded() -> None:
    s = sel(
        {"matchExpressions": [expr("zone", "In", "a"), expr("pool", "In", "gpu")]},
        {"matchFields": [expr("metadata.name", "In", "special")]},
    )
    assert selector_matches(s, node("x", zone="a", pool="gpu"))
    assert not selector_matches(s, node("x", zone="a", pool="cpu"))
    assert selector_matches(s, node("special"))


def test_match_fields_on_name_only() -> None:
    assert selector_matches(sel({"matchFields": [expr("metadata.name", "NotIn", "a")]}), node("b"))
    assert not selector_matches(sel({"matchFields": [expr("metadata.name", "NotIn", "a")]}), node("a"))
    assert not selector_matches(sel({"matchFields": [expr("spec.podCIDR", "In", "x")]}), node("x"))


def test_empty_selectors_and_terms_select_nothing() -> None:
    """A typo or an empty term must never turn into 'every node in the cluster'."""
    assert not selector_matches(None, node("a"))
    assert not selector_matches({}, node("a"))
    assert not selector_matches(sel(), node("a"))
    assert not selector_matches(sel({}), node("a"))


def test_names_selector_selects_exactly_the_named_nodes() -> None:
    s = names_selector(["b", "a", "a"])
    assert [n for n in ("a", "b", "c") if selector_matches(s, node(n))] == ["a", "b"]


NODES = [node("a", zone="x"), node("b", zone="y"), node("c", zone="x"), node("d")]


@pytest.mark.parametrize(
    ("selector", "bound"),
    [
        (names_selector(["a", "b"]), {"a", "b"}),
        (
            sel(
                {
                    "matchFields": [expr("metadata.name", "In", "a")],
                    "matchExpressions": [expr("zone", "In", "y")],
                }
            ),
            {"a"},
        ),
        (sel({"matchFields": [expr("metadata.name", "In", "a")]}, {}), {"a"}),  # an empty term adds nothing
        (
            sel(
                {"matchFields": [expr("metadata.name", "In", "a")]},
                {"matchExpressions": [expr("zone", "In", "x")]},
            ),
            None,
        ),
        (sel({"matchFields": [expr("metadata.name", "NotIn", "a")]}), None),
        (sel({"matchExpressions": [expr("zone", "Exists")]}), None),
        (sel(), set()),
        (None, set()),
        (sel({"matchFields": [expr("metadata.name", "In", "zzz")]}), {"zzz"}),
    ],
)
def test_a_selector_naming_its_nodes_is_bounded_by_those_names(
    selector: dict[str, Any] | None, bound: set[str] | None
) -> None:
    """The by-name lookup must select exactly what matching every node selects."""
    names = named_nodes(selector)
    assert names == (frozenset(bound) if bound is not None else None)
    everyone = {n["metadata"]["name"] for n in NODES if selector_matches(selector, n)}
    if names is not None:
        assert everyone <= names
        by_name = {
            n["metadata"]["name"]
            for n in NODES
            if n["metadata"]["name"] in names and selector_matches(selector, n)
        }
        assert by_name == everyone
