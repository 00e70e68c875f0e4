"""The reconcile's pure parts: slow-start batching, status calculation, deletion choice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from controllers.replicaset.sync import (
    calculate_status,
    choose_pods_to_delete,
    slow_start_batch,
    status_patch,
)
from tests.controllers.common.podfactory import make_pod

NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)


async def run_batches(count: int, fail_on_call: int | None) -> tuple[int, BaseException | None, list[int]]:
    calls: list[int] = []

    async def fn() -> None:
        calls.append(len(calls) + 1)
        if fail_on_call is not None and len(calls) == fail_on_call:
            raise RuntimeError("quota exceeded")

    successes, error = await slow_start_batch(count, 1, fn)
    return successes, error, calls


async def test_slow_start_creates_all_in_doubling_batches() -> None:
    successes, error, calls = await run_batches(10, None)
    assert (successes, error, len(calls)) == (10, None, 10)


async def test_slow_start_stops_after_the_first_failing_batch() -> None:
    # Batches 1, 2, 4: the 5th call is in the third batch (calls 4-7), which still runs to the end.
    successes, error, calls = await run_batches(20, 5)
    assert len(calls) == 7
    assert successes == 6
    assert isinstance(error, RuntimeError)


def rs(
    replicas: int = 3, min_ready: int = 0, generation: int = 2, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns", "uid": "rs-uid", "generation": generation},
        "spec": {
            "replicas": replicas,
            "minReadySeconds": min_ready,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web", "tier": "front"}}},
        },
        "status": status or {},
    }


def test_status_counts_fully_labeled_ready_and_available() -> None:
    pods = [
        make_pod("a", labels={"app": "web", "tier": "front"}, ready_since=NOW - timedelta(seconds=60)),
        make_pod("b", labels={"app": "web"}, ready_since=NOW - timedelta(seconds=5)),
        make_pod("c", labels={"app": "web", "tier": "front"}),
    ]
    status = calculate_status(rs(min_ready=10), pods, None, NOW)
    assert (
        status["replicas"],
        status["fullyLabeledReplicas"],
        status["readyReplicas"],
        status["availableReplicas"],
    ) == (
        3,
        2,
        2,
        1,
    )


def test_replica_failure_condition_set_on_error_and_cleared_on_success() -> None:
    failed = calculate_status(rs(replicas=3), [], RuntimeError("forbidden: exceeded quota"), NOW)
    cond = failed["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("ReplicaFailure", "True", "FailedCreate")
    assert "exceeded quota" in cond["message"]
    healed = calculate_status(rs(replicas=3, status=failed), [], None, NOW)
    assert healed["conditions"] == []
    patch = status_patch(rs(status=failed), healed)
    assert patch is not None and patch["status"]["conditions"] is None


def test_status_patch_only_when_something_changed() -> None:
    current = {
        "replicas": 0,
        "fullyLabeledReplicas": 0,
        "readyReplicas": 0,
        "availableReplicas": 0,
        "observedGeneration": 2,
    }
    obj = rs(status=current)
    assert status_patch(obj, calculate_status(obj, [], None, NOW)) is None
    bumped = rs(status=current, generation=3)
    patch = status_patch(bumped, calculate_status(bumped, [], None, NOW))
    assert patch is not None and patch["status"]["observedGeneration"] == 3


def evac(name: str, **kw: Any) -> dict[str, Any]:
    return make_pod(
        name, conditions=[{"type": "EvacuationRequest", "status": "True", "reason": "NodeMaintenance"}], **kw
    )


def test_evacuation_requested_pods_are_deleted_first_only_with_the_gate() -> None:
    running = evac("leaving", node="n1", phase="Running", ready_since=NOW - timedelta(hours=1))
    pods = [running, make_pod("pending"), make_pod("other", node="n2", phase="Running")]
    with_gate = choose_pods_to_delete(pods, pods, 2, NOW, evacuation_first=True)
    assert [p["metadata"]["name"] for p in with_gate] == ["leaving", "pending"]
    without = choose_pods_to_delete(pods, pods, 1, NOW, evacuation_first=False)
    assert [p["metadata"]["name"] for p in without] == ["pending"]


def _sync_over(rs_objs: list[dict[str, Any]], pod_objs: list[dict[str, Any]]) -> Any:
    from apiclient import KubeClient
    from controllers.common.expectations import UIDTrackingControllerExpectations
    from controllers.context import DiscardEvents, StaticGates
    from controllers.replicaset.sync import ReplicaSetSync
    from informers import Lister, meta_key
    from informers.indexers import default_indexers
    from informers.store import Store

    rs_store, pod_store = Store(default_indexers(pods=False)), Store(default_indexers(pods=True))
    for obj in rs_objs:
        rs_store.update(meta_key(obj), obj)
    for obj in pod_objs:
        pod_store.update(meta_key(obj), obj)
    return ReplicaSetSync(
        client=cast(KubeClient, None),  # related_pods reads the listers only, never the API
        rs_lister=Lister(rs_store),
        pod_lister=Lister(pod_store),
        expectations=UIDTrackingControllerExpectations(),
        recorder=DiscardEvents().recorder("replicaset-controller"),
        gates=StaticGates({}),
    )


_OWNER = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-uid", "controller": True}


def _sibling(name: str, hash_: str, namespace: str = "ns") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": name, "ownerReferences": [_OWNER]},
        "spec": {"selector": {"matchLabels": {"app": "web", "hash": hash_}}},
    }


def _labelled(
    name: str, node: str, labels: dict[str, str], namespace: str = "ns", *, ready: bool = True
) -> dict[str, Any]:
    if ready:
        pod = make_pod(name, node=node, phase="Running", ready_since=NOW - timedelta(hours=1))
    else:
        pod = make_pod(name, node=node, phase="Pending")
    pod["metadata"].update(namespace=namespace, uid=name, labels=labels)
    return pod


def test_related_pods_match_any_siblings_selector_on_the_candidates_nodes() -> None:
    """`getIndirectlyRelatedPods`, read from the node index: what a sibling selects on the nodes
    of the candidates, in this namespace; nothing on other nodes is looked at."""
    rs_a, rs_b = _sibling("web-a", "a"), _sibling("web-b", "b")
    pods = [
        _labelled("a1", "n1", {"app": "web", "hash": "a"}),
        _labelled("b1", "n1", {"app": "web", "hash": "b"}),  # a sibling's pod on the same node
        _labelled("x1", "n1", {"app": "other", "hash": "a"}),  # matches no sibling
        _labelled("b2", "n2", {"app": "web", "hash": "b"}),  # related, on a node with no candidate
        _labelled("b3", "n1", {"app": "web", "hash": "b"}, namespace="elsewhere"),
    ]
    sync = _sync_over([rs_a, rs_b, _sibling("web-c", "b", namespace="elsewhere")], pods)
    related = sync.related_pods(rs_a, [pods[0]])
    assert sorted(p["metadata"]["name"] for p in related) == ["a1", "b1"]
    assert sync.related_pods({**rs_a, "metadata": {**rs_a["metadata"], "ownerReferences": []}}, pods) == []
    assert sync.related_pods(rs_a, [make_pod("unscheduled")]) == []


def test_ranking_by_the_candidates_nodes_deletes_what_the_namespace_scan_would() -> None:
    """Go ranks by related pods per node over the whole namespace; counting only the
    candidates' nodes must choose the same pods, whatever the layout."""
    import random

    from controllers.common.ranking import pods_to_delete

    rng = random.Random(7)
    for _ in range(300):
        nodes = [f"n{i}" for i in range(rng.randint(1, 6))]
        siblings = [_sibling("web-a", "a"), _sibling("web-b", "b")]
        everything = [
            _labelled(
                f"p{i}",
                rng.choice([*nodes, ""]),
                {"app": rng.choice(["web", "web", "other"]), "hash": rng.choice("ab")},
                ready=rng.random() < 0.8,
            )
            for i in range(rng.randint(1, 30))
        ]
        for pod in everything:
            if not pod["spec"].get("nodeName"):
                pod["spec"].pop("nodeName", None)
        sync = _sync_over(siblings, everything)
        mine = [p for p in everything if p["metadata"]["labels"] == {"app": "web", "hash": "a"}]
        if not mine:
            continue
        whole_namespace = [p for p in everything if p["metadata"]["labels"]["app"] == "web"]
        count = rng.randint(1, len(mine))
        expected = pods_to_delete(mine, whole_namespace, count, NOW)
        assert pods_to_delete(mine, sync.related_pods(siblings[0], mine), count, NOW) == expected
