"""The replacement-surge reconcile: one surge account read from the caches, planned, written.

Keys name the account: `deployment:<namespace>/<name>` or `replicaset:<namespace>/<name>` (a
ReplicaSet with no Deployment). The plan is `plan.plan`'s; this module only gathers what it
reads and performs its steps in order, one write each, logging and counting every one. A step
that finds its object gone is skipped (the next sync plans from what is left); a failed
precondition (a pod recreated under the same name) fails the sync, which is retried.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from structlog.typing import FilteringBoundLogger

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS
from controllers.base import Result
from controllers.common.controller_ref import get_controller_of
from controllers.common.deploymentstrategy import replicas
from controllers.common.evacuation import (
    EVACUATION_INITIATED,
    REASON_NODE_MAINTENANCE,
    evacuation_initiated_patch,
)
from controllers.common.expectations import EXPECTATIONS_TIMEOUT
from controllers.common.pods import node_name, pod_key
from controllers.context import EventRecorder
from controllers.replacementsurge import copies, metrics
from controllers.replacementsurge.plan import (
    Account,
    Action,
    Step,
    is_deleting,
    plan,
    surge_limit_of_deployment,
)
from controllers.replacementsurge.state import SurgeState
from informers import CONTROLLER_UID_INDEX, Lister
from kubeutil.conditions import new_condition, pod_condition_patch

Obj = Mapping[str, Any]

# Pods indexed by the UIDs of the owners of copies (non-controller references), to find an
# account's copies without walking its namespace.
COPY_OWNER_INDEX = "replacementCopyOwner"
# A ReplicaSet with no Deployment surges one pod at a time: it has no maxSurge of its own.
BARE_REPLICASET_SURGE = 1

EVENT_GAVE_UP = "ReplacementSurgeGaveUp"
EVENT_FAILED_CREATE = "FailedCreateReplacement"


def copy_owner_index(pod: Obj) -> list[str]:
    """The owner UIDs of a copy, or of one handed over that its ReplicaSet has not adopted yet (no
    controller reference: it is in no ReplicaSet's pods, so only this index finds it); nothing for
    any other pod."""
    handed_over = bool(copies.replaced(pod)[0]) and get_controller_of(pod) is None
    if not copies.replaces(pod) and not handed_over:
        return []
    return [
        str(r.get("uid")) for r in (pod.get("metadata") or {}).get("ownerReferences") or () if r.get("uid")
    ]


def account_key(kind: str, namespace: str, name: str) -> str:
    return f"{kind.lower()}:{namespace}/{name}"


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _min_ready(obj: Obj) -> int:
    try:
        return max(0, int((obj.get("spec") or {}).get("minReadySeconds") or 0))
    except (TypeError, ValueError):
        return 0


@dataclass(kw_only=True, eq=False)
class ReplacementSurgeSync:
    """One account's departing pods replaced through KCM's own ReplicaSet controller."""

    client: KubeClient
    pod_lister: Lister
    rs_lister: Lister
    d_lister: Lister
    recorder: EventRecorder
    clock: Callable[[], datetime]
    surge_timeout: float
    log: FilteringBoundLogger
    state: SurgeState

    def account(self, key: str) -> Account | None:
        kind, _, rest = key.partition(":")
        namespace, _, name = rest.partition("/")
        if kind == "deployment":
            d = self.d_lister.get(name, namespace)
            if d is None:
                return None
            replica_sets = self.rs_lister.by_index(CONTROLLER_UID_INDEX, copies.uid(d))
            limit = 0 if is_deleting(d) else surge_limit_of_deployment(d)
            return self._account(d, replica_sets, replicas(d), limit, _min_ready(d))
        rs = self.rs_lister.get(name, namespace)
        if rs is None or get_controller_of(rs) is not None:
            return None  # a Deployment's ReplicaSet is in its Deployment's account
        limit = 0 if is_deleting(rs) else BARE_REPLICASET_SURGE
        spec_replicas = (rs.get("spec") or {}).get("replicas")
        desired = 1 if spec_replicas is None else int(spec_replicas)
        return self._account(rs, [rs], desired, limit, _min_ready(rs))

    def _account(
        self, owner: Obj, replica_sets: Sequence[Obj], desired: int, limit: int, min_ready: int
    ) -> Account:
        pods: list[Obj] = []
        found: dict[str, Obj] = {}
        for rs in replica_sets:
            pods.extend(self.pod_lister.by_index(CONTROLLER_UID_INDEX, copies.uid(rs)))
            for copy in self.pod_lister.by_index(COPY_OWNER_INDEX, copies.uid(rs)):
                found[copies.uid(copy)] = copy
        return Account(owner, replica_sets, pods, list(found.values()), desired, limit, min_ready)

    async def sync(self, key: str) -> Result | None:
        account = self.account(key)
        if account is None:
            self.state.expectations.delete_expectations(key)
            return None
        if not self.state.expectations.satisfied_expectations(key):
            # A copy created or deleted is not in the cache yet: its event wakes us, or, should the
            # watch never show it (a relist past it), the expectations' own expiry does.
            return Result(requeue_after=EXPECTATIONS_TIMEOUT + 1.0)
        written = self.state.written
        if any(written.superseded(pod_key(p), p) for p in (*account.pods, *account.copies)):
            return None  # a pod we patched is not in the cache yet: its event wakes us
        outcome = plan(account, now=self.clock(), surge_timeout=self.surge_timeout)
        for action in outcome.actions:
            await self._do(key, account, action)
        if outcome.waiting_for_room:
            self.log.debug("departing pods wait for surge room", key=key, waiting=outcome.waiting_for_room)
        return Result(requeue_after=outcome.requeue_after) if outcome.requeue_after is not None else None

    async def _do(self, key: str, account: Account, action: Action) -> None:
        pod = action.pod
        try:
            done = await self._write(key, action)
        except ApiError as exc:
            if exc.not_found:
                self.log.info(
                    "object gone before the write", key=key, pod=pod_key(pod), step=action.step.value
                )
                return
            raise
        if done:
            metrics.ACTIONS.labels(action=action.step.value).inc()

    async def _patch(
        self, pod: Obj, patch: dict[str, Any], *, status: bool = False, strategic: bool = False
    ) -> None:
        """One patch of `pod` (its status with `status`; a strategic merge with either, else a
        JSON merge), remembered until the cache shows it."""
        namespace, name = str(_meta(pod).get("namespace", "")), str(_meta(pod).get("name", ""))
        if status:
            after = await self.client.patch(
                PODS, name, patch, namespace=namespace, subresource="status", patch_type="strategic"
            )
        elif strategic:
            after = await self.client.patch(PODS, name, patch, namespace=namespace, patch_type="strategic")
        else:
            after = await self.client.patch(PODS, name, patch, namespace=namespace)
        self.state.written.wrote(pod_key(pod), pod, after)

    async def _write(self, account_key: str, action: Action) -> bool:
        """Perform one step; False when it turned out to need no write."""
        pod, step = action.pod, action.step
        fields = {"key": pod_key(pod), "account": account_key, "node": node_name(pod)}
        if step is Step.MARK or step is Step.RESTORE:
            patch = copies.mark_patch(pod, action.cost) if step is Step.MARK else copies.restore_patch(pod)
            if patch is None:
                return False
            await self._patch(pod, patch)
            if step is Step.MARK:
                self.log.info("deletion cost lowered", **fields, cost=action.cost)
            else:
                self.log.info("deletion cost restored", **fields)
            return True
        if step is Step.ANSWER:
            return await self._answer(action, fields)
        if step is Step.GIVE_UP:
            await self._give_up(pod, action.message)
            return True
        if step is Step.CREATE:
            return await self._create(account_key, action)
        if step is Step.RELEASE:
            await self._patch(pod, copies.release_patch(pod))
            self.log.info("replacement kept by a scaled-up ReplicaSet; surging again", **fields)
            return True
        if step is Step.ADOPT:
            if action.replica_set is None:
                return False
            await self._patch(pod, copies.adopt_patch(pod, action.replica_set, self.clock()), strategic=True)
            # No event: the ReplicaSet's own `SuccessfulDelete` of the departing pod follows at
            # once and says it, and the copy keeps whom it replaced (`replaced-pod`); an event of
            # ours would be a second write per pod for what KCM already reports.
            self.log.info("replacement handed to its ReplicaSet", **fields, replaces=copies.replaces(pod))
            return True
        # DELETE_COPY
        namespace, name = str(_meta(pod).get("namespace", "")), str(_meta(pod).get("name", ""))
        self.state.expectations.expect_deletions(account_key, 1)
        try:
            await self.client.delete(PODS, name, namespace=namespace, preconditions={"uid": copies.uid(pod)})
        except BaseException:
            self.state.expectations.lower_expectations(account_key, 0, 1)
            raise
        self.log.info("replacement copy deleted", **fields, why=action.message)
        return True

    async def _answer(self, action: Action, fields: Mapping[str, Any]) -> bool:
        """`EvacuationInitiated=True`, with the pod's deletion cost in the same status write when
        the plan marks it too (the status subresource keeps annotations; the cost's guard, the
        pod's resourceVersion, holds for the whole patch)."""
        pod = action.pod
        answer = evacuation_initiated_patch(
            pod, message="replacement surging through the ReplicaSet", now=self.clock()
        )
        mark = copies.mark_patch(pod, action.cost) if action.mark else None
        if answer is None:
            # Answered by another evacuator: nothing of ours to say, the mark still goes.
            if mark is None:
                return False
            await self._patch(pod, mark)
            self.log.info("deletion cost lowered", **fields, cost=action.cost)
            return True
        if mark is not None:
            answer = {**answer, "metadata": {**(answer.get("metadata") or {}), **mark["metadata"]}}
        await self._patch(pod, answer, status=True)
        if mark is not None:
            self.log.info("answered evacuation request", **fields, cost=action.cost)
            metrics.ACTIONS.labels(action=Step.MARK.value).inc()
        else:
            self.log.info("answered evacuation request", **fields)
        return True

    async def _create(self, account_key: str, action: Action) -> bool:
        pod, rs = action.pod, action.replica_set
        if rs is None:
            return False
        namespace = str(_meta(pod).get("namespace", ""))
        held = copies.held_labels(rs)
        body = copies.copy_body(rs, pod, held) if held is not None else None
        if body is None or copies.matched_by_any(body["metadata"]["labels"], self.rs_lister.list(namespace)):
            await self._give_up(
                pod,
                f"ReplicaSet {_meta(rs).get('name')}'s selector leaves no label to hold a replacement "
                "outside it; the pod is evicted under its PodDisruptionBudget",
            )
            return True
        self.state.expectations.expect_creations(account_key, 1)
        try:
            created = await self.client.create(PODS, body, namespace=namespace)
        except BaseException as exc:
            self.state.expectations.lower_expectations(account_key, 1, 0)
            if isinstance(exc, ApiError) and exc.status in (403, 422):
                # As KCM's FailedCreate on a ReplicaSet: said on the pod that waits for it, then
                # retried with backoff until the surge timeout hands the pod back to the drain.
                message = f"Error creating a replacement: {exc.message}"
                self.recorder.event(pod, "Warning", EVENT_FAILED_CREATE, message)
                self.log.info(
                    "replacement copy refused", key=pod_key(pod), account=account_key, why=exc.message
                )
            raise
        # No event: the ReplicaSet's `SuccessfulDelete` of the departing pod, once the copy is handed
        # over, is the one KCM's own path writes for a pod replaced (the `SuccessfulCreate` of an
        # evicted pod's successor); one of ours would double the events of every drain.
        self.log.info(
            "replacement copy created",
            key=pod_key(pod),
            account=account_key,
            node=node_name(pod),
            copy=_meta(created).get("name"),
            replica_set=_meta(rs).get("name"),
        )
        return True

    async def _give_up(self, pod: Obj, message: str) -> None:
        cond = new_condition(
            EVACUATION_INITIATED, "False", reason=REASON_NODE_MAINTENANCE, message=message, now=self.clock()
        )
        await self._patch(pod, pod_condition_patch(cond, uid=copies.uid(pod) or None), status=True)
        self.log.info(
            "evacuation handed back to the drain", key=pod_key(pod), node=node_name(pod), why=message
        )
        self.recorder.event(pod, "Warning", EVENT_GAVE_UP, message)
