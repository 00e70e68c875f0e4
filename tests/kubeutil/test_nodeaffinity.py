"""Node affinity against Go's tables (k8s.io/component-helpers/scheduling/corev1/nodeaffinity)."""

from __future__ import annotations

from typing import Any

import pytest

from kubeutil.nodeaffinity import pod_matches_node, selector_matches
from tests.support.objects import node

Obj = dict[str, Any]


def req(key: str, op: str, *values: str) -> Obj:
    out: Obj = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def exprs(*reqs: Obj) -> Obj:
    return {"matchExpressions": list(reqs)}


def fields(*reqs: Obj) -> Obj:
    return {"matchFields": list(reqs)}


def required(*terms: Obj) -> Obj:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    }


NAME = "metadata.name"
GPU = {"GPU": "NVIDIA-GRID-K1"}


# `TestPodMatchesNodeSelectorAndAffinityTerms`, nodeaffinity_test.go, case for case.
@pytest.mark.parametrize(
    ("pod_spec", "labels", "node_name", "expected"),
    [
        pytest.param({}, {}, "", True, id="no selector"),
        pytest.param({"nodeSelector": {"foo": "bar"}}, {}, "", False, id="missing labels"),
        pytest.param({"nodeSelector": {"foo": "bar"}}, {"foo": "bar"}, "", True, id="same labels"),
        pytest.param(
            {"nodeSelector": {"foo": "bar"}},
            {"foo": "bar", "baz": "blah"},
            "",
            True,
            id="node labels are superset",
        ),
        pytest.param(
            {"nodeSelector": {"foo": "bar", "baz": "blah"}},
            {"foo": "bar"},
            "",
            False,
            id="node labels are subset",
        ),
        pytest.param(
            required(exprs(req("foo", "In", "bar", "value2"))), {"foo": "bar"}, "", True, id="In matches"
        ),
        pytest.param(
            required(exprs(req("kernel-version", "Gt", "0204"))),
            {"kernel-version": "0206"},
            "",
            True,
            id="Gt matches",
        ),
        pytest.param(
            required(exprs(req("mem-type", "NotIn", "DDR", "DDR2"))),
            {"mem-type": "DDR3"},
            "",
            True,
            id="NotIn matches",
        ),
        pytest.param(required(exprs(req("GPU", "Exists"))), GPU, "", True, id="Exists matches"),
        pytest.param(
            required(exprs(req("foo", "In", "value1", "value2"))),
            {"foo": "bar"},
            "",
            False,
            id="affinity that does not match the labels",
        ),
        pytest.param(
            {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}},
            {"foo": "bar"},
            "",
            False,
            id="nil NodeSelectorTerms",
        ),
        pytest.param(required(), {"foo": "bar"}, "", False, id="empty NodeSelectorTerms"),
        pytest.param(required(exprs()), {"foo": "bar"}, "", False, id="empty MatchExpressions"),
        pytest.param(
            {"affinity": {"nodeAffinity": {}}}, {"foo": "bar"}, "", True, id="affinity, nil NodeSelector"
        ),
        pytest.param(
            required(exprs(req("GPU", "Exists"), req("GPU", "NotIn", "AMD", "INTER"))),
            GPU,
            "",
            True,
            id="matchExpressions ANDed, match",
        ),
        pytest.param(
            required(exprs(req("GPU", "Exists"), req("GPU", "In", "AMD", "INTER"))),
            GPU,
            "",
            False,
            id="matchExpressions ANDed, no match",
        ),
        pytest.param(
            required(
                exprs(req("foo", "In", "bar", "value2")), exprs(req("diffkey", "In", "wrong", "value2"))
            ),
            {"foo": "bar"},
            "",
            True,
            id="NodeSelectorTerms ORed",
        ),
        pytest.param(
            {"nodeSelector": {"foo": "bar"}, **required(exprs(req("foo", "Exists")))},
            {"foo": "bar"},
            "",
            True,
            id="affinity and nodeSelector both satisfied",
        ),
        pytest.param(
            {"nodeSelector": {"foo": "bar"}, **required(exprs(req("foo", "Exists")))},
            {"foo": "barrrrrr"},
            "",
            False,
            id="affinity satisfied, nodeSelector not",
        ),
        pytest.param(
            required(exprs(req("foo", "NotIn", "invalid value: ___@#$%^"))),
            {"foo": "bar"},
            "",
            False,
            id="invalid value in an affinity term",
        ),
        pytest.param(
            required(fields(req(NAME, "In", "node_1"))), {}, "node_1", True, id="matchFields In matches"
        ),
        pytest.param(
            required(fields(req(NAME, "In", "node_1"))),
            {},
            "node_2",
            False,
            id="matchFields In does not match",
        ),
        pytest.param(
            required(fields(req(NAME, "In", "node_1")), exprs(req("foo", "In", "bar"))),
            {"foo": "bar"},
            "node_2",
            True,
            id="two terms, fields do not match, expressions do",
        ),
        pytest.param(
            required({**fields(req(NAME, "In", "node_1")), **exprs(req("foo", "In", "bar"))}),
            {"foo": "bar"},
            "node_2",
            False,
            id="one term, fields do not match, expressions do",
        ),
        pytest.param(
            required({**fields(req(NAME, "In", "node_1")), **exprs(req("foo", "In", "bar"))}),
            {"foo": "bar"},
            "node_1",
            True,
            id="one term, both match",
        ),
        pytest.param(
            required(fields(req(NAME, "In", "node_1")), exprs(req("foo", "In", "not-match-to-bar"))),
            {"foo": "bar"},
            "node_2",
            False,
            id="two terms, neither matches",
        ),
    ],
)
def test_pod_matches_node_as_go(
    pod_spec: Obj, labels: dict[str, str], node_name: str, expected: bool
) -> None:
    assert pod_matches_node(pod_spec, node(node_name, **labels)) is expected


# `TestNodeSelectorMatch`, nodeaffinity_test.go: the cases that parse, and the invalid-key term.
@pytest.mark.parametrize(
    ("terms", "target", "expected"),
    [
        pytest.param(
            [{**exprs(req("label_1", "In", "label_1_val")), **fields(req(NAME, "In", "host_1"))}],
            node("host_1"),
            False,
            id="node matches field selector, but not labels",
        ),
        pytest.param(
            [{**exprs(req("label_1", "In", "label_1_val")), **fields(req(NAME, "In", "host_1"))}],
            node("host_1", label_1="label_1_val"),
            True,
            id="node matches field selector and label selector",
        ),
        pytest.param(
            [exprs(req("label_1", "In", "label_1_val")), fields(req(NAME, "In", "host_1"))],
            node("host_1"),
            True,
            id="second term matches",
        ),
        pytest.param(
            [exprs(req("invalid key", "DoesNotExist"))],
            node("host_1"),
            False,
            id="a term with an invalid key matches nothing",
        ),
    ],
)
def test_selector_matches_as_go(terms: list[Obj], target: Obj, expected: bool) -> None:
    assert selector_matches({"nodeSelectorTerms": terms}, target) is expected


@pytest.mark.parametrize(
    ("requirement", "labels"),
    [
        pytest.param(req("zone", "Exists", "a"), {"zone": "a"}, id="Exists with values"),
        pytest.param(req("zone", "NotIn"), {"zone": "a"}, id="NotIn without values"),
        pytest.param(req("zone", "DoesNotExist", "a"), {}, id="DoesNotExist with values"),
        pytest.param(req("rack", "Gt", "1_0"), {"rack": "99"}, id="Gt with a value ParseInt refuses"),
        pytest.param(req("rack", "Lt", "10"), {"rack": " 5"}, id="Lt against a label ParseInt refuses"),
        pytest.param(req("", "DoesNotExist"), {}, id="empty key"),
        pytest.param(req("zone", "Bogus", "a"), {"zone": "a"}, id="unknown operator"),
    ],
)
def test_requirements_labels_new_requirement_refuses_match_nothing(
    requirement: Obj, labels: dict[str, str]
) -> None:
    """`LazyErrorNodeSelector` skips a term that does not parse, even one that would match."""
    assert not selector_matches({"nodeSelectorTerms": [exprs(requirement)]}, node("n", **labels))


def test_match_fields_take_several_names() -> None:
    """Kubernetes wants exactly one value here; stored NodeMaintenances carry lists (`aiokcm drain a b`)."""
    selector = {"nodeSelectorTerms": [fields(req(NAME, "In", "a", "b"))]}
    assert [n for n in ("a", "b", "c") if selector_matches(selector, node(n))] == ["a", "b"]
