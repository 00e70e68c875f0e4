"""The budget reconcile: KCM's `sync` / `trySync` / `failSafe` for one PodDisruptionBudget.

The status is written through the `status` subresource only when it changed, as a PUT guarded by
the budget's `resourceVersion` (KCM's `UpdateStatus`): the eviction API decrements
`disruptionsAllowed` on the same object, and a stale status must never overwrite an eviction
(a 409 is requeued, never fail-safed). Any other failure (invalid selector, unresolvable
controller, bad percentage) fails safe: `disruptionsAllowed: 0` with
`DisruptionAllowed=False/SyncFailed`, other fields kept. A budget with `disruptedPods` entries is
looked at again when the earliest one expires.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from structlog.typing import FilteringBoundLogger

from apiclient import ApiError, KubeClient
from apiclient.resources import PODDISRUPTIONBUDGETS
from controllers import features
from controllers.common.evacuation import EVACUATING_PODS_ANNOTATION, count_annotation_patch
from controllers.context import EventRecorder, FeatureGates
from controllers.disruption.budget import Budget, BudgetError, compute_budget, fail_safe_status, new_status
from controllers.disruption.finders import ControllerFinder
from controllers.disruption.selectors import BudgetSelectors
from informers import Lister
from kubeutil.meta import object_meta
from kubeutil.selectors import SelectorError
from kubeutil.timestamps import utcnow

Obj = dict[str, Any]


@dataclass(kw_only=True, eq=False)
class BudgetSync:
    """One budget's status from the caches; `recheck(key, seconds)` schedules a later look."""

    client: KubeClient
    pdb_lister: Lister
    selectors: BudgetSelectors
    finder: ControllerFinder
    recorder: EventRecorder
    gates: FeatureGates
    recheck: Callable[[str, float], None]
    log: FilteringBoundLogger

    @property
    def evacuation(self) -> bool:
        return self.gates.enabled(features.DECLARATIVE_NODE_MAINTENANCE)

    async def sync(self, key: str) -> None:
        pdb = self.pdb_lister.get_by_key(key)
        if pdb is None:
            return
        try:
            written, budget, now = await self.try_sync(pdb)
        except ApiError as exc:
            if exc.conflict:
                raise  # the eviction API wrote in between: recompute from a fresher cache
            await self.fail_safe(pdb, exc)
            return
        except Exception as exc:  # any failure to compute or write the budget fails safe, as KCM's
            await self.fail_safe(pdb, exc)
            return
        if self.evacuation:
            # After the status, outside the fail-safe: a failed annotation is retried, never zeroes the budget.
            await self.publish_evacuating(written, budget.evacuating_pods)
        if budget.recheck_at is not None:
            # At most one pending recheck per budget: the queue keeps the earliest.
            self.recheck(key, max(0.0, (budget.recheck_at - now).total_seconds()))

    async def try_sync(self, pdb: Obj) -> tuple[Mapping[str, Any], Budget, datetime]:
        """`trySync`: compute and write the status; returns the budget as written, its numbers and "now"."""
        now = utcnow()
        try:
            pods = self.selectors.pods_for_pdb(pdb)
        except SelectorError as exc:
            self.recorder.event(pdb, "Warning", "NoPods", f"Failed to get pods: {exc}")
            raise
        if not pods:
            self.recorder.event(pdb, "Normal", "NoPods", "No matching pods found")
        evacuation = self.evacuation
        try:
            budget = await compute_budget(pdb, pods, self.finder, now, evacuation=evacuation)
        except (BudgetError, ApiError) as exc:
            self.recorder.event(
                pdb,
                "Warning",
                "CalculateExpectedPodCountFailed",
                f"Failed to calculate the number of expected pods: {exc}",
            )
            raise
        if budget.unmanaged_pods:
            self.log.debug("unmanaged pods selected", pods=budget.unmanaged_pods)
            self.recorder.event(
                pdb,
                "Warning",
                "UnmanagedPods",
                f"Pods selected by this PodDisruptionBudget (selector: {(pdb.get('spec') or {}).get('selector')}) "
                "were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, "
                "which may result in undefined behavior. To account for these pods please set "
                '".spec.minAvailable" field of the PDB to an integer value.',
            )
        for pod in budget.expired_pods:
            self.recorder.event(
                pod,
                "Warning",
                "NotDeleted",
                f"Pod was expected by PDB {object_meta(pdb).get('namespace', '')}/{object_meta(pdb).get('name', '')} "
                "to be deleted but it wasn't",
            )
        status = new_status(pdb, budget, now)
        written: Mapping[str, Any] = pdb
        if status is not None:
            written = await self.write_status(pdb, status)
        return written, budget, now

    async def write_status(self, pdb: Mapping[str, Any], status: dict[str, Any]) -> Mapping[str, Any]:
        """`UpdateStatus`: PUT a copy with the new status, guarded by the cached resourceVersion."""
        body = copy.deepcopy(dict(pdb))
        body.setdefault("apiVersion", "policy/v1")
        body.setdefault("kind", "PodDisruptionBudget")
        body["status"] = status
        meta = object_meta(pdb)
        return await self.client.replace(
            PODDISRUPTIONBUDGETS,
            body,
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            subresource="status",
        )

    async def publish_evacuating(self, pdb: Mapping[str, Any], count: int) -> None:
        patch = count_annotation_patch(pdb, EVACUATING_PODS_ANNOTATION, count)
        if patch is None:
            return
        meta = object_meta(pdb)
        await self.client.patch(
            PODDISRUPTIONBUDGETS, str(meta.get("name", "")), patch, namespace=str(meta.get("namespace", ""))
        )

    async def fail_safe(self, pdb: Obj, err: BaseException) -> None:
        """`failSafe`: at least make the eviction API refuse (an error here is retried by the queue)."""
        self.log.warning("failed to sync budget, failing safe", error=str(err))
        status = fail_safe_status(pdb, str(err), utcnow())
        if status is not None:
            await self.write_status(pdb, status)
