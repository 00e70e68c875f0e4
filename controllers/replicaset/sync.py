"""The ReplicaSet reconcile: `syncReplicaSet`, `manageReplicas` and `calculateStatus` from
`pkg/controller/replicaset`, plus answering KEP-4212 evacuation requests.

One sync, from the caches only (never from the event that queued the key):

1. claim pods: own the matching orphans, release owned pods that stopped matching;
2. if the expectations are satisfied (the cache has seen this controller's last writes) and the
   ReplicaSet is not being deleted, create or delete the difference — creates in slow-start
   batches 1, 2, 4, ... that stop at the first failing batch, at most `burst_replicas` per sync;
   deletes ranked by `ActivePodsWithRanks`, evacuation-requested pods first when the
   `DeclarativeNodeMaintenance` gate is on;
3. with the gate on, if the Deployment marked this ReplicaSet `evacuation-ready`, answer each
   request with `EvacuationInitiated=True` (all at once);
4. write the status through the status subresource, only when it changed. As KCM, it counts the
   pods the sync started from (the pods it created or deleted are counted by the next sync, once
   the cache has seen them); with the gate on it counts what this sync did as well, so a scale
   of an evacuation costs one status write, not a second one when the cache catches up, in the
   same write as the count of pods asked to evacuate; a count grown by new requests on an
   evacuation-ready ReplicaSet waits up to `COUNT_HOLD_SECONDS` for the status write the
   Deployment's surge brings, so it costs no write of its own; likewise, a status that only
   gained available replicas during an evacuation waits as long for the scale-down they allow;
5. requeue after `minReadySeconds` while ready pods wait to become available.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import anyio
import structlog

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS, REPLICASETS
from controllers import features
from controllers.base import RequeueAfter
from controllers.common.controller_ref import (
    ORPHAN_INDEX,
    ControllerRefManager,
    fresh_getter,
    get_controller_of,
    recheck_deletion_timestamp,
)
from controllers.common.evacuation import (
    REPLICAS_TO_EVACUATE_ANNOTATION,
    count_annotation_patch,
    evacuation_initiated_patch,
    has_evacuation_request,
    is_evacuation_ready,
    replicas_to_evacuate,
)
from controllers.common.expectations import UIDTrackingControllerExpectations
from controllers.common.pods import filter_active_pods, is_pod_available, is_pod_ready, pod_key
from controllers.common.podtemplate import pod_from_template
from controllers.common.ranking import pods_to_delete
from controllers.context import EventRecorder, FeatureGates
from informers import CONTROLLER_UID_INDEX, NODE_NAME_INDEX, Lister, split_key
from kubeutil.conditions import get_condition, new_condition, remove_condition, set_condition
from kubeutil.selectors import Selector, SelectorError, from_label_selector
from kubeutil.timestamps import utcnow

log = structlog.get_logger(__name__)


Obj = dict[str, Any]

BURST_REPLICAS = 500
SLOW_START_INITIAL_BATCH_SIZE = 1
REPLICA_FAILURE = "ReplicaFailure"
RS_API_VERSION = "apps/v1"
RS_KIND = "ReplicaSet"
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"
EVACUATION_MESSAGE = "ReplicaSet controller is replacing the pod"
# How long a grown evacuation count, or readiness gained during an evacuation, may wait for the
# status write the Deployment's next scale brings.
COUNT_HOLD_SECONDS = 1.0


async def _call_collecting(fn: Callable[[], Awaitable[None]], errors: list[BaseException]) -> None:
    try:
        await fn()
    except Exception as exc:  # collected: the batch's outcome decides
        errors.append(exc)


async def slow_start_batch(
    count: int, initial_batch_size: int, fn: Callable[[], Awaitable[None]]
) -> tuple[int, BaseException | None]:
    """Call `fn` `count` times in batches of 1, 2, 4, ... run concurrently; stop after a failing batch.

    Returns the number of successful calls and the first error (as `slowStartBatch`): a quota or
    webhook failure then costs one small batch of doomed requests, not `count` of them.
    """
    remaining = count
    successes = 0
    batch = min(remaining, initial_batch_size)
    while batch > 0:
        errors: list[BaseException] = []

        async with anyio.create_task_group() as tg:
            for _ in range(batch):
                tg.start_soon(_call_collecting, fn, errors)
        successes += batch - len(errors)
        if errors:
            return successes, errors[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


@dataclass(frozen=True, slots=True)
class ReplicaCounts:
    replicas: int
    fully_labeled: int
    ready: int
    available: int


def count_replicas(rs: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], now: datetime) -> ReplicaCounts:
    """The four counters of `calculateStatus` over the claimed, active pods."""
    spec = rs.get("spec") or {}
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    fully = ready = available = 0
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if all(labels.get(k) == v for k, v in template_labels.items()):
            fully += 1
        if is_pod_ready(pod):
            ready += 1
            if is_pod_available(pod, min_ready, now):
                available += 1
    return ReplicaCounts(len(pods), fully, ready, available)


def calculate_status(
    rs: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    manage_error: BaseException | None,
    now: datetime,
) -> Obj:
    """`calculateStatus`: counters plus the `ReplicaFailure` condition (set on error, cleared on success).

    `observedGeneration` is left as it was: `status_patch` sets it when writing.
    """
    status: Obj = dict(rs.get("status") or {})
    if "conditions" in status:
        status["conditions"] = list(status["conditions"] or [])
    counts = count_replicas(rs, pods, now)
    failure = get_condition(status, REPLICA_FAILURE)
    if manage_error is not None and failure is None:
        diff = len(pods) - desired_replicas(rs)
        reason = "FailedCreate" if diff < 0 else "FailedDelete" if diff > 0 else ""
        set_condition(
            status,
            new_condition(REPLICA_FAILURE, "True", reason=reason, message=error_text(manage_error), now=now),
        )
    elif manage_error is None and failure is not None:
        remove_condition(status, REPLICA_FAILURE)
    status["replicas"] = counts.replicas
    status["fullyLabeledReplicas"] = counts.fully_labeled
    status["readyReplicas"] = counts.ready
    status["availableReplicas"] = counts.available
    return status


_COUNTERS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")


def status_patch(rs: Mapping[str, Any], new_status: Mapping[str, Any]) -> Obj | None:
    """A merge patch for the status subresource, or None when nothing changed (`updateReplicaSetStatus`)."""
    old = rs.get("status") or {}
    generation = int((rs.get("metadata") or {}).get("generation") or 0)
    same = (
        all(int(old.get(k) or 0) == int(new_status.get(k) or 0) for k in _COUNTERS)
        and int(old.get("observedGeneration") or 0) == generation
        and (old.get("conditions") or []) == (new_status.get("conditions") or [])
    )
    if same:
        return None
    body: Obj = {k: int(new_status.get(k) or 0) for k in _COUNTERS}
    body["observedGeneration"] = generation
    body["conditions"] = list(new_status.get("conditions") or []) or None
    return {"status": body}


def with_evacuation_count(
    patch: Obj | None, rs: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> Obj | None:
    """`patch` plus the published count of pods asked to evacuate, when that count changed."""
    requested = sum(1 for p in pods if has_evacuation_request(p))
    count = count_annotation_patch(rs, REPLICAS_TO_EVACUATE_ANNOTATION, requested)
    if count is None:
        return patch
    return {**(patch or {}), "metadata": count["metadata"]}


def desired_replicas(rs: Mapping[str, Any]) -> int:
    replicas = (rs.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def choose_pods_to_delete(
    pods: Sequence[Obj],
    related: Sequence[Obj],
    count: int,
    now: datetime,
    *,
    evacuation_first: bool,
    pod_deletion_cost: bool = True,
    logarithmic_scale_down: bool = True,
) -> list[Obj]:
    """`getPodsToDelete`, with pods asked to evacuate (KEP-4212) ahead of the whole ranking."""

    def ranked(candidates: Sequence[Obj], n: int) -> list[Obj]:
        return pods_to_delete(
            candidates,
            related,
            n,
            now,
            pod_deletion_cost=pod_deletion_cost,
            logarithmic_scale_down=logarithmic_scale_down,
        )

    if not evacuation_first:
        return ranked(pods, count)
    requested = [p for p in pods if has_evacuation_request(p)]
    if not requested:
        return ranked(pods, count)
    if count <= len(requested):
        return ranked(requested, count)
    rest = [p for p in pods if not has_evacuation_request(p)]
    return requested + ranked(rest, count - len(requested))


def error_text(exc: BaseException) -> str:
    """What Go's `err.Error()` says: an API refusal is its Status message."""
    return exc.message if isinstance(exc, ApiError) else str(exc)


def _delete_failed(exc: BaseException) -> BaseException:
    """`DeletePod`'s error, "unable to delete pods: ..." (an API refusal stays an `ApiError`)."""
    if not isinstance(exc, ApiError):
        return exc
    body = {**exc.body, "message": f"unable to delete pods: {exc.message}"}
    wrapped = ApiError(exc.status, body, method=exc.method, path=exc.path)
    wrapped.__cause__ = exc
    return wrapped


def _namespace_terminating(exc: BaseException) -> bool:
    if not isinstance(exc, ApiError):
        return False
    causes = exc.details.get("causes") or []
    # A StatusCause's type travels under the JSON key "reason" (metav1.StatusCause.Type).
    return any(isinstance(c, dict) and c.get("reason") == NAMESPACE_TERMINATING_CAUSE for c in causes)


@dataclass
class _PodChanges:
    """The pods one sync created and deleted."""

    created: list[Obj] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)

    def applied_to(self, pods: list[Obj]) -> list[Obj]:
        if not self.created and not self.deleted:
            return pods
        return [p for p in pods if pod_key(p) not in self.deleted] + self.created


@dataclass(kw_only=True, eq=False)
class ReplicaSetSync:
    """Everything one sync needs, held once per controller; `sync(key)` is the reconcile."""

    client: KubeClient
    rs_lister: Lister
    pod_lister: Lister
    expectations: UIDTrackingControllerExpectations
    recorder: EventRecorder
    gates: FeatureGates
    burst_replicas: int = BURST_REPLICAS
    clock: Callable[[], datetime] = utcnow
    # key -> until when a grown evacuation count may wait for the status write the surge brings
    _held: dict[str, datetime] = field(default_factory=dict, init=False)

    @property
    def evacuation_enabled(self) -> bool:
        return self.gates.enabled(features.DECLARATIVE_NODE_MAINTENANCE)

    async def sync(self, key: str) -> None:
        namespace, name = split_key(key)
        rs = self.rs_lister.get(name, namespace)
        if rs is None:
            self.expectations.delete_expectations(key)
            self._held.pop(key, None)
            return
        needs_sync = self.expectations.satisfied_expectations(key)
        try:
            selector = from_label_selector((rs.get("spec") or {}).get("selector"))
        except SelectorError as exc:
            log.error("invalid selector, not syncing", error=str(exc))
            return
        pods = await self.claim_pods(rs, selector, self.candidate_pods(rs))
        manage_error: BaseException | None = None
        after = pods  # the pods once this sync's creates and deletes are counted
        if needs_sync and not (rs.get("metadata") or {}).get("deletionTimestamp"):
            changes = _PodChanges()
            try:
                await self.manage_replicas(key, rs, pods, changes)
            except Exception as exc:  # recorded in the status, raised after it is written
                manage_error = exc
            after = changes.applied_to(pods)
        evacuating = self.evacuation_enabled
        if evacuating:
            # With evacuations, the status counts what this sync did (created pods in, deleted
            # ones out), so a scale is one status write rather than one now and another when the
            # cache catches up; the evacuation count rides in the same write. Without, as KCM's
            # `calculateStatus(rs, filteredPods, ...)`: the pods the sync started from.
            pods = after
        evacuation_error = await self.handle_evacuation(rs, pods) if evacuating else None
        now = self.clock()
        new_status = calculate_status(rs, pods, manage_error, now)
        patch = status_patch(rs, new_status)
        held = False
        if evacuating:
            if patch is None:
                held = self._hold_count(key, rs, pods, now)
            else:
                held = manage_error is None and self._hold_readiness(key, rs, pods, patch, now)
            if held:
                patch = None
            else:
                self._held.pop(key, None)
                patch = with_evacuation_count(patch, rs, pods)
        if patch is not None:
            # One write per sync: the status and the evacuation count (an annotation, which a
            # ReplicaSet's /status accepts) together.
            await self.client.patch(REPLICASETS, name, patch, namespace=namespace, subresource="status")
        if manage_error is not None:
            raise manage_error
        if evacuation_error is not None:
            raise evacuation_error
        if held:
            raise RequeueAfter(COUNT_HOLD_SECONDS)
        min_ready = int((rs.get("spec") or {}).get("minReadySeconds") or 0)
        desired = desired_replicas(rs)
        if (
            min_ready > 0
            and new_status["readyReplicas"] == desired
            and new_status["availableReplicas"] != desired
        ):
            raise RequeueAfter(float(min_ready))

    def _hold_count(self, key: str, rs: Obj, pods: Sequence[Obj], now: datetime) -> bool:
        """Whether a grown evacuation count, alone in this sync's status, may wait a little.

        New requests on an evacuation-ready ReplicaSet make its Deployment surge, and the status
        write that follows (one more replica) carries the count: one write instead of two. It
        waits `COUNT_HOLD_SECONDS` at most; a count that shrinks, or whose ReplicaSet nobody will
        surge, is written at once."""
        requested = sum(1 for p in pods if has_evacuation_request(p))
        if not is_evacuation_ready(rs) or requested <= replicas_to_evacuate(rs):
            return False
        until = self._held.setdefault(key, now + timedelta(seconds=COUNT_HOLD_SECONDS))
        return now < until

    def _hold_readiness(self, key: str, rs: Obj, pods: Sequence[Obj], patch: Obj, now: datetime) -> bool:
        """Whether a status that only gained ready replicas may wait a little during an evacuation.

        A replacement becoming available is what the Deployment waits for (it reads the pods, not
        this status) to scale the ReplicaSet down; the sync that carries out that scale-down then
        writes the readiness, the smaller size and the count in one write instead of two. Waits
        `COUNT_HOLD_SECONDS` at most, only on an evacuation-ready ReplicaSet with requested pods
        and no `minReadySeconds`."""
        if int((rs.get("spec") or {}).get("minReadySeconds") or 0) > 0 or not is_evacuation_ready(rs):
            return False
        if not any(has_evacuation_request(p) for p in pods):
            return False
        old, new = rs.get("status") or {}, patch.get("status") or {}
        unchanged = ("replicas", "fullyLabeledReplicas", "observedGeneration")
        if any(int(new.get(k) or 0) != int(old.get(k) or 0) for k in unchanged):
            return False
        if (new.get("conditions") or []) != (old.get("conditions") or []):
            return False
        if int(new.get("readyReplicas") or 0) < int(old.get("readyReplicas") or 0):
            return False
        if int(new.get("availableReplicas") or 0) <= int(old.get("availableReplicas") or 0):
            return False
        until = self._held.setdefault(key, now + timedelta(seconds=COUNT_HOLD_SECONDS))
        return now < until

    def candidate_pods(self, rs: Mapping[str, Any]) -> list[Obj]:
        """Active pods this ReplicaSet owns plus the orphans in its namespace (what a claim can touch)."""
        meta = rs.get("metadata") or {}
        owned = self.pod_lister.by_index(CONTROLLER_UID_INDEX, str(meta.get("uid")))
        orphans = self.pod_lister.by_index(ORPHAN_INDEX, str(meta.get("namespace")))
        return filter_active_pods(
            [p for p in owned if p.get("metadata", {}).get("namespace") == meta.get("namespace")] + orphans
        )

    async def claim_pods(self, rs: Obj, selector: Selector, pods: list[Obj]) -> list[Obj]:
        can_adopt = recheck_deletion_timestamp(fresh_getter(self.client, REPLICASETS, rs))
        manager = ControllerRefManager(
            self.client, rs, selector, api_version=RS_API_VERSION, kind=RS_KIND, can_adopt=can_adopt
        )
        return await manager.claim(pods)

    async def manage_replicas(
        self, key: str, rs: Obj, pods: list[Obj], changes: _PodChanges | None = None
    ) -> None:
        changes = changes if changes is not None else _PodChanges()
        diff = len(pods) - desired_replicas(rs)
        if diff < 0:
            await self.create_pods(key, rs, min(-diff, self.burst_replicas), changes)
        elif diff > 0:
            await self.delete_pods(key, rs, pods, min(diff, self.burst_replicas), changes)

    async def create_pods(self, key: str, rs: Obj, count: int, changes: _PodChanges | None = None) -> None:
        self.expectations.expect_creations(key, count)
        meta = rs["metadata"]
        ref = {
            "apiVersion": RS_API_VERSION,
            "kind": RS_KIND,
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        template = (rs.get("spec") or {}).get("template") or {}

        async def create() -> None:
            body = pod_from_template(template, rs, ref)  # no labels: an error, but no event
            try:
                created = await self.client.create(PODS, body, namespace=meta["namespace"])
            except Exception as exc:
                if _namespace_terminating(exc):
                    return
                self.recorder.event(rs, "Warning", "FailedCreate", f"Error creating: {error_text(exc)}")
                raise
            if changes is not None:
                changes.created.append(created)
            self.recorder.event(
                rs, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
            )

        successes, error = await slow_start_batch(count, SLOW_START_INITIAL_BATCH_SIZE, create)
        skipped = count - successes
        if skipped > 0:
            # These pods will never be seen by the informer: stop waiting for them.
            log.debug("slow-start failure, lowering expectations", skipped=skipped)
            self.expectations.lower_expectations(key, skipped, 0)
        if error is not None:
            raise error

    async def delete_pods(
        self, key: str, rs: Obj, pods: list[Obj], count: int, changes: _PodChanges | None = None
    ) -> None:
        victims = choose_pods_to_delete(
            pods,
            self.related_pods(rs, pods),
            count,
            self.clock(),
            evacuation_first=self.evacuation_enabled,
            pod_deletion_cost=self.gates.enabled(features.POD_DELETION_COST),
            logarithmic_scale_down=self.gates.enabled(features.LOGARITHMIC_SCALE_DOWN),
        )
        self.expectations.expect_deletions(key, [pod_key(p) for p in victims])
        errors: list[BaseException] = []

        async def delete(pod: Obj) -> None:
            pmeta = pod["metadata"]
            try:
                await self.client.delete(PODS, pmeta["name"], namespace=pmeta["namespace"])
            except Exception as exc:
                # Any failure, a dropped connection as much as a refusal: the informer will not
                # see this deletion, so stop waiting for it (KCM's DeletionObserved on every error),
                # or the ReplicaSet would ignore all scaling until the expectations expire.
                self.expectations.deletion_observed(key, pod_key(pod))
                if not (isinstance(exc, ApiError) and exc.not_found):
                    self.recorder.event(rs, "Warning", "FailedDelete", f"Error deleting: {error_text(exc)}")
                    errors.append(_delete_failed(exc))
                elif changes is not None:
                    changes.deleted.add(pod_key(pod))
                return
            if changes is not None:
                changes.deleted.add(pod_key(pod))
            self.recorder.event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {pmeta['name']}")

        async with anyio.create_task_group() as tg:
            for pod in victims:
                tg.start_soon(delete, pod)
        if errors:
            raise errors[0]

    def replica_sets_with_same_controller(self, rs: Mapping[str, Any]) -> list[Obj]:
        """`getReplicaSetsWithSameController`: the ReplicaSets (this one included, deleting or
        not) controlled by this one's controller, in its namespace; none without a controller."""
        ref = get_controller_of(rs)
        if ref is None:
            return []
        namespace = (rs.get("metadata") or {}).get("namespace")
        return [
            sibling
            for sibling in self.rs_lister.by_index(CONTROLLER_UID_INDEX, str(ref.get("uid")))
            if (sibling.get("metadata") or {}).get("namespace") == namespace
        ]

    def related_pods(self, rs: Mapping[str, Any], candidates: Iterable[Mapping[str, Any]]) -> list[Obj]:
        """`getIndirectlyRelatedPods`, on the candidates' nodes only: the pods there matching any
        ReplicaSet with the same controller (none without one).

        The ranking reads related pods only as a count per candidate's node, so Go's scan of
        the whole namespace (150,000 pods: ~100 ms of matching per scale-down) comes down to the
        pods on those nodes, from the pod cache's node index. Unscheduled candidates need no
        count: they sort ahead of every scheduled pod before rank is compared, and all share
        the same one.
        """
        namespace = (rs.get("metadata") or {}).get("namespace")
        selectors: list[Selector] = []
        for sibling in self.replica_sets_with_same_controller(rs):
            try:
                selectors.append(from_label_selector((sibling.get("spec") or {}).get("selector")))
            except SelectorError:
                continue
        if not selectors:
            return []
        nodes = {node for p in candidates if (node := (p.get("spec") or {}).get("nodeName"))}
        related: list[Obj] = []
        for node in nodes:
            for pod in self.pod_lister.by_index(NODE_NAME_INDEX, node):
                if pod["metadata"].get("namespace") != namespace:
                    continue
                # (an empty selector matches every pod, as the lister's)
                if any(selector.empty or selector.matches_obj(pod) for selector in selectors):
                    related.append(pod)
        return related

    async def handle_evacuation(self, rs: Obj, pods: Sequence[Obj]) -> BaseException | None:
        """Answer requests when the Deployment made this RS ready for it (the count of requested
        pods is published with the status: `with_evacuation_count`).

        Returns (rather than raises) the first failure so the status is still written.
        """
        requested = [p for p in pods if has_evacuation_request(p)]
        if not requested or not is_evacuation_ready(rs):
            return None
        errors: list[BaseException] = []

        async def answer(pod: Obj, patch: Obj) -> None:
            try:
                await self.client.patch(
                    PODS,
                    pod["metadata"]["name"],
                    patch,
                    namespace=pod["metadata"]["namespace"],
                    subresource="status",
                    patch_type="strategic",
                )
            except ApiError as exc:
                if not exc.not_found:
                    errors.append(exc)

        async with anyio.create_task_group() as tg:
            for pod in requested:
                patch = evacuation_initiated_patch(pod, message=EVACUATION_MESSAGE, now=self.clock())
                if patch is not None:
                    tg.start_soon(answer, pod, patch)
        return errors[0] if errors else None
