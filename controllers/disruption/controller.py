"""The disruption controller: KCM's `disruption` controller (`pkg/controller/disruption`).

Wiring, as KCM's:

- informers for PodDisruptionBudgets, Pods, ReplicationControllers, ReplicaSets, Deployments and
  StatefulSets (the last four are read through listers to find the scale of the pods' controllers);
- a budget's add/update/delete queues the budget; a pod's add/update/delete queues every budget in
  its namespace whose selector matches it (both the old and the new labels on an update, so a pod
  relabelled out of a budget is uncounted at once); a scale change of a workload queues the budgets
  selecting its pods (KCM leaves that to the next pod event);
- the budget queue is reconciled by `budgetsync.BudgetSync` (status, fail-safe, rechecks);
- a second queue of pod keys, fed by pod adds and updates carrying a `DisruptionTarget` that may
  go stale, is reconciled by `stalepodsync.StalePodDisruptionSync`;
- with the `DeclarativeNodeMaintenance` gate, evacuating pods (`EvacuationInitiated=True`) are not
  healthy for the budget, and their number is published as the annotation
  `maintenance.aiokcm.io/evacuating-pods` (a metadata merge patch; status carries built-ins only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiclient.resources import (
    DEPLOYMENTS,
    PODDISRUPTIONBUDGETS,
    PODS,
    REPLICASETS,
    REPLICATIONCONTROLLERS,
    STATEFULSETS,
)
from controllers.base import Controller
from controllers.context import ControllerContext
from controllers.disruption.budgetsync import BudgetSync
from controllers.disruption.finders import ControllerFinder, ScaleReader
from controllers.disruption.selectors import BudgetSelectors
from controllers.disruption.stalepodsync import StalePodDisruptionSync, stale_disruption_wait
from informers import (
    CONTROLLER_UID_INDEX,
    DeletedFinalStateUnknown,
    ResourceEventHandler,
    deleted_object,
    meta_key,
)
from kubeutil.meta import object_meta
from kubeutil.timestamps import utcnow
from workqueue import RateLimitingQueue

Obj = dict[str, Any]


class DisruptionController(Controller):
    """KCM's `disruption` controller (alias `disruption-controller`), one worker by default."""

    def __init__(self, ctx: ControllerContext, *, name: str, workers: int) -> None:
        super().__init__(ctx, name=name, workers=workers)
        factory = ctx.informers
        self.pdb_informer = factory.informer(PODDISRUPTIONBUDGETS)
        self.pod_informer = factory.informer(PODS)
        self.rc_informer = factory.informer(REPLICATIONCONTROLLERS)
        self.rs_informer = factory.informer(REPLICASETS)
        self.deployment_informer = factory.informer(DEPLOYMENTS)
        self.ss_informer = factory.informer(STATEFULSETS)
        self.pdb_lister = self.pdb_informer.lister
        self.pod_lister = self.pod_informer.lister
        self.finder = ControllerFinder(
            rcs=self.rc_informer.lister,
            replicasets=self.rs_informer.lister,
            deployments=self.deployment_informer.lister,
            statefulsets=self.ss_informer.lister,
            scale=ScaleReader(ctx.client),
        )
        self.selectors = BudgetSelectors(self.pdb_lister, self.pod_lister)
        self.syncer = BudgetSync(
            client=ctx.client,
            pdb_lister=self.pdb_lister,
            selectors=self.selectors,
            finder=self.finder,
            recorder=self.recorder,
            gates=ctx.gates,
            recheck=self.queue.add_after,
            log=self.log,
        )
        self.stale_queue: RateLimitingQueue[str] = RateLimitingQueue(name="stale_pod_disruption")
        self.stale_syncer = StalePodDisruptionSync(
            client=ctx.client, pod_lister=self.pod_lister, recheck=self.stale_queue.add_after, log=self.log
        )
        self.stale_worker = self.make_worker(self.stale_syncer.sync)
        self.serve_also(self.stale_queue, self.stale_worker)  # one stale-pod worker beside the budget's
        self.pdb_informer.add_event_handler(
            ResourceEventHandler(on_add=self.add_pdb, on_update=self.update_pdb, on_delete=self.delete_pdb)
        )
        self.pod_informer.add_event_handler(
            ResourceEventHandler(on_add=self.add_pod, on_update=self.update_pod, on_delete=self.delete_pod)
        )
        for informer in (self.rc_informer, self.rs_informer, self.ss_informer):
            informer.add_event_handler(ResourceEventHandler(on_update=self.update_workload))
        self.deployment_informer.add_event_handler(ResourceEventHandler(on_update=self.update_deployment))

    # -- budgets ---------------------------------------------------------------------------

    def add_pdb(self, pdb: Obj) -> None:
        self.enqueue(meta_key(pdb))

    def update_pdb(self, old: Obj, cur: Obj) -> None:
        self.enqueue(meta_key(cur))

    def delete_pdb(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pdb = deleted_object(obj)
        if pdb is None:
            return
        self.selectors.forget(pdb)
        self.enqueue(meta_key(pdb))

    def _enqueue_pdbs_for(self, pod: Mapping[str, Any]) -> None:
        pdbs = self.selectors.pdbs_for_pod(pod)
        if len(pdbs) > 1:
            names = sorted(str(object_meta(p).get("name", "")) for p in pdbs)
            meta = object_meta(pod)
            self.recorder.event(
                pod,
                "Warning",
                "MultiplePodDisruptionBudgets",
                f"Pod {meta.get('namespace', '')!r}/{meta.get('name', '')!r} matches multiple "
                f"PodDisruptionBudgets: {', '.join(names)}.",
            )
        for pdb in pdbs:
            self.enqueue(meta_key(pdb))

    # -- pods --------------------------------------------------------------------------------

    def _check_stale(self, pod: Mapping[str, Any]) -> None:
        wait = stale_disruption_wait(pod, utcnow())
        if wait is not None:
            self.stale_queue.add_after(meta_key(pod), wait)

    def add_pod(self, pod: Obj) -> None:
        self._enqueue_pdbs_for(pod)
        self._check_stale(pod)

    def update_pod(self, old: Obj, cur: Obj) -> None:
        self._enqueue_pdbs_for(cur)
        if (object_meta(old).get("labels") or {}) != (object_meta(cur).get("labels") or {}):
            self._enqueue_pdbs_for(old)
        self._check_stale(cur)

    def delete_pod(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = deleted_object(obj)
        if pod is not None:
            self._enqueue_pdbs_for(pod)

    # -- workloads -----------------------------------------------------------------------------

    def update_workload(self, old: Obj, cur: Obj) -> None:
        """A scale change re-counts the budgets over the workload's pods."""
        if (old.get("spec") or {}).get("replicas") != (cur.get("spec") or {}).get("replicas"):
            self._enqueue_pdbs_of_owners([str(object_meta(cur).get("uid", ""))])

    def update_deployment(self, old: Obj, cur: Obj) -> None:
        """A Deployment's scale change re-counts the budgets over its ReplicaSets' pods."""
        if (old.get("spec") or {}).get("replicas") == (cur.get("spec") or {}).get("replicas"):
            return
        uid = str(object_meta(cur).get("uid", ""))
        replicasets = self.rs_informer.lister.by_index(CONTROLLER_UID_INDEX, uid)
        self._enqueue_pdbs_of_owners([str(object_meta(rs).get("uid", "")) for rs in replicasets])

    def _enqueue_pdbs_of_owners(self, owners: list[str]) -> None:
        seen: set[str] = set()
        for owner in owners:
            for pod in self.pod_lister.by_index(CONTROLLER_UID_INDEX, owner):
                for pdb in self.selectors.pdbs_for_pod(pod):
                    key = meta_key(pdb)
                    if key not in seen:
                        seen.add(key)
                        self.enqueue(key)

    # -- work ----------------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        await self.syncer.sync(key)
