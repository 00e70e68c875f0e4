"""The RollingUpdate strategy, as `pkg/controller/deployment/rolling.go`.

Each sync takes one step: grow the new ReplicaSet as far as `maxSurge` allows; if nothing grew,
shrink old ReplicaSets as far as `maxUnavailable` allows (unhealthy old pods first, since removing
them costs no availability); when the rollout is complete, clean up history. Steps are driven by
ReplicaSet status changes, so the controller never waits inside a sync.
"""

from __future__ import annotations

from collections.abc import Sequence

from controllers.deployment import progress
from controllers.deployment.sync import RS, DeploymentSync
from controllers.deployment.util import (
    available_replica_count,
    creation_key,
    filter_active,
    max_unavailable,
    new_rs_new_replicas,
    replica_count,
    replicas,
    status_int,
)


async def rollout_rolling(s: DeploymentSync, d: RS, rs_list: Sequence[RS]) -> None:
    """`rolloutRolling`: one step of a rolling update, then the rollout status."""
    new_rs, old_rss = await s.get_all_replica_sets_and_sync_revision(d, rs_list, create_if_not_existed=True)
    all_rss: list[RS | None] = [*old_rss, new_rs]
    if new_rs is not None and await reconcile_new_replica_set(s, all_rss, new_rs, d):
        await s.sync_rollout_status(all_rss, new_rs, d)
        return
    if await reconcile_old_replica_sets(s, all_rss, filter_active(old_rss), new_rs, d):
        await s.sync_rollout_status(all_rss, new_rs, d)
        return
    if progress.deployment_complete(d, d.get("status") or {}):
        await s.cleanup_deployment(old_rss, d)
    await s.sync_rollout_status(all_rss, new_rs, d)


async def reconcile_new_replica_set(s: DeploymentSync, all_rss: Sequence[RS | None], new_rs: RS, d: RS) -> bool:
    """Scale the new ReplicaSet towards spec.replicas within the surge budget."""
    if replicas(new_rs) == replicas(d):
        return False
    if replicas(new_rs) > replicas(d):
        scaled, _ = await s.scale_replica_set_and_record_event(new_rs, replicas(d), d)
        return scaled
    count = new_rs_new_replicas(d, all_rss, new_rs)
    scaled, _ = await s.scale_replica_set_and_record_event(new_rs, count, d)
    return scaled


async def reconcile_old_replica_sets(
    s: DeploymentSync, all_rss: Sequence[RS | None], old_rss: list[RS], new_rs: RS | None, d: RS
) -> bool:
    """`reconcileOldReplicaSets`: scale old ReplicaSets down without breaking maxUnavailable."""
    if replica_count(old_rss) == 0:
        return False
    all_pods = replica_count(all_rss)
    min_available = replicas(d) - max_unavailable(d)
    new_unavailable = replicas(new_rs) - status_int(new_rs, "availableReplicas") if new_rs is not None else 0
    max_scaled_down = all_pods - min_available - new_unavailable
    if max_scaled_down <= 0:
        return False
    old_rss, cleaned = await cleanup_unhealthy_replicas(s, old_rss, d, max_scaled_down)
    scaled_down = await scale_down_old_replica_sets_for_rolling_update(s, [*old_rss, new_rs], old_rss, d)
    return cleaned + scaled_down > 0


async def cleanup_unhealthy_replicas(
    s: DeploymentSync, old_rss: list[RS], d: RS, max_cleanup: int
) -> tuple[list[RS], int]:
    """Scale old ReplicaSets down by their unavailable pods, oldest first, up to `max_cleanup`."""
    out = sorted(old_rss, key=creation_key)
    total = 0
    for i, rs in enumerate(out):
        if total >= max_cleanup:
            break
        if replicas(rs) == 0 or replicas(rs) == status_int(rs, "availableReplicas"):
            continue
        count = min(max_cleanup - total, replicas(rs) - status_int(rs, "availableReplicas"))
        _, out[i] = await s.scale_replica_set_and_record_event(rs, replicas(rs) - count, d)
        total += count
    return out, total


async def scale_down_old_replica_sets_for_rolling_update(
    s: DeploymentSync, all_rss: Sequence[RS | None], old_rss: list[RS], d: RS
) -> int:
    """Scale old ReplicaSets down by what availability above `replicas - maxUnavailable` allows."""
    min_available = replicas(d) - max_unavailable(d)
    available = available_replica_count(all_rss)
    if available <= min_available:
        return 0
    budget = available - min_available
    total = 0
    for rs in sorted(old_rss, key=creation_key):
        if total >= budget:
            break
        if replicas(rs) == 0:
            continue
        count = min(replicas(rs), budget - total)
        await s.scale_replica_set_and_record_event(rs, replicas(rs) - count, d)
        total += count
    return total
