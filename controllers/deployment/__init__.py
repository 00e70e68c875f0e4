"""The Deployment controller: KCM's `deployment` controller plus evacuation by surge (KEP-4212).

See `controller` for the wiring, `sync` / `rolling` / `recreate` / `rollback` / `progress` for the
reconcile as Kubernetes writes it, `util` for the arithmetic and `evacuation` for moving pods off
nodes under maintenance.
"""

from controllers.deployment.controller import DeploymentController

__all__ = ["DeploymentController"]
