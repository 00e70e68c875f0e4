"""The eviction-responder reconcile: one Eviction read from the caches, planned, written.

Keys are Eviction keys (`<namespace>/<name>`), or `pod:<namespace>/<name>` for a pod that carries
our request with no Eviction left to justify it (its Eviction deleted while we were Active, or a
restart after that): the request is withdrawn so the surge is undone. The plan is `plan.plan`'s;
this module gathers what it reads and performs its steps in order, one write each, logging and
counting every one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from structlog.typing import FilteringBoundLogger

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS, Resource
from controllers.base import Result
from controllers.common.controller_ref import get_controller_of
from controllers.common.patches import PATCH_NOT_APPLICABLE, stale_plan_is_conflict
from controllers.common.pods import node_name, pod_key
from controllers.context import EventRecorder
from controllers.evictionresponder import marks, metrics
from controllers.evictionresponder.plan import MESSAGE_DONE, MESSAGE_GONE, Facts, Plan, Step, plan
from controllers.evictionresponder.registration import RESPONDER_NAME
from controllers.evictionresponder.state import ResponderState
from controllers.evictionresponder.status import entry_of, report_ops, target_pod
from evictionapi import names
from informers import CONTROLLER_UID_INDEX, Lister

Obj = Mapping[str, Any]

# Evictions by the uid of the pod they target (one per pod, as the API keeps it).
EVICTION_POD_UID_INDEX: Final = "evictionTargetPodUID"
# Pods with no controller, by the uids of their owners: the replacement surge's copies of a
# ReplicaSet's pods (a non-controller reference to it) until their ReplicaSet adopts them.
UNCONTROLLED_OWNER_INDEX: Final = "evictionResponderUncontrolledOwner"
POD_KEY_PREFIX: Final = "pod:"

EVENT_REQUESTED: Final = "EvictionSurgeRequested"
EVENT_COMPLETED: Final = "EvictionResponderCompleted"
EVENT_HANDED_OVER: Final = "EvictionResponderHandedOver"

# What the API server answers (422, no details) when a JSON patch's `test` fails.


def eviction_pod_uid_index(eviction: Obj) -> list[str]:
    _name, uid = target_pod(eviction)
    return [uid] if uid else []


def uncontrolled_owner_index(pod: Obj) -> list[str]:
    if get_controller_of(pod) is not None:
        return []
    refs = (pod.get("metadata") or {}).get("ownerReferences") or ()
    return [str(r.get("uid")) for r in refs if r.get("uid") and r.get("kind") == "ReplicaSet"]


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _uid(obj: Obj) -> str:
    return str(_meta(obj).get("uid") or "")


@dataclass(kw_only=True, eq=False)
class EvictionResponderSync:
    """One Eviction's turn for the surge-first responder, or one pod's leftover request."""

    client: KubeClient
    evictions: Resource
    eviction_lister: Lister
    pod_lister: Lister
    rs_lister: Lister
    d_lister: Lister
    recorder: EventRecorder
    clock: Callable[[], datetime]
    answer_timeout: float
    log: FilteringBoundLogger
    state: ResponderState

    # -- reading ------------------------------------------------------------------------------

    def _owner(self, obj: Obj, kind: str, lister: Lister) -> Obj | None:
        ref = get_controller_of(obj)
        if ref is None or ref.get("kind") != kind:
            return None
        owner = lister.get(str(ref.get("name", "")), str(_meta(obj).get("namespace", "")))
        if owner is None or _uid(owner) != ref.get("uid"):
            return None
        return owner

    def facts(self, key: str, eviction: Obj) -> Facts:
        namespace = str(_meta(eviction).get("namespace", ""))
        name, uid = target_pod(eviction)
        pod = self.pod_lister.get(name, namespace) if name else None
        if pod is None or _uid(pod) != uid:
            pod = None
            remembered = self.state.replica_sets.get(key)
            rs: Obj | None = self.rs_lister.get(remembered, namespace) if remembered else None
        else:
            rs = self._owner(pod, "ReplicaSet", self.rs_lister)
            if rs is not None:
                self.state.replica_sets[key] = str(_meta(rs).get("name", ""))
        if rs is None:
            return Facts(eviction, pod)
        d = self._owner(rs, "Deployment", self.d_lister)
        replica_sets = self.rs_lister.by_index(CONTROLLER_UID_INDEX, _uid(d)) if d is not None else [rs]
        found: dict[str, Obj] = {}
        for owned in replica_sets:
            for p in self.pod_lister.by_index(CONTROLLER_UID_INDEX, _uid(owned)):
                found[_uid(p)] = p
            for p in self.pod_lister.by_index(UNCONTROLLED_OWNER_INDEX, _uid(owned)):
                found[_uid(p)] = p
        return Facts(eviction, pod, rs, d, list(found.values()))

    # -- the reconcile ------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        if key.startswith(POD_KEY_PREFIX):
            await self._orphan(key.removeprefix(POD_KEY_PREFIX))
            return None
        eviction = self.eviction_lister.get_by_key(key)
        if eviction is None or self.state.evictions.superseded(key, eviction):
            return None  # gone, or our write is not in the cache yet: its event wakes us
        facts = self.facts(key, eviction)
        if facts.pod is not None and self.state.pods.superseded(pod_key(facts.pod), facts.pod):
            return None
        outcome = plan(facts, now=self.clock(), answer_timeout=self.answer_timeout)
        for step in outcome.steps:
            await self._do(key, eviction, facts, outcome, step)
        if outcome.requeue_after is None:
            return None
        return Result(requeue_after=outcome.requeue_after)

    async def _do(self, key: str, eviction: Obj, facts: Facts, outcome: Plan, step: Step) -> None:
        pod = facts.pod
        pod_name, _ = target_pod(eviction)
        fields = {"key": key, "pod": pod_name, "step": step.value}
        try:
            if step is Step.MARK and pod is not None:
                await self._mark(key, pod)
                self.log.info("evacuation requested for the eviction", **fields, node=node_name(pod))
                self.recorder.event(
                    pod, "Normal", EVENT_REQUESTED,
                    f"Eviction {_meta(eviction).get('name')}: asked for a replacement to surge before this pod goes",
                )  # fmt: skip
            elif step is Step.WITHDRAW and pod is not None:
                if not await self._withdraw(pod):
                    return
                self.log.info("evacuation request withdrawn", **fields)
            elif step is Step.REPORT:
                await self._report(key, eviction, outcome.message, heartbeat=True)
                self.log.info("progress reported", **fields, message=outcome.message)
            elif step is Step.COMPLETE:
                await self._report(key, eviction, outcome.message, heartbeat=True, complete=True)
                outcome_label = (
                    "replaced"
                    if outcome.message.startswith(MESSAGE_DONE)
                    else "removed"
                    if outcome.message.startswith(MESSAGE_GONE)
                    else "handed-over"
                )
                metrics.COMPLETIONS.labels(outcome=outcome_label).inc()
                self.log.info("responder completed", **fields, outcome=outcome_label, message=outcome.message)
                self.recorder.event(
                    eviction,
                    "Normal" if outcome_label != "handed-over" else "Warning",
                    EVENT_COMPLETED if outcome_label != "handed-over" else EVENT_HANDED_OVER,
                    outcome.message,
                )
            elif step is Step.FINAL_MESSAGE:
                if not await self._final_message(key, eviction, outcome.message):
                    return
                self.log.info("canceled eviction answered", **fields, message=outcome.message)
            else:
                return
        except ApiError as exc:
            if exc.not_found:
                self.log.info("object gone before the write", **fields)
                return
            raise
        metrics.ACTIONS.labels(action=step.value).inc()

    # -- writes -------------------------------------------------------------------------------

    async def _patch_pod(self, pod: Obj, ops: list[dict[str, Any]]) -> None:
        namespace, name = str(_meta(pod).get("namespace", "")), str(_meta(pod).get("name", ""))
        with stale_plan_is_conflict():
            after = await self.client.patch(
                PODS, name, ops, namespace=namespace, subresource="status", patch_type="json"
            )
        self.state.pods.wrote(pod_key(pod), pod, after)

    async def _mark(self, key: str, pod: Obj) -> None:
        _namespace, _, eviction_name = key.partition("/")
        await self._patch_pod(pod, marks.request_ops(pod, eviction_name=eviction_name, now=self.clock()))

    async def _withdraw(self, pod: Obj) -> bool:
        ops = marks.withdraw_ops(pod)
        if ops is None:
            return False
        await self._patch_pod(pod, ops)
        return True

    async def _report(
        self, key: str, eviction: Obj, message: str, *, heartbeat: bool, complete: bool = False
    ) -> None:
        entry = entry_of(eviction, RESPONDER_NAME)
        if entry is None:
            return
        ops = report_ops(
            entry, RESPONDER_NAME, message=message, now=self.clock(), heartbeat=heartbeat, complete=complete
        )
        namespace, name = str(_meta(eviction).get("namespace", "")), str(_meta(eviction).get("name", ""))
        with stale_plan_is_conflict():
            after = await self.client.patch(
                self.evictions, name, ops, namespace=namespace, subresource="status", patch_type="json"
            )
        self.state.evictions.wrote(key, eviction, after)

    async def _final_message(self, key: str, eviction: Obj, message: str) -> bool:
        """The last word on a canceled Eviction. Upstream's API lets only an Active responder
        change its status, so a server that refuses it is answered by the withdrawal alone."""
        try:
            await self._report(key, eviction, message, heartbeat=False)
        except ApiError as exc:
            if exc.invalid and not exc.message.startswith(PATCH_NOT_APPLICABLE):
                self.log.info("final message refused by the server", key=key, why=exc.message)
                return False
            raise
        return True

    async def _orphan(self, pod_ref: str) -> None:
        """Withdraw our request from a pod no Eviction we work on targets any more."""
        pod = self.pod_lister.get_by_key(pod_ref)
        if pod is None or not marks.requested_by_us(pod) or self.state.pods.superseded(pod_ref, pod):
            return
        for eviction in self.eviction_lister.by_index(EVICTION_POD_UID_INDEX, _uid(pod)):
            entry = entry_of(eviction, RESPONDER_NAME)
            if entry is not None and entry.state == names.STATE_ACTIVE and not entry.completed:
                return  # still ours to hold; that Eviction's own sync follows it
        if not await self._withdraw(pod):
            return
        metrics.ACTIONS.labels(action="withdraw").inc()
        self.log.info("evacuation request withdrawn: no Eviction asks for it any more", key=pod_ref)
