"""KEP-4212 (declarative node maintenance) names and pod-condition helpers, out-of-tree form.

The node-maintenance controller asks for a pod to be evacuated by setting the pod condition
`EvacuationRequest=True` (reason `NodeMaintenance`, message = the maintenance's reason). A workload
controller that can move the pod answers with `EvacuationInitiated=True`. A request set to False or
removed is withdrawn. Conditions written with another reason belong to another requester or
evacuator and are never overwritten.

Built-in kinds have no status fields for this, and a real API server prunes unknown status fields,
so the extra status travels as annotations:
- `maintenance.aiokcm.io/replicas-to-evacuate` on ReplicaSets and Deployments (absent means 0);
- `maintenance.aiokcm.io/evacuating-pods` on PodDisruptionBudgets;
- `deployment.kubernetes.io/evacuation-ready` on a ReplicaSet whose Deployment can surge
  replacements, which tells the ReplicaSet controller it may answer requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from controllers.common.pods import get_pod_condition
from kubeutil.conditions import new_condition, pod_condition_patch

# The controllers that answer an EvacuationRequest by surging, when NodeMaintenanceDeployment is on;
# whether the manager runs both is `NodeMaintenanceConfig.surge_answers`.
SURGING_CONTROLLERS = frozenset({"replicaset", "deployment"})
# The controller that answers through the public API instead, beside KCM's own ReplicaSet and
# Deployment controllers (for a Deployment that can surge, and for a ReplicaSet with none).
PUBLIC_SURGE_CONTROLLER = "replacement-surge"

EVACUATION_REQUEST = "EvacuationRequest"
EVACUATION_INITIATED = "EvacuationInitiated"
REASON_NODE_MAINTENANCE = "NodeMaintenance"
# The request of one pod's eviction (an EvictionRequest's surge responder), not of its node's drain.
REASON_EVICTION_REQUEST = "EvictionRequest"

REPLICAS_TO_EVACUATE_ANNOTATION = "maintenance.aiokcm.io/replicas-to-evacuate"
EVACUATING_PODS_ANNOTATION = "maintenance.aiokcm.io/evacuating-pods"
EVACUATION_READY_ANNOTATION = "deployment.kubernetes.io/evacuation-ready"

Obj = Mapping[str, Any]


def has_evacuation_request(pod: Obj) -> bool:
    """Someone asks for this pod to be evacuated: `EvacuationRequest=True` (False means withdrawn)."""
    cond = get_pod_condition(pod, EVACUATION_REQUEST)
    return cond is not None and cond.get("status") == "True"


def pod_level_request(pod: Obj) -> bool:
    """The pod's evacuation was asked for the pod alone (an EvictionRequest), not for its node.

    A replacement may then run on the pod's own node: nobody is emptying that node (a drain
    cordons it first, so the scheduler would not put a replacement there).
    """
    cond = get_pod_condition(pod, EVACUATION_REQUEST)
    return cond is not None and cond.get("status") == "True" and cond.get("reason") == REASON_EVICTION_REQUEST


def evacuation_initiated(pod: Obj) -> bool:
    """An evacuator has answered: `EvacuationInitiated=True`."""
    cond = get_pod_condition(pod, EVACUATION_INITIATED)
    return cond is not None and cond.get("status") == "True"


def _annotations(obj: Obj) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def is_evacuation_ready(replicaset: Obj) -> bool:
    """The ReplicaSet carries `deployment.kubernetes.io/evacuation-ready` (any value but "false")."""
    value = _annotations(replicaset).get(EVACUATION_READY_ANNOTATION)
    return value is not None and str(value).lower() != "false"


def replicas_to_evacuate(obj: Obj) -> int:
    """The published count (`maintenance.aiokcm.io/replicas-to-evacuate`); 0 when absent or invalid."""
    raw = _annotations(obj).get(REPLICAS_TO_EVACUATE_ANNOTATION)
    try:
        return max(0, int(str(raw))) if raw is not None else 0
    except ValueError:
        return 0


def count_annotation_patch(obj: Obj, annotation: str, count: int) -> dict[str, Any] | None:
    """A merge patch publishing `count` under `annotation` (removed at 0); None when already so."""
    current = _annotations(obj).get(annotation)
    wanted = str(count) if count > 0 else None
    if current == wanted:
        return None
    return {"metadata": {"annotations": {annotation: wanted}}}


def evacuation_initiated_patch(
    pod: Obj,
    *,
    reason: str = REASON_NODE_MAINTENANCE,
    message: str = "",
    now: datetime | None = None,
) -> dict[str, Any] | None:
    """A strategic-merge patch for the pod's `status` setting `EvacuationInitiated=True`.

    None when there is nothing to do: the pod is already answered with our reason, or its
    `EvacuationInitiated` condition carries another reason and so belongs to another evacuator.
    Only this one condition is sent, so the requester's `EvacuationRequest` is never touched.
    """
    current = get_pod_condition(pod, EVACUATION_INITIATED)
    if current is not None:
        if current.get("reason", "") not in ("", reason):
            return None
        if current.get("status") == "True":
            return None
    cond = new_condition(EVACUATION_INITIATED, "True", reason=reason, message=message, now=now)
    uid = (pod.get("metadata") or {}).get("uid")
    return pod_condition_patch(cond, uid=str(uid) if uid else None)
