"""`selector_matches` against `TestMatchNodeSelectorTerms` (pkg/apis/core/v1/helper/helpers_test.go).

Go passes the node's labels and fields separately; here they are a node's labels and its name
(`metadata.name`, the one field a node selector may name). The terms must not be modified
(`TestMatchNodeSelectorTermsStateless`).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubeutil.nodeaffinity import selector_matches
from tests.support.objects import node

Obj = dict[str, Any]


def label_in(key: str, *values: str) -> Obj:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}


def name_in(*values: str) -> Obj:
    return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(values)}]}


def both(key: str, value: str, name: str) -> Obj:
    return {**label_in(key, value), **name_in(name)}


@pytest.mark.parametrize(
    ("terms", "labels", "name", "want"),
    [
        pytest.param(None, {}, "", False, id="nil terms"),
        pytest.param(
            [label_in("label_1", "label_1_val")],
            {"label_1": "label_1_val"},
            "",
            True,
            id="node label matches matchExpressions terms",
        ),
        pytest.param([name_in("host_1")], {}, "host_1", True, id="node field matches matchFields terms"),
        pytest.param([name_in("host_1, host_2")], {}, "host_1", False, id="invalid node field requirement"),
        pytest.param(
            [name_in("host_1")],
            {"metadata.name": "host_1"},
            "",
            False,
            id="fieldSelectorTerm with node labels",
        ),
        pytest.param(
            [label_in("metadata.name", "host_1")],
            {},
            "host_1",
            False,
            id="labelSelectorTerm with node fields",
        ),
        pytest.param(
            [both("label_1", "label_1_val", "host_1")],
            {},
            "host_1",
            False,
            id="labelSelectorTerm and fieldSelectorTerm was set, but only node fields",
        ),
        pytest.param(
            [both("label_1", "label_1_val", "host_1")],
            {"label_1": "label_1_val"},
            "host_1",
            True,
            id="both node fields and labels (both matched)",
        ),
        pytest.param(
            [both("label_1", "label_1_val", "host_1")],
            {"label_1": "label_1_val-failed"},
            "host_1",
            False,
            id="both node fields and labels (one mismatched)",
        ),
        pytest.param(
            [label_in("label_1", "label_1_val"), name_in("host_1")],
            {"label_1": "label_1_val-failed"},
            "host_1",
            True,
            id="multi-selector was set, both node fields and labels (one mismatched)",
        ),
    ],
)
def test_match_node_selector_terms(
    terms: list[Obj] | None, labels: dict[str, str], name: str, want: bool
) -> None:
    selector = {"nodeSelectorTerms": terms}
    before = copy.deepcopy(selector)
    assert selector_matches(selector, node(name, **labels)) is want
    assert selector == before  # TestMatchNodeSelectorTermsStateless
