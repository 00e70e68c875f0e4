"""Losing an optimistic-concurrency race is routine: counted as a conflict, never as an error.

The controller's pod writes are JSON patches guarded by a `test` of the resourceVersion it planned
on; against a cache that lags (the pod watch held back here) the server refuses the write. The
worker counts that `controller_runtime_reconcile_total{result="conflict"}` and retries, so
`controller_runtime_reconcile_errors_total` (what error-rate alerts watch) does not move, and
once the cache catches up the request lands.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from apiclient import ApiError, KubeClient
from apiclient.resources import NODEMAINTENANCES, PODS
from controllers.common.patches import stale_plan_is_conflict
from controllers.nodemaintenance import NodeMaintenanceController
from tests.controllers.harness import HeldWatches, running_controllers
from tests.controllers.nodemaintenance.helpers import GATES, NS, condition, make_pod, pod
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("cluster", "crd")


def _count(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"controller": "nodemaintenance", **labels}) or 0.0


async def test_a_stale_pod_write_is_a_conflict_not_an_error(kube: KubeClient, node_names: list[str]) -> None:
    target = node_names[0]
    await make_pod(kube, "web", target)
    held = HeldWatches(kube, [PODS])
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, informer_client=held) as h:
        assert await h.factory.wait_for_cache_sync(timeout=20)
        # the informer listed the pod; this change reaches the API but not the cache
        await kube.patch(PODS, "web", {"metadata": {"labels": {"moved": "yes"}}}, namespace=NS)
        conflicts = _count("controller_runtime_reconcile_total", result="conflict")
        errors = _count("controller_runtime_reconcile_errors_total")
        await kube.create(NODEMAINTENANCES, node_maintenance("m", [target], drain=True))
        await eventually(
            lambda: _count("controller_runtime_reconcile_total", result="conflict") > conflicts,
            "the stale write counted as a conflict",
        )
        held.release()

        async def requested() -> dict[str, Any] | None:
            c = condition(await pod(kube, "web"), "EvacuationRequest")
            return c if c and c["status"] == "True" else None

        await eventually(requested, "the request written once the cache caught up")
        assert _count("controller_runtime_reconcile_errors_total") == errors


async def test_only_an_inapplicable_patch_is_a_conflict(kube: KubeClient, node_names: list[str]) -> None:
    created = await make_pod(kube, "p", node_names[0])
    stale = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/metadata/labels/x", "value": "y"},
    ]
    with pytest.raises(ApiError) as err, stale_plan_is_conflict():
        await kube.patch(PODS, "p", stale, namespace=NS, patch_type="json")
    assert err.value.conflict
    # a value the schema refuses is an error, whatever guards the patch
    rv = created["metadata"]["resourceVersion"]
    invalid = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/metadata/labels/x", "value": "not a valid label value!"},
    ]
    with pytest.raises(ApiError) as err, stale_plan_is_conflict():
        await kube.patch(PODS, "p", invalid, namespace=NS, patch_type="json")
    assert err.value.invalid and not err.value.conflict
