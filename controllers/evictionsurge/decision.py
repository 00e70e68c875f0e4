"""Whether an eviction may go now, or waits for a replacement to surge first: a pure function.

Drainers call the Eviction API (`kubectl drain`, cluster-autoscaler, Karpenter, node-group
upgrades). Evicting the only ready pod of a Deployment takes the app to zero; a PodDisruptionBudget
only turns that into a drain that hangs. The evacuation machinery can do better: a pod marked
`EvacuationRequest=True` is answered by its ReplicaSet (`EvacuationInitiated`), its Deployment
surges a replacement, and once the replacement is available the old pod is removed. So at eviction
time the webhook holds the eviction back with 429 TooManyRequests (every drainer retries a 429)
and asks for an evacuation of the pod; a later retry passes once the replacement is available, or
finds the pod already gone.

The rules, in order (the first that applies decides):
1. A dry run passes untouched (the webhook declares `sideEffects: NoneOnDryRun`).
2. A pod not in the cache, already going (terminating or terminal), or not available passes:
   evicting a pod that serves nothing costs no availability.
3. A pod whose owner cannot answer passes: its ReplicaSet must carry
   `deployment.kubernetes.io/evacuation-ready` (aiokcm's Deployment controller marks ReplicaSets
   of Deployments that can surge) and belong to a Deployment in the cache; or, beside KCM's own
   controllers where the replacement surge answers through the public API (`public_surge`), belong
   to a RollingUpdate Deployment with `maxSurge` above 0, or to no Deployment at all (a ReplicaSet
   surges one pod at a time). Nobody else is delayed.
4. If, without this pod, the Deployment still has `spec.replicas` available pods, the eviction
   passes: the replacement is there (or the app was over-provisioned anyway).
5. An evacuation already asked for (by us or by a NodeMaintenance) whose replacement has not
   become available within the bound passes, and says so: the PodDisruptionBudget decides.
   So does one the EvictionRequest API is past: the webhook's own EvictionRequest failed (no
   responder managed), or the pod's Eviction has reached the default imperative evictor, whose
   eviction this is (holding it back would hold the last responder back forever).
6. Otherwise the eviction is denied with 429, and an evacuation is asked for unless one is
   already under way. In the EvictionRequest mode the denial names the webhook's EvictionRequest.

Why availability and not the budget's `disruptionsAllowed`: the evacuation deletes the old pod
itself once the Deployment has `spec.replicas` available pods, without asking the budget. Asking
for it when the app is already at or above its replicas (a budget refusing for another reason:
other apps under the same selector, recent disruptions) would delete the pod past the budget. In
every case where evicting would take the app below its replicas, a surge is what the budget is
waiting for too, so a budget that would refuse (a single replica with `minAvailable: 1`) is
answered by the same surge.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from controllers.common.controller_ref import get_controller_of
from controllers.common.deploymentstrategy import is_rolling_update, max_surge
from controllers.common.evacuation import EVACUATION_INITIATED, EVACUATION_REQUEST, is_evacuation_ready
from controllers.common.pods import get_pod_condition, is_pod_active, is_pod_available, pod_key
from evictionapi import names, requests
from kubeutil.meta import object_meta
from kubeutil.timestamps import parse_time

Obj = Mapping[str, Any]

REASON_EVICTION_SURGE = "EvictionSurge"


class Why(enum.Enum):
    """What decided; the `decision` label of the webhook's metric and the log's `why`."""

    DRY_RUN = "dry-run"
    UNKNOWN_POD = "unknown-pod"
    NOT_RUNNING = "not-running"
    UNAVAILABLE = "pod-unavailable"
    NO_ANSWER = "owner-cannot-answer"
    ENOUGH_AVAILABLE = "enough-available"
    SURGE_TIMED_OUT = "surge-timed-out"
    RESPONDERS_DONE = "responders-done"
    SURGING = "surging"


@dataclass(frozen=True, slots=True)
class Facts:
    """What the caches say about the pod an eviction targets."""

    pod: Obj | None
    replica_set: Obj | None  # the pod's controller, if a ReplicaSet in the cache
    deployment: Obj | None  # the ReplicaSet's controller, if a Deployment in the cache
    pods: Sequence[
        Obj
    ] = ()  # every pod of the Deployment's ReplicaSets, or of a bare ReplicaSet (the target included)
    dry_run: bool = False
    # The EvictionRequest mode only: the name the webhook's request for the pod has (or will
    # have), the request if cached, and the pod's live Eviction if cached.
    request_name: str = ""
    request: Obj | None = None
    eviction: Obj | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    why: Why
    message: str = ""
    request: bool = False  # ask for an evacuation of the pod (none under way, none asked by us)

    @property
    def holds_back(self) -> bool:
        return not self.allowed


def _allow(why: Why, message: str = "") -> Decision:
    return Decision(True, why, message)


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def desired_replicas(deployment: Obj) -> int:
    spec = deployment.get("spec") or {}
    return 1 if spec.get("replicas") is None else max(0, _int(spec.get("replicas")))


def min_ready_seconds(deployment: Obj) -> int:
    return max(0, _int((deployment.get("spec") or {}).get("minReadySeconds")))


def evacuation_requested_at(pod: Obj, now: datetime) -> datetime | None:
    """When the pod's `EvacuationRequest=True` was set (by anyone); None when there is none."""
    cond = get_pod_condition(pod, EVACUATION_REQUEST)
    if cond is None or cond.get("status") != "True":
        return None
    return parse_time(cond.get("lastTransitionTime")) or now


def requested_by_us(pod: Obj) -> bool:
    cond = get_pod_condition(pod, EVACUATION_REQUEST)
    return cond is not None and cond.get("status") == "True" and cond.get("reason") == REASON_EVICTION_SURGE


def refused_by_owner(pod: Obj, requested_at: datetime | None) -> bool:
    """The owner answered `EvacuationInitiated=False` after the request: it will not surge."""
    cond = get_pod_condition(pod, EVACUATION_INITIATED)
    if cond is None or cond.get("status") != "False" or requested_at is None:
        return False
    answered = parse_time(cond.get("lastTransitionTime"))
    return answered is not None and answered >= requested_at


def responders_done(facts: Facts) -> str | None:
    """Why the EvictionRequest API is past the surge for this pod (rule 5), or None."""
    if requests.wants_eviction(facts.request) and requests.failed(facts.request):
        cond = requests.condition(facts.request, names.CONDITION_FAILED) or {}
        return f"EvictionRequest {facts.request_name} failed: {cond.get('message') or cond.get('reason')}"
    if requests.active_responder_of(facts.eviction) == names.IMPERATIVE_EVICTOR:
        return f"its Eviction has handed over to {names.IMPERATIVE_EVICTOR}"
    return None


def _answers(rs: Obj | None, d: Obj | None, public_surge: bool) -> bool:
    """Someone surges for this ReplicaSet's pods (rule 3)."""
    if rs is None:
        return False
    if d is not None:
        if object_meta(d).get("deletionTimestamp"):
            return False
        if is_evacuation_ready(rs):
            return True
        return public_surge and is_rolling_update(d) and max_surge(d) > 0
    return public_surge and get_controller_of(rs) is None and not object_meta(rs).get("deletionTimestamp")


def decide(facts: Facts, *, now: datetime, surge_timeout: float, public_surge: bool = False) -> Decision:
    """The verdict on one eviction (see the module docstring for the rules)."""
    if facts.dry_run:
        return _allow(Why.DRY_RUN)
    pod = facts.pod
    if pod is None:
        return _allow(Why.UNKNOWN_POD)
    if not is_pod_active(pod):
        return _allow(Why.NOT_RUNNING)
    rs, d = facts.replica_set, facts.deployment
    if not _answers(rs, d, public_surge):
        return _allow(Why.NO_ANSWER)
    owner = d if d is not None else rs
    assert owner is not None  # _answers needs a ReplicaSet
    min_ready = min_ready_seconds(owner)
    if not is_pod_available(pod, min_ready, now):
        return _allow(Why.UNAVAILABLE)
    requested_at = evacuation_requested_at(pod, now)
    if refused_by_owner(pod, requested_at):
        return _allow(Why.NO_ANSWER)
    uid = object_meta(pod).get("uid")
    others = sum(
        1 for p in facts.pods
        if object_meta(p).get("uid") != uid and is_pod_active(p) and is_pod_available(p, min_ready, now)
    )  # fmt: skip
    desired = desired_replicas(owner)
    if others >= desired:
        return _allow(Why.ENOUGH_AVAILABLE)
    name = str(object_meta(owner).get("name", ""))
    kind = "Deployment" if d is not None else "ReplicaSet"
    if requested_at is not None and now - requested_at >= timedelta(seconds=surge_timeout):
        return _allow(
            Why.SURGE_TIMED_OUT,
            f"no replacement for pod {pod_key(pod)} became available within {surge_timeout:g}s "
            f"({kind} {name}: {others} of {desired} available without it); the eviction is no "
            f"longer held back and the PodDisruptionBudget decides",
        )
    done = responders_done(facts)
    if done is not None:
        return _allow(
            Why.RESPONDERS_DONE,
            f"pod {pod_key(pod)}: {done}; the eviction is no longer held back and the "
            f"PodDisruptionBudget decides",
        )
    ours = requests.wants_eviction(facts.request)
    request = requested_at is None and not ours
    named = ""
    if facts.request_name and (request or ours):
        namespace = object_meta(pod).get("namespace", "")
        named = f"; kubectl get evictionrequest -n {namespace} {facts.request_name}"
    message = (
        f"a replacement for pod {pod_key(pod)} is being started on another node "
        f"({kind} {name}: {others} of {desired} replicas available without it{named}); retry the eviction"
    )
    return Decision(False, Why.SURGING, message, request=request)
