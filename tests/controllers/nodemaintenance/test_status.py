"""Status and conditions as a user reads them while a drain runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from controllers.nodemaintenance.api import Maintenance
from controllers.nodemaintenance.status import (
    BlockingPod,
    NodeProgress,
    build_status,
    condition,
    missing_nodes,
    node_phase,
    node_progress,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def maintenance(*, cordon: bool = True, drain: bool = True) -> Maintenance:
    obj = {
        "metadata": {"name": "m", "generation": 2},
        "spec": {"cordon": cordon, "drain": drain, "nodeSelector": {"nodeSelectorTerms": []}},
    }
    return Maintenance.from_obj(obj)


def app_pod(name: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "ownerReferences": [{"kind": "ReplicaSet", "controller": True}],
        },
        "status": {"phase": "Running", "conditions": list(conditions)},
    }


NODE = {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}}


def test_node_progress_counts_pending_and_evacuating() -> None:
    t = (NOW - timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pods = [
        app_pod(
            "a",
            {
                "type": "EvacuationRequest",
                "status": "True",
                "reason": "NodeMaintenance",
                "lastTransitionTime": t,
            },
            {"type": "EvacuationInitiated", "status": "True", "lastTransitionTime": t},
        ),
        app_pod(
            "b",
            {
                "type": "EvacuationRequest",
                "status": "True",
                "reason": "NodeMaintenance",
                "lastTransitionTime": t,
            },
        ),
        {
            "metadata": {
                "name": "ds",
                "namespace": "ns",
                "ownerReferences": [{"kind": "DaemonSet", "controller": True}],
            }
        },
    ]
    p = node_progress(
        node=NODE,
        pods=pods,
        cordon=True,
        drain=True,
        timeout=180,
        now=NOW,
        eviction_blocks={"ns/b": BlockingPod("ns", "b", "EvictionRefused", "PDB says no")},
    )
    assert (p.phase, p.pending, p.evacuating) == ("Draining", 2, 1)
    assert [b.reason for b in p.blocking] == ["EvictionRefused"]


def test_drained_only_when_no_targeted_pod_is_left() -> None:
    m = maintenance()
    draining = {
        "n1": NodeProgress("Draining", 1, 0, (BlockingPod("ns", "b", "EvictionRefused", "PDB"),), True),
        "n2": NodeProgress("Drained", 0, 0, (), True),
    }
    status = build_status(m, {}, draining, now=NOW)
    drained_cond = condition(status, "Drained")
    assert drained_cond is not None and drained_cond["status"] == "False"
    blocked = condition(status, "Blocked")
    assert blocked is not None and blocked["status"] == "True" and "ns/b on n1" in blocked["message"]
    assert status["podsPendingEvacuation"] == 1 and status["nodeCount"] == 2
    assert status["nodes"]["n1"]["blockingPods"] == [
        {"namespace": "ns", "name": "b", "reason": "EvictionRefused", "message": "PDB"}
    ]
    done = {name: NodeProgress("Drained", 0, 0, (), True) for name in draining}
    later = build_status(m, status, done, now=NOW + timedelta(seconds=30))
    drained_later = condition(later, "Drained")
    assert drained_later is not None and drained_later["status"] == "True"
    assert drained_later["lastTransitionTime"] == "2026-01-01T12:00:30Z"
    cordoned = condition(later, "Cordoned")
    assert (
        cordoned is not None and cordoned["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    )  # unchanged status
    assert later["drainStartTime"] == status["drainStartTime"]


def test_not_drained_when_drain_is_off() -> None:
    status = build_status(
        maintenance(drain=False), {}, {"n1": NodeProgress("Cordoned", unschedulable=True)}, now=NOW
    )
    drained = condition(status, "Drained")
    assert drained is not None and drained["status"] == "False" and drained["reason"] == "DrainNotRequested"
    assert "drainStartTime" not in status


def test_node_phase_is_the_most_advanced() -> None:
    assert node_phase([]) is None
    assert node_phase([NodeProgress("Planning"), NodeProgress("Draining")]) == "Draining"


def test_no_node_selected_is_never_cordoned_or_drained() -> None:
    status = build_status(maintenance(), {}, {}, now=NOW)
    for type_ in ("NodesSelected", "Cordoned", "Drained"):
        c = condition(status, type_)
        assert c is not None and c["status"] == "False" and c["reason"] == "NoNodesSelected", c


def test_a_node_deleted_before_it_drained_is_reported() -> None:
    previous = {
        "nodes": {"gone": {"phase": "Draining"}, "done": {"phase": "Drained"}, "n1": {"phase": "Draining"}}
    }
    missing = missing_nodes(previous, lambda n: n == "n1")
    assert missing == ["gone"]  # a node that had drained may go: it is done
    status = build_status(
        maintenance(), previous, {"n1": NodeProgress("Drained", unschedulable=True)}, now=NOW, missing=missing
    )
    assert status["nodes"]["gone"]["phase"] == "NodeNotFound"
    drained = condition(status, "Drained")
    assert drained is not None and (drained["status"], drained["reason"]) == ("False", "NodeNotFound")
    # The last selected node gone: nothing is selected, cordoned or drained.
    alone = build_status(
        maintenance(), {"nodes": {"gone": {"phase": "Draining"}}}, {}, now=NOW, missing=["gone"]
    )
    for type_ in ("NodesSelected", "Cordoned", "Drained"):
        c = condition(alone, type_)
        assert c is not None and (c["status"], c["reason"]) == ("False", "NodeNotFound"), c


def test_terminating_and_waiting_pods_are_listed_but_do_not_block() -> None:
    nodes = {
        "n1": NodeProgress(
            "Draining",
            2,
            0,
            (BlockingPod("ns", "a", "Terminating"), BlockingPod("ns", "b", "AwaitingEvacuation")),
            True,
        )
    }
    blocked = condition(build_status(maintenance(), {}, nodes, now=NOW), "Blocked")
    assert blocked is not None and blocked["status"] == "False" and "ns/a" in blocked["message"]
    nodes["n1"] = NodeProgress("Draining", 1, 0, (BlockingPod("ns", "c", "LocalStorage"),), True)
    blocked = condition(build_status(maintenance(), {}, nodes, now=NOW), "Blocked")
    assert blocked is not None and blocked["status"] == "True"


def test_an_invalid_pod_selector_is_reported_not_guessed() -> None:
    obj = {
        "metadata": {"name": "m", "generation": 1},
        "spec": {
            "cordon": True,
            "drain": True,
            "podSelector": "app in (",
            "nodeSelector": {"nodeSelectorTerms": []},
        },
    }
    m = Maintenance.from_obj(obj)
    assert m.invalid.startswith("spec.podSelector")
    progress = node_progress(
        node=NODE, pods=[app_pod("a")], cordon=True, drain=True, timeout=180, now=NOW, invalid=m.invalid
    )
    status = build_status(m, {}, {"n1": progress}, now=NOW)
    drained = condition(status, "Drained")
    assert drained is not None and (drained["status"], drained["reason"]) == ("False", "InvalidSpec")
