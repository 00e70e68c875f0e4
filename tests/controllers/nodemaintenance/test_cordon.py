"""Cordon remembers the node's original state so it never uncordons a node it did not cordon."""

from __future__ import annotations

from typing import Any

from controllers.nodemaintenance.api import ORIGINAL_UNSCHEDULABLE_ANNOTATION as ORIG
from controllers.nodemaintenance.cordon import plan_cordon


def node(*, unschedulable: bool = False, original: str | None = None) -> dict[str, Any]:
    annotations = {ORIG: original} if original is not None else {}
    return {"metadata": {"name": "n", "annotations": annotations}, "spec": {"unschedulable": unschedulable}}


def apply(n: dict[str, Any], spec: dict[str, Any], notes: dict[str, str | None]) -> dict[str, Any]:
    out = {
        "metadata": {"name": "n", "annotations": dict(n["metadata"]["annotations"])},
        "spec": dict(n["spec"]),
    }
    for k, v in notes.items():
        if v is None:
            out["metadata"]["annotations"].pop(k, None)
        else:
            out["metadata"]["annotations"][k] = v
    for k, v in spec.items():
        if v is None:
            out["spec"].pop(k, None)
        else:
            out["spec"][k] = v
    return out


def test_cordon_then_uncordon_restores_schedulable() -> None:
    n = apply(node(), *plan_cordon(node(), want_cordon=True))
    assert n["spec"]["unschedulable"] is True
    assert n["metadata"]["annotations"][ORIG] == "false"
    n = apply(n, *plan_cordon(n, want_cordon=False))
    assert not n["spec"].get("unschedulable")
    assert ORIG not in n["metadata"]["annotations"]


def test_node_cordoned_before_stays_cordoned() -> None:
    start = node(unschedulable=True)
    n = apply(start, *plan_cordon(start, want_cordon=True))
    assert n["metadata"]["annotations"][ORIG] == "true"
    n = apply(n, *plan_cordon(n, want_cordon=False))
    assert n["spec"]["unschedulable"] is True
    assert ORIG not in n["metadata"]["annotations"]


def test_manual_uncordon_during_maintenance_is_reconciled_back() -> None:
    spec, notes = plan_cordon(node(unschedulable=False, original="false"), want_cordon=True)
    assert spec == {"unschedulable": True}
    assert notes == {}  # the original state recorded first is kept


def test_nothing_to_do_when_not_ours() -> None:
    assert plan_cordon(node(unschedulable=True), want_cordon=False) == ({}, {})
    assert plan_cordon(node(unschedulable=True, original="false"), want_cordon=True) == ({}, {})
