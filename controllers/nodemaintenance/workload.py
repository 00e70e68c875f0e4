"""Who stands behind a pod, and whether it will answer an EvacuationRequest.

The drain's waits only make sense when someone will move the pod. Today only a Deployment that can
surge answers: its controller marks its ReplicaSets `deployment.kubernetes.io/evacuation-ready` and
the ReplicaSet controller answers `EvacuationInitiated` for their pods. So a pod's owner is judged
from the objects themselves (pure functions over what the caller looked up, the listers in the
controller, a few GETs in the CLI's dry run):

- `WILL`: a marked ReplicaSet, or one whose Deployment is RollingUpdate with `maxSurge` above 0
  (the mark may simply not be written yet) when this manager runs the controllers that surge
  (`surge_answers`): the drain waits for the answer. Beside KCM's own ReplicaSet and Deployment
  controllers nobody answers in-controller, so an unmarked ReplicaSet is `CANNOT` there unless
  the replacement surge answers through the public API (then `surge_answers` holds too, and
  `bare_replicasets_answer` makes a ReplicaSet with no Deployment `WILL` as well: it surges one
  pod at a time);
- `CANNOT`: a kind that never answers (StatefulSet, Job, ReplicationController, a ReplicaSet with
  no surging Deployment: Recreate, `maxSurge: 0` or none at all): no point waiting, the pod is
  evicted (under its PodDisruptionBudget) as soon as its node drains;
- `MAY`: an owner of another kind (an operator may answer for its custom resource) or one not in
  the cache yet: the drain waits, as for `WILL`, because waiting is the safe mistake;
- `NONE`: no controller at all (a bare pod): nobody will bring it back, so it is only evicted when
  the maintenance says `force`, as `kubectl drain --force`.

Two annotations, on the pod or on its owner (the pod's wins), let a workload say more:
- `maintenance.aiokcm.io/wait-for-evacuation: "true"`: do not evict promptly even though the owner
  cannot answer (someone else moves the pod: an operator, a person); the maintenance's
  `evacuationTimeoutSeconds` applies;
- `maintenance.aiokcm.io/evacuation-timeout-seconds: "N"`: this workload's own wait before the
  eviction fallback, whoever owns the pod (it implies waiting). An invalid value is ignored.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controllers.common.controller_ref import get_controller_of
from controllers.common.deploymentstrategy import is_rolling_update, max_surge
from controllers.common.evacuation import is_evacuation_ready

Obj = Mapping[str, Any]
# (kind, namespace, name) -> the object, or None when not known.
Lookup = Callable[[str, str, str], Obj | None]

WAIT_ANNOTATION = "maintenance.aiokcm.io/wait-for-evacuation"
TIMEOUT_ANNOTATION = "maintenance.aiokcm.io/evacuation-timeout-seconds"
# The largest timeout we honour (the CRD's int32), so a "never" value cannot overflow a date.
MAX_TIMEOUT_SECONDS = 2**31 - 1

CANNOT_ANSWER_KINDS = frozenset({"StatefulSet", "Job", "ReplicationController"})
# The owner kinds whose objects the drain reads (for their answer and annotations); an owner of
# another kind is judged by its kind and the pod's annotations alone.
LOOKED_UP_KINDS = frozenset({"ReplicaSet", "Deployment", "StatefulSet"})


class Answer(enum.Enum):
    WILL = "will"
    MAY = "may"
    CANNOT = "cannot"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Workload:
    """What the pod's owners say about evacuating it; `owner` is "Kind name" for messages."""

    answer: Answer
    owner: str = ""
    owner_uid: str = ""
    wait: bool = False
    timeout: float | None = None

    @property
    def evict_promptly(self) -> bool:
        """Evicted as soon as the node drains: nobody answers and nobody asked to wait."""
        return self.answer in (Answer.CANNOT, Answer.NONE) and not self.wait and self.timeout is None

    def describe(self) -> str:
        if self.answer is Answer.NONE:
            return "no controller"
        verb = {Answer.WILL: "answers by surging", Answer.MAY: "may answer", Answer.CANNOT: "cannot answer"}[
            self.answer
        ]
        return f"{self.owner} {verb}"


def _annotations(obj: Obj | None) -> Mapping[str, Any]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def _wants_wait(obj: Obj | None) -> bool | None:
    raw = _annotations(obj).get(WAIT_ANNOTATION)
    if raw is None:
        return None
    return str(raw).strip().lower() == "true"


def _timeout(obj: Obj | None) -> float | None:
    raw = _annotations(obj).get(TIMEOUT_ANNOTATION)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        return None
    return float(min(value, MAX_TIMEOUT_SECONDS)) if value >= 0 else None


def surging_deployment(deployment: Obj | None) -> bool:
    """A Deployment that answers by surging (what its controller marks ReplicaSets for)."""
    if deployment is None or (deployment.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return is_rolling_update(deployment) and max_surge(deployment) > 0


def _answer(
    kind: str,
    owner: Obj | None,
    namespace: str,
    lookup: Lookup,
    surge_answers: bool = True,
    bare_replicasets_answer: bool = False,
) -> tuple[Answer, Obj | None]:
    """The owner's answer, and the Deployment behind a ReplicaSet when there is one."""
    if owner is None:
        return (Answer.CANNOT if kind in CANNOT_ANSWER_KINDS else Answer.MAY), None
    if kind in CANNOT_ANSWER_KINDS:
        return Answer.CANNOT, None
    if kind != "ReplicaSet":
        return Answer.MAY, None
    dref = get_controller_of(owner)
    deployment = None
    if dref is not None and dref.get("kind") == "Deployment":
        deployment = lookup("Deployment", namespace, str(dref.get("name", "")))
    if is_evacuation_ready(owner):
        return Answer.WILL, deployment
    if (
        dref is None
        and bare_replicasets_answer
        and not (owner.get("metadata") or {}).get("deletionTimestamp")
    ):
        return Answer.WILL, None
    if dref is None or dref.get("kind") != "Deployment" or not surge_answers:
        return Answer.CANNOT, deployment
    if deployment is None:
        return Answer.MAY, None
    return (Answer.WILL if surging_deployment(deployment) else Answer.CANNOT), deployment


def workload_of(
    pod: Obj, lookup: Lookup, *, surge_answers: bool = True, bare_replicasets_answer: bool = False
) -> Workload:
    """Classify `pod`'s owner; `lookup` finds owners (None when not known).

    `surge_answers`: aiokcm's ReplicaSet and Deployment controllers run beside the drain, so a
    surging Deployment will answer even before it marks its ReplicaSet."""
    ref = get_controller_of(pod)
    if ref is None:
        return Workload(Answer.NONE, wait=bool(_wants_wait(pod)), timeout=_timeout(pod))
    kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
    namespace = str((pod.get("metadata") or {}).get("namespace", ""))
    owner = lookup(kind, namespace, name)
    answer, deployment = _answer(kind, owner, namespace, lookup, surge_answers, bare_replicasets_answer)
    if owner is None and kind in CANNOT_ANSWER_KINDS and kind in LOOKED_UP_KINDS:
        # Its annotations are unknown (not in the cache yet): waiting is the safe guess.
        answer = Answer.MAY
    described = (
        f"Deployment {(deployment.get('metadata') or {}).get('name')}" if deployment else f"{kind} {name}"
    )
    wait = _wants_wait(pod)
    timeout = _timeout(pod)
    for holder in (owner, deployment):
        if wait is None:
            wait = _wants_wait(holder)
        if timeout is None:
            timeout = _timeout(holder)
    return Workload(answer, described, str(ref.get("uid", "")), bool(wait), timeout)
