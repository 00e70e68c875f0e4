"""A quiet cluster gets no writes: once a mixed cluster of odd but valid objects has converged,
the manager, every controller on, sends the API server nothing more.

The manager's writes are counted at its client's REST layer, so every path counts: status
patches that change nothing, events, requeue loops that write, timestamps rewritten on each
sync. On the real kube-apiserver the same objects must be accepted and the same silence hold.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import NODEMAINTENANCES, NODES, PODS
from localcluster.demo import ensure_crd
from tests.e2e import oddworld
from tests.e2e.world import ClientWrites, manager_options, running_manager
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")

WINDOW = 5.0  # longer than any resync-like period a no-op loop would show in (1 s, 2 s ...)
NAMESPACES = ("odd-a", "odd-b")


def _pod_creates(writes: list[Any]) -> int:
    return sum(1 for w in writes if w.method == "POST" and w.url.endswith("/pods"))


async def test_a_converged_mixed_cluster_gets_no_writes(cluster: Any, kube: KubeClient) -> None:
    await ensure_crd(kube)
    await oddworld.taint_node(kube)
    try:
        created = 0
        for ns in NAMESPACES:
            created += await oddworld.populate(kube, ns)
        async with running_manager(cluster, manager_options(cluster)) as manager:
            writes = ClientWrites(manager.client)
            await eventually(lambda: manager.health.ready, "caches synced")
            # converging first (a quiet spell before the first write is not a converged cluster)
            await eventually(
                lambda: _pod_creates(writes.writes) >= 20, "the manager creating the world's pods", timeout=90
            )
            await writes.settled(quiet=3.0)
            converging = list(writes.writes)
            start = time.monotonic()
            await anyio.sleep(WINDOW)
            quiet = writes.since(start)
            taints = next(c for c in manager.controllers if c.name == "taint-eviction-controller")
            due = {
                name: taints.schedule.scheduled(f"odd-a/{name}")  # type: ignore[attr-defined]
                for name in ("tolerates-68-years", "tolerates-int64-max")
            }
            now = anyio.current_time()
            survivors = {
                p["metadata"]["name"]
                for p in await kube.list_all(PODS, namespace="odd-a")
                if p["spec"].get("nodeName") == oddworld.TAINTED_NODE
            }
    finally:
        await _untaint_and_forget_maintenances(kube)
    assert created > 40
    # the manager did converge the cluster: pods, ReplicaSets and statuses written
    assert _pod_creates(converging) >= 20
    assert any(w.url.endswith("/poddisruptionbudgets/everything-all/status") for w in converging)
    assert quiet == [], f"{len(quiet)} writes in {WINDOW} s of a quiet cluster:\n" + "\n".join(
        f"{w.method} {w.url} {w.status}" for w in quiet[:40]
    )
    # decades of toleration: scheduled that far out; the int64 maximum is Go's "forever"
    # (getMinTolerationTime's sentinel): never scheduled at all. Both alive.
    assert due["tolerates-68-years"] is not None, due
    assert due["tolerates-68-years"] - now > oddworld.MAX_INT32 - 60, due
    assert due["tolerates-int64-max"] is None, due
    assert {"tolerates-68-years", "tolerates-int64-max"} <= survivors


async def _untaint_and_forget_maintenances(kube: KubeClient) -> None:
    """Cluster-scoped leftovers a shared real control plane would carry into the next test."""
    await kube.patch(NODES, oddworld.TAINTED_NODE, {"spec": {"taints": None}})
    for ns in NAMESPACES:
        for body in oddworld.maintenances(ns):
            try:
                await kube.delete(NODEMAINTENANCES, body["metadata"]["name"])
            except ApiError as exc:
                if not exc.not_found:
                    raise
