"""The Recreate strategy, as `pkg/controller/deployment/recreate.go`.

Scale every old ReplicaSet to zero, wait until none of their pods is left running (terminating
pods count: two versions must never run side by side), then create and scale up the new one.
Pod deletions wake the Deployment up (see the controller's pod handler).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controllers.common.deploymentstrategy import replicas
from controllers.common.pods import is_pod_terminal
from controllers.deployment import progress
from controllers.deployment.sync import RS, DeploymentSync
from controllers.deployment.util import actual_replica_count, filter_active, uid_of


async def rollout_recreate(
    s: DeploymentSync, d: RS, rs_list: Sequence[RS], pod_map: Mapping[str, Sequence[Mapping[str, Any]]]
) -> None:
    """`rolloutRecreate`: one step of a recreate rollout, then the rollout status."""
    new_rs, old_rss = await s.get_all_replica_sets_and_sync_revision(d, rs_list, create_if_not_existed=False)
    all_rss: list[RS | None] = [*old_rss, new_rs]
    if await scale_down_old_replica_sets_for_recreate(s, filter_active(old_rss), d):
        await s.sync_rollout_status(all_rss, new_rs, d)
        return
    if old_pods_running(new_rs, old_rss, pod_map):
        await s.sync_rollout_status(all_rss, new_rs, d)
        return
    if new_rs is None:
        new_rs, old_rss = await s.get_all_replica_sets_and_sync_revision(
            d, rs_list, create_if_not_existed=True
        )
        all_rss = [*old_rss, new_rs]
    if new_rs is not None:
        await s.scale_replica_set_and_record_event(new_rs, replicas(d), d)
    if progress.deployment_complete(d, d.get("status") or {}):
        await s.cleanup_deployment(old_rss, d)
    await s.sync_rollout_status(all_rss, new_rs, d)


async def scale_down_old_replica_sets_for_recreate(s: DeploymentSync, old_rss: list[RS], d: RS) -> bool:
    """`scaleDownOldReplicaSetsForRecreate`: scale every old ReplicaSet to zero; whether any was.

    Each one scaled is replaced in `old_rss` by the ReplicaSet the write returned."""
    scaled_any = False
    for i, rs in enumerate(old_rss):
        if replicas(rs) == 0:
            continue
        scaled, updated = await s.scale_replica_set_and_record_event(rs, 0, d)
        if scaled:
            old_rss[i] = updated
            scaled_any = True
    return scaled_any


def old_pods_running(
    new_rs: RS | None, old_rss: Sequence[RS], pod_map: Mapping[str, Sequence[Mapping[str, Any]]]
) -> bool:
    """`oldPodsRunning`: any old ReplicaSet still reports pods, or any non-terminal old pod exists."""
    if actual_replica_count(old_rss) > 0:
        return True
    new_uid = uid_of(new_rs) if new_rs is not None else None
    for rs_uid, pods in pod_map.items():
        if rs_uid == new_uid:
            continue
        if any(not is_pod_terminal(p) for p in pods):
            return True
    return False
