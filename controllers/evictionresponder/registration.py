"""The responder's name and priority, and which pods it serves: what registers it on a pod.

One name for every pod it serves, `surge.aiokcm.io/replicaset`: the pod's controller is a
ReplicaSet in every case, and whether a Deployment owns that ReplicaSet only changes the surge
budget (its `maxSurge`, or one pod for a ReplicaSet alone), not who answers or how to follow it.
It registers at the priority of a pod's managing controller, 10000, as the API asks of one: a
third-party responder with a higher priority runs first, and when that one completes or stops
heart-beating the surge gets its turn, before the imperative evictor (priority 100).

Nobody edits a workload to get it. The evictionrequest controller computes each Eviction's
target responders from the pod's own list (`spec.evictionResponders`, or the
`lifecycle.aiokcm.io/eviction-responders` annotation on servers without the field) plus the
responders implied for it: with `eviction-responder` enabled, this one for every pod `serves`
says yes to (`implicit_responder`). Where Kubernetes serves the built-in API its own controller
computes the list from the pod field alone, so there the responder must be set in the workload's
pod template (`spec.template.spec.evictionResponders: [{name: surge.aiokcm.io/replicaset,
priority: 10000}]`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from controllers.common.controller_ref import get_controller_of
from evictionapi import names

RESPONDER_NAME: Final = "surge.aiokcm.io/replicaset"
RESPONDER_PRIORITY: Final = names.MANAGING_CONTROLLER_PRIORITY

Obj = Mapping[str, Any]


def serves(pod: Obj) -> bool:
    """Whether the responder is registered for `pod`: its controller is a ReplicaSet.

    Only the pod is read, so the registration never depends on a cache of ReplicaSets or
    Deployments; a pod whose workload cannot surge (`Recreate`, `maxSurge: 0`) is still
    registered and its Eviction completed at once with the reason, which says more to whoever
    reads the Eviction than a responder missing from the list.
    """
    ref = get_controller_of(pod)
    if ref is None or ref.get("kind") != "ReplicaSet":
        return False
    group = str(ref.get("apiVersion") or "apps/v1").partition("/")[0]
    return group == "apps"


def implicit_responder() -> dict[str, Any]:
    """The target responder entry for a served pod, as the evictionrequest controller lists it."""
    return {"name": RESPONDER_NAME, "priority": RESPONDER_PRIORITY}
