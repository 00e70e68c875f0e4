"""The objects of a surge through the public API: the replacement copy, its adoption, the mark.

Beside the stock kube-controller-manager nobody can make KCM's ReplicaSet controller create a pod
for us and delete a chosen one afterwards, except by what it already does on its own:
- it adopts an orphan pod whose labels match its selector, and then, with one pod too many,
  deletes the lowest-ranked (`ActivePodsWithRanks`: unassigned, pending, not ready first, then the
  lowest `controller.kubernetes.io/pod-deletion-cost`);
- so a replacement is made from the ReplicaSet's own template with the selector's labels held
  back (a *copy*: outside every ReplicaSet's selector, so nobody adopts or counts it yet), and
  once it is available on another node the labels are given back: the ReplicaSet adopts it and
  deletes the departing pod, which carries the lowest deletion cost.

The copy's owner reference to the ReplicaSet is not a controller one (the ReplicaSet would
release a controlled pod its selector does not match), so the garbage collector still removes it
with the ReplicaSet. The hand-over patch gives the labels back and turns that reference into the
controller one in the same write (strategic merge by `uid`; `controller` and `blockOwnerDeletion`,
as KCM's adoption writes them): KCM's `ClaimPods` then finds a pod it already controls whose labels
match and claims it with no request, where an orphan would cost its ReplicaSet controller a fresh
GET of the ReplicaSet (`RecheckDeletionTimestamp`) and the adoption patch, out of the same qps
budget as the deletes a drain waits for. Everything that a restart needs is on the objects:
- `maintenance.aiokcm.io/replacement-for` (label, on a copy): the UID of the pod it replaces;
- `maintenance.aiokcm.io/held-labels` (annotation, on a copy): the labels held back, as JSON;
- `maintenance.aiokcm.io/replaced-pod` (annotation, on an adopted copy): `<uid>@<time adopted>`;
- `maintenance.aiokcm.io/previous-deletion-cost` (annotation, on a departing pod): the deletion
  cost it had before we lowered it ("" for none), restored when the request is withdrawn. A
  departing pod's cost is a *rank* counted up from the lowest int32: the first pod of a
  ReplicaSet to leave gets the lowest, the next one above it, and so on, and copies are handed
  over in rank order, so when the ReplicaSet adopts a copy its pod is already the one at the lowest
  cost and it deletes that pod and no other, with no write at the hand-over. Only a copy ready out
  of turn (a `maxSurge` above 1) drops its pod to the lowest first, and raises whichever other pod
  had it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from controllers.common.controller_ref import new_controller_ref
from controllers.common.podtemplate import pod_from_template
from kubeutil.selectors import Selector, SelectorError, from_label_selector
from kubeutil.timestamps import format_time, parse_time

Obj = Mapping[str, Any]

REPLACES_LABEL = "maintenance.aiokcm.io/replacement-for"
HELD_LABELS_ANNOTATION = "maintenance.aiokcm.io/held-labels"
REPLACED_ANNOTATION = "maintenance.aiokcm.io/replaced-pod"
PREVIOUS_COST_ANNOTATION = "maintenance.aiokcm.io/previous-deletion-cost"
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
# The lowest int32: KCM's ReplicaSet controller removes this pod before any other ready one. A
# departing pod's cost is `LOWEST + rank`, below every other pod's (a scale-down takes departing
# pods first), and the pod whose copy is handed over is the one at the lowest of its ReplicaSet.
LOWEST = -(2**31)
RANKS = 1 << 16  # the costs read as ours: LOWEST .. LOWEST + RANKS - 1 (with our record of the cost)
LOWEST_COST = str(LOWEST)
DEPARTING_COST = str(LOWEST + 1)  # the second rank
# What a Deployment's ReplicaSets add to its selector: holding it back keeps the copy matched by
# the Deployment's own selector (its Service and PodDisruptionBudget) but by no ReplicaSet.
POD_TEMPLATE_HASH = "pod-template-hash"


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _labels(obj: Obj) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def _annotations(obj: Obj) -> Mapping[str, str]:
    return _meta(obj).get("annotations") or {}


def uid(obj: Obj) -> str:
    return str(_meta(obj).get("uid", ""))


def replaces(copy: Obj) -> str:
    """The UID of the pod a copy replaces ("" for any other pod)."""
    return str(_labels(copy).get(REPLACES_LABEL, ""))


def replaced(pod: Obj) -> tuple[str, datetime | None]:
    """For an adopted copy: the UID of the pod it replaced and when it was handed over."""
    raw = str(_annotations(pod).get(REPLACED_ANNOTATION, ""))
    if not raw:
        return "", None
    who, _, when = raw.partition("@")
    return who, parse_time(when)


def rank_cost(rank: int) -> str:
    """The deletion cost of a departing pod's `rank` (0 is the lowest int32)."""
    return str(LOWEST + min(max(rank, 0), RANKS - 1))


def cost_rank(cost: object) -> int | None:
    """The rank a deletion cost stands for, or None when it is no departing pod's cost."""
    try:
        value = int(str(cost))
    except ValueError:
        return None
    return value - LOWEST if LOWEST <= value < LOWEST + RANKS else None


def marked_cost(pod: Obj) -> str | None:
    """The cost we gave the pod (one of the ranks); None when we have not marked it."""
    ann = _annotations(pod)
    cost = ann.get(POD_DELETION_COST)
    if PREVIOUS_COST_ANNOTATION not in ann or cost_rank(cost) is None:
        return None
    return str(cost)


def marked_rank(pod: Obj) -> int | None:
    """The rank of the cost we gave the pod; None when we have not marked it."""
    cost = marked_cost(pod)
    return None if cost is None else cost_rank(cost)


def is_marked(pod: Obj) -> bool:
    return marked_cost(pod) is not None


def _guard(pod: Obj) -> dict[str, Any]:
    """The patch's preconditions: the same pod (uid) at the version we read (resourceVersion), so a
    cost someone wrote since our cache saw the pod is never overwritten or remembered wrongly (a
    409, and the sync is retried from the newer copy)."""
    guard: dict[str, Any] = {"uid": uid(pod)}
    version = _meta(pod).get("resourceVersion")
    if version:
        guard["resourceVersion"] = str(version)
    return guard


def mark_patch(pod: Obj, cost: str = DEPARTING_COST) -> dict[str, Any] | None:
    """A merge patch giving the pod `cost`, remembering its own; None when it has it already.

    The cost remembered is the pod's own: the one it has now unless that is ours (then the one
    remembered before), so a cost someone set while the pod was marked is the one put back."""
    if marked_cost(pod) == cost:
        return None
    ann = _annotations(pod)
    current = ann.get(POD_DELETION_COST)
    if cost_rank(current) is not None and PREVIOUS_COST_ANNOTATION in ann:
        previous = str(ann.get(PREVIOUS_COST_ANNOTATION) or "")
    else:
        previous = "" if current is None else str(current)
    return {
        "metadata": {
            **_guard(pod),
            "annotations": {POD_DELETION_COST: cost, PREVIOUS_COST_ANNOTATION: previous},
        }
    }


def restore_patch(pod: Obj) -> dict[str, Any] | None:
    """A merge patch putting back the deletion cost the pod had before; None when we never marked it.

    A cost that is no longer ours (someone set another since) is left as it is; only our record goes."""
    ann = _annotations(pod)
    if PREVIOUS_COST_ANNOTATION not in ann:
        return None
    annotations: dict[str, Any] = {PREVIOUS_COST_ANNOTATION: None}
    if cost_rank(ann.get(POD_DELETION_COST)) is not None:
        annotations[POD_DELETION_COST] = str(ann.get(PREVIOUS_COST_ANNOTATION) or "") or None
    return {"metadata": {**_guard(pod), "annotations": annotations}}


def held_labels(replica_set: Obj) -> dict[str, str] | None:
    """The template labels to hold back so that the ReplicaSet's selector no longer matches.

    `pod-template-hash` when the selector has it (a Deployment's ReplicaSet: the copy still
    matches the Deployment's selector, so its Service sends it traffic before it is adopted);
    otherwise the first label the selector requires by value or existence. None when no held-back
    label takes the copy out of the selector (a selector of only `NotIn`/`DoesNotExist`).
    """
    spec = replica_set.get("spec") or {}
    template_labels = dict(((spec.get("template") or {}).get("metadata") or {}).get("labels") or {})
    try:
        selector = from_label_selector(spec.get("selector"))
    except SelectorError:
        return None
    candidates = [POD_TEMPLATE_HASH, *sorted((spec.get("selector") or {}).get("matchLabels") or {})]
    candidates += [
        str(e.get("key", ""))
        for e in (spec.get("selector") or {}).get("matchExpressions") or []
        if e.get("operator") in ("In", "Exists")
    ]
    for key in candidates:
        if key in template_labels:
            kept = {k: v for k, v in template_labels.items() if k != key}
            if not selector.matches(kept):
                return {key: template_labels[key]}
    return None


def copy_body(replica_set: Obj, departing: Obj, held: Mapping[str, str]) -> dict[str, Any]:
    """The copy of `replica_set`'s template replacing `departing`, with `held` labels left out."""
    meta = _meta(replica_set)
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
    }
    template = (replica_set.get("spec") or {}).get("template") or {}
    body = pod_from_template(template, replica_set, owner)
    labels = {k: v for k, v in body["metadata"]["labels"].items() if k not in held}
    labels[REPLACES_LABEL] = uid(departing)
    body["metadata"]["labels"] = labels
    annotations = dict(body["metadata"].get("annotations") or {})
    annotations[HELD_LABELS_ANNOTATION] = json.dumps(dict(held), sort_keys=True)
    body["metadata"]["annotations"] = annotations
    return body


def held_of(copy: Obj) -> dict[str, str]:
    """The labels a copy holds back (none when the annotation is missing or not JSON)."""
    try:
        value = json.loads(str(_annotations(copy).get(HELD_LABELS_ANNOTATION, "{}")))
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def adopt_patch(copy: Obj, replica_set: Obj, now: datetime) -> dict[str, Any]:
    """A strategic-merge patch handing the copy to `replica_set`: its labels back and `replica_set`
    its controller, so the ReplicaSet counts it at once (and deletes the departing pod).

    Guarded by the copy's UID; the `replacement-for` label goes (the copy is an ordinary pod of
    the ReplicaSet from now on) and the annotation remembers whom it replaced, and since when. The
    owner reference merges into the copy's own by `uid` (other owners are kept), as the one
    `metav1.NewControllerRef` makes. Labels and controller change in one write, so no controller
    ever sees the copy controlled but unmatched (it would release it) or matched but orphaned.
    """
    labels: dict[str, Any] = dict(held_of(copy))
    labels[REPLACES_LABEL] = None
    return {
        "metadata": {
            "uid": uid(copy),
            "labels": labels,
            "annotations": {REPLACED_ANNOTATION: f"{replaces(copy)}@{format_time(now)}"},
            "ownerReferences": [new_controller_ref(replica_set, api_version="apps/v1", kind="ReplicaSet")],
        }
    }


def release_patch(copy: Obj) -> dict[str, Any]:
    """A merge patch dropping the record of whom an adopted copy replaced (it stays an ordinary pod)."""
    return {"metadata": {"uid": uid(copy), "annotations": {REPLACED_ANNOTATION: None}}}


def matched_by_any(labels: Mapping[str, str], replica_sets: Sequence[Obj]) -> bool:
    """Some ReplicaSet's selector matches `labels` (a copy with these labels would be claimed)."""
    for rs in replica_sets:
        try:
            selector: Selector = from_label_selector((rs.get("spec") or {}).get("selector"))
        except SelectorError:
            continue
        if selector.matches(labels):
            return True
    return False
