"""Helpers every controller shares, written once: pod state and ranking, pod condition writes,
controller references and adoption, expectations, pod templates, a Deployment's surge budget, and
the KEP-4212 evacuation vocabulary. Controllers never import one another: what two of them need
lives here; the plain Kubernetes vocabulary below them (time, conditions, taints, node affinity)
lives in `kubeutil`, where the local cluster can share it too.

Import from the submodules (`controllers.common.pods`, `.ranking`, ...); the most used names are
re-exported here for convenience.
"""

from controllers.common.controller_ref import (
    ControllerRefManager,
    get_controller_of,
    new_controller_ref,
)
from controllers.common.evacuation import (
    EVACUATION_INITIATED,
    EVACUATION_REQUEST,
    evacuation_initiated,
    has_evacuation_request,
)
from controllers.common.expectations import ControllerExpectations, UIDTrackingControllerExpectations
from controllers.common.pods import is_pod_active, is_pod_available, is_pod_ready, is_terminating, pod_key
from controllers.common.podtemplate import pod_from_template
from controllers.common.ranking import pods_to_delete, sort_active_pods_with_ranks

__all__ = [
    "EVACUATION_INITIATED",
    "EVACUATION_REQUEST",
    "ControllerExpectations",
    "ControllerRefManager",
    "UIDTrackingControllerExpectations",
    "evacuation_initiated",
    "get_controller_of",
    "has_evacuation_request",
    "is_pod_active",
    "is_pod_available",
    "is_pod_ready",
    "is_terminating",
    "new_controller_ref",
    "pod_from_template",
    "pod_key",
    "pods_to_delete",
    "sort_active_pods_with_ranks",
]
