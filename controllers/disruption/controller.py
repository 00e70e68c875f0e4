"""The disruption controller: KCM's `disruption` controller (`pkg/controller/disruption`).

Wiring, as KCM's:

- informers for PodDisruptionBudgets, Pods, ReplicationControllers, ReplicaSets, Deployments and
  StatefulSets (the last four are read through listers to find the scale of the pods' controllers);
- a budget's add/update/delete queues the budget; a pod's add/update/delete queues every budget in
  its namespace whose selector matches it (both the old and the new labels on an update, so a pod
  relabelled out of a budget is uncounted at once); a scale change of a workload queues the budgets
  selecting its pods (KCM leaves that to the next pod event);
- `sync` computes `budget.compute_budget` and writes the status through the `status` subresource
  only when it changed. The write is a PUT guarded by the budget's `resourceVersion` (KCM's
  `UpdateStatus`): the eviction API decrements `disruptionsAllowed` on the same object, and a
  stale status must never overwrite an eviction (a 409 is requeued, never fail-safed);
- any other failure (invalid selector, unresolvable controller, bad percentage) fails safe:
  `disruptionsAllowed: 0` with `DisruptionAllowed=False/SyncFailed`, other fields kept;
- a budget with `disruptedPods` entries is looked at again when the earliest one expires;
- a second queue of pod keys resets a stale `DisruptionTarget=True` (not the kubelet's, on a pod
  that is neither terminating nor terminal) to False after 2 minutes (`stalePodDisruptionTimeout`);
- with the `DeclarativeNodeMaintenance` gate, evacuating pods (`EvacuationInitiated=True`) are not
  healthy for the budget, and their number is published as the annotation
  `maintenance.aiokcm.io/evacuating-pods` (a metadata merge patch; status carries built-ins only).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from anyio.abc import TaskGroup

from apiclient import ApiError
from apiclient.resources import (
    DEPLOYMENTS,
    PODDISRUPTIONBUDGETS,
    PODS,
    REPLICASETS,
    REPLICATIONCONTROLLERS,
    STATEFULSETS,
)
from controllers import features
from controllers.base import Controller
from controllers.common.evacuation import (
    EVACUATING_PODS_ANNOTATION,
    count_annotation_patch,
)
from controllers.common.pods import get_pod_condition, is_pod_terminal, is_terminating
from controllers.context import ControllerContext
from controllers.disruption.budget import (
    Budget,
    BudgetError,
    compute_budget,
    fail_safe_status,
    new_status,
)
from controllers.disruption.finders import ControllerFinder, ScaleReader
from informers import (
    CONTROLLER_UID_INDEX,
    DeletedFinalStateUnknown,
    ResourceEventHandler,
    meta_key,
    split_key,
)
from kubeutil.conditions import pod_condition_patch
from kubeutil.selectors import Selector, SelectorError, from_label_selector
from kubeutil.timestamps import format_time, parse_time, utcnow
from workqueue import RateLimitingQueue

Obj = dict[str, Any]

#: `stalePodDisruptionTimeout`.
STALE_POD_DISRUPTION_TIMEOUT = timedelta(minutes=2)
DISRUPTION_TARGET = "DisruptionTarget"
#: `v1.PodReasonTerminationByKubelet`: the kubelet's DisruptionTarget is never stale.
REASON_TERMINATION_BY_KUBELET = "TerminationByKubelet"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _unwrap(obj: Obj | DeletedFinalStateUnknown) -> Mapping[str, Any] | None:
    inner = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
    return inner if isinstance(inner, Mapping) else None


def stale_disruption_wait(pod: Mapping[str, Any], now: datetime) -> float | None:
    """`nonTerminatingPodHasStaleDisruptionCondition`: seconds until the condition is stale, or None.

    None when there is nothing to clean: no `DisruptionTarget=True`, the kubelet's own condition,
    a terminating pod (the disruption is happening) or a terminal one (no needless writes).
    """
    if is_terminating(pod):
        return None
    cond = get_pod_condition(pod, DISRUPTION_TARGET)
    if cond is None or cond.get("status") != "True" or cond.get("reason") == REASON_TERMINATION_BY_KUBELET:
        return None
    if is_pod_terminal(pod):
        return None
    since = parse_time(cond.get("lastTransitionTime"))
    if since is None:
        return 0.0
    return max(0.0, (since + STALE_POD_DISRUPTION_TIMEOUT - now).total_seconds())


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
        self.stale_queue: RateLimitingQueue[str] = RateLimitingQueue(name="stale_pod_disruption")
        self.stale_worker = self.make_worker(self.sync_stale_pod_disruption)
        self._selectors: dict[str, tuple[Any, Selector | None]] = {}
        self.pdb_informer.add_event_handler(
            ResourceEventHandler(on_add=self.add_pdb, on_update=self.update_pdb, on_delete=self.delete_pdb)
        )
        self.pod_informer.add_event_handler(
            ResourceEventHandler(on_add=self.add_pod, on_update=self.update_pod, on_delete=self.delete_pod)
        )
        for informer in (self.rc_informer, self.rs_informer, self.ss_informer):
            informer.add_event_handler(ResourceEventHandler(on_update=self.update_workload))
        self.deployment_informer.add_event_handler(ResourceEventHandler(on_update=self.update_deployment))

    @property
    def evacuation(self) -> bool:
        return self.ctx.gates.enabled(features.DECLARATIVE_NODE_MAINTENANCE)

    # -- budgets ---------------------------------------------------------------------------

    def add_pdb(self, pdb: Obj) -> None:
        self.enqueue(meta_key(pdb))

    def update_pdb(self, old: Obj, cur: Obj) -> None:
        self.enqueue(meta_key(cur))

    def delete_pdb(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pdb = _unwrap(obj)
        if pdb is None:
            return
        self._selectors.pop(str(_meta(pdb).get("uid", "")), None)
        self.enqueue(meta_key(pdb))

    def selector_of(self, pdb: Mapping[str, Any]) -> Selector:
        """The budget's selector, parsed once per generation; raises `SelectorError` when invalid."""
        meta = _meta(pdb)
        uid, generation = str(meta.get("uid", "")), meta.get("generation")
        cached = self._selectors.get(uid)
        if cached is not None and cached[0] == generation and cached[1] is not None:
            return cached[1]
        try:
            selector = from_label_selector((pdb.get("spec") or {}).get("selector"))
        except SelectorError:
            self._selectors[uid] = (generation, None)
            raise
        self._selectors[uid] = (generation, selector)
        return selector

    def pdbs_for_pod(self, pod: Mapping[str, Any]) -> list[Obj]:
        """`GetPodPodDisruptionBudgets`: budgets in the pod's namespace whose valid selector matches it."""
        labels = _meta(pod).get("labels") or {}
        out: list[Obj] = []
        for pdb in self.pdb_lister.list(str(_meta(pod).get("namespace", ""))):
            try:
                selector = self.selector_of(pdb)
            except SelectorError:
                continue
            if selector.matches(labels):
                out.append(pdb)
        return out

    def _enqueue_pdbs_for(self, pod: Mapping[str, Any]) -> None:
        pdbs = self.pdbs_for_pod(pod)
        if len(pdbs) > 1:
            names = sorted(str(_meta(p).get("name", "")) for p in pdbs)
            meta = _meta(pod)
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
        if (_meta(old).get("labels") or {}) != (_meta(cur).get("labels") or {}):
            self._enqueue_pdbs_for(old)
        self._check_stale(cur)

    def delete_pod(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = _unwrap(obj)
        if pod is not None:
            self._enqueue_pdbs_for(pod)

    # -- workloads -----------------------------------------------------------------------------

    def update_workload(self, old: Obj, cur: Obj) -> None:
        """A scale change re-counts the budgets over the workload's pods."""
        if (old.get("spec") or {}).get("replicas") != (cur.get("spec") or {}).get("replicas"):
            self._enqueue_pdbs_of_owners([str(_meta(cur).get("uid", ""))])

    def update_deployment(self, old: Obj, cur: Obj) -> None:
        """A Deployment's scale change re-counts the budgets over its ReplicaSets' pods."""
        if (old.get("spec") or {}).get("replicas") == (cur.get("spec") or {}).get("replicas"):
            return
        uid = str(_meta(cur).get("uid", ""))
        replicasets = self.rs_informer.lister.by_index(CONTROLLER_UID_INDEX, uid)
        self._enqueue_pdbs_of_owners([str(_meta(rs).get("uid", "")) for rs in replicasets])

    def _enqueue_pdbs_of_owners(self, owners: list[str]) -> None:
        seen: set[str] = set()
        for owner in owners:
            for pod in self.pod_lister.by_index(CONTROLLER_UID_INDEX, owner):
                for pdb in self.pdbs_for_pod(pod):
                    key = meta_key(pdb)
                    if key not in seen:
                        seen.add(key)
                        self.enqueue(key)

    # -- the reconcile -------------------------------------------------------------------------

    def pods_for_pdb(self, pdb: Mapping[str, Any]) -> list[Obj]:
        """`getPodsForPdb`; raises `SelectorError` for an invalid selector."""
        selector = self.selector_of(pdb)
        return self.pod_lister.list(str(_meta(pdb).get("namespace", "")), selector=selector)

    async def sync(self, key: str) -> None:
        namespace, name = split_key(key)
        pdb = self.pdb_lister.get(name, namespace)
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
            self.queue.add_after(key, max(0.0, (budget.recheck_at - now).total_seconds()))

    async def try_sync(self, pdb: Obj) -> tuple[Mapping[str, Any], Budget, datetime]:
        """`trySync`: compute and write the status; returns the budget as written, its numbers and "now"."""
        now = utcnow()
        try:
            pods = self.pods_for_pdb(pdb)
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
                f"Pod was expected by PDB {_meta(pdb).get('namespace', '')}/{_meta(pdb).get('name', '')} "
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
        meta = _meta(pdb)
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
        meta = _meta(pdb)
        await self.client.patch(
            PODDISRUPTIONBUDGETS, str(meta.get("name", "")), patch, namespace=str(meta.get("namespace", ""))
        )

    async def fail_safe(self, pdb: Obj, err: BaseException) -> None:
        """`failSafe`: at least make the eviction API refuse (an error here is retried by the queue)."""
        self.log.warning("failed to sync budget, failing safe", error=str(err))
        status = fail_safe_status(pdb, str(err), utcnow())
        if status is not None:
            await self.write_status(pdb, status)

    # -- the stale DisruptionTarget worker ---------------------------------------------------------

    async def sync_stale_pod_disruption(self, key: str) -> None:
        """`syncStalePodDisruption`: reset a stale `DisruptionTarget=True` to False (or look again later)."""
        namespace, name = split_key(key)
        pod = self.pod_lister.get(name, namespace)
        if pod is None:
            return
        now = utcnow()
        wait = stale_disruption_wait(pod, now)
        if wait is None:
            return
        if wait > 0:
            self.stale_queue.add_after(key, wait)
            return
        old = get_pod_condition(pod, DISRUPTION_TARGET) or {}
        cond: dict[str, Any] = {
            "type": DISRUPTION_TARGET,
            "status": "False",
            "lastTransitionTime": format_time(now),
        }
        # UpdatePodCondition replaces the whole condition: clear the old reason and message too.
        for field_name in ("reason", "message"):
            if old.get(field_name):
                cond[field_name] = None
        uid = _meta(pod).get("uid")
        await self.client.patch(
            PODS,
            name,
            pod_condition_patch(cond, uid=str(uid) if uid else None),
            namespace=namespace,
            subresource="status",
            patch_type="strategic",
        )
        self.log.info("reset stale DisruptionTarget condition to False", pod=key)

    def start_workers(self, tg: TaskGroup, workers: int) -> None:
        """The budget workers (the base class's) plus one stale-pod worker."""
        super().start_workers(tg, workers)
        tg.start_soon(self.stale_worker.run, self.stale_queue)

    def stop(self) -> None:
        super().stop()
        self.stale_queue.shutdown()
