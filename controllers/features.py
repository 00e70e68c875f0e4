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

ALL: Final = (
    DECLARATIVE_NODE_MAINTENANCE,
    NODE_MAINTENANCE_DEPLOYMENT,
    NODE_MAINTENANCE_LEASE,
    SEPARATE_TAINT_EVICTION_CONTROLLER,
    EVICTION_SURGE,
)
