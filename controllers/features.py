"""The feature-gate names, the one place each gate's spelling is written.

They live at the controllers' layer because controllers ask `ctx.gates.enabled(...)` and may not
import the manager; the manager's `controller_manager.features` gives each name its stage and
default, and the registry's rows name the gates a controller needs with these same constants.
"""

from __future__ import annotations

from typing import Final

DECLARATIVE_NODE_MAINTENANCE: Final = "DeclarativeNodeMaintenance"
NODE_MAINTENANCE_DEPLOYMENT: Final = "NodeMaintenanceDeployment"
NODE_MAINTENANCE_LEASE: Final = "NodeMaintenanceLease"
SEPARATE_TAINT_EVICTION_CONTROLLER: Final = "SeparateTaintEvictionController"
EVICTION_SURGE: Final = "EvictionSurge"
# KEP-4563's EvictionRequest API and its controllers (upstream's gate name, alpha).
EVICTION_REQUEST_API: Final = "EvictionRequestAPI"
# Kubernetes' own ReplicaSet scale-down gates (beta, on by default since 1.22).
POD_DELETION_COST: Final = "PodDeletionCost"
LOGARITHMIC_SCALE_DOWN: Final = "LogarithmicScaleDown"

ALL: Final = (
    DECLARATIVE_NODE_MAINTENANCE,
    NODE_MAINTENANCE_DEPLOYMENT,
    NODE_MAINTENANCE_LEASE,
    SEPARATE_TAINT_EVICTION_CONTROLLER,
    EVICTION_SURGE,
    EVICTION_REQUEST_API,
    POD_DELETION_COST,
    LOGARITHMIC_SCALE_DOWN,
)

# Gates a plain mapping that does not name them reads as on: Kubernetes' beta gates whose code
# paths this project has always taken, so only an explicit `false` turns them off.
ON_UNLESS_SET: Final = frozenset({POD_DELETION_COST, LOGARITHMIC_SCALE_DOWN})
