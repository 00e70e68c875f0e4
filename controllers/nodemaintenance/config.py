"""The NodeMaintenance controller's settings, in the shape of KCM's per-controller config types.

The defaults here are the only ones: `--node-maintenance-max-unschedulable` takes its default
from this class, and the controller reads only what it is given.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeMaintenanceConfig:
    # Most nodes (a count or a percentage of all nodes) maintenances may leave unschedulable at
    # once, counting nodes cordoned by anyone (the cluster-wide guard in rollout.py).
    max_unschedulable: int | str = "50%"
    # Node syncs run on this many shards, one worker each, so one node has one writer.
    node_shards: int = 4
    # Whether this manager also runs the ReplicaSet and Deployment controllers that answer an
    # EvacuationRequest by surging. Not a flag: the manager sets it from what it runs, because
    # beside KCM's own controllers nobody answers for a Deployment's pods and the drain must not
    # wait for an answer that cannot come.
    surge_answers: bool = True
    # Whether a ReplicaSet with no Deployment answers too: the replacement surge (beside KCM's
    # controllers) surges for it one pod at a time; aiokcm's own controllers surge for Deployments only.
    bare_replicasets_answer: bool = False
