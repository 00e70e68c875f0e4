"""The RollingUpdate strategy, as `pkg/controller/deployment/rolling.go`.

Each sync takes one step: grow the new ReplicaSet as far as `maxSurge` allows; if nothing grew,
shrink old ReplicaSets as far as `maxUnavailable` allows (unhealthy old pods first, since removing
them costs no availability); when the rollout is complete, clean up history. Steps are driven by
ReplicaSet status changes, so the controller never waits inside a sync.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import structlog

from controllers.common.deploymentstrategy import max_unavailable, replicas
from controllers.common.evacuation import has_evacuation_request
from controllers.common.pods import is_pod_active, is_pod_available
from controllers.deployment import progress
from controllers.deployment.sync import RS, DeploymentSync
from controllers.deployment.util import (
    available_replica_count,
    creation_key,
    filter_active,
    min_ready_seconds,
    name_of,
    new_rs_new_replicas,
    replica_count,
    status_int,
    uid_of,
)
from kubeutil.timestamps import utcnow

log = structlog.get_logger()

Obj = Mapping[str, Any]


async def rollout_rolling(
    s: DeploymentSync, d: RS, rs_list: Sequence[RS], pod_map: Mapping[str, Sequence[Obj]] | None = None
) -> None:
    """`rolloutRolling`: one step of a rolling update, then the rollout status."""
    new_rs, old_rss = await s.get_all_replica_sets_and_sync_revision(d, rs_list, create_if_not_existed=True)
    all_rss: list[RS | None] = [*old_rss, new_rs]
    if new_rs is not None and await reconcile_new_replica_set(s, all_rss, new_rs, d):
        await s.sync_rollout_status(all_rss, new_rs, d)
        return
    failures: list[Exception] = []
    if await reconcile_old_replica_sets(
        s, all_rss, filter_active(old_rss), new_rs, d, pod_map or {}, failures=failures
    ):
        await s.sync_rollout_status(all_rss, new_rs, d)
        return
    if progress.deployment_complete(d, d.get("status") or {}):
        await s.cleanup_deployment(old_rss, d)
    await s.sync_rollout_status(all_rss, new_rs, d)
    if failures:
        # KCM swallows a failed scale-down and waits for the ReplicaSet's next event; after a
        # dropped write there may be none (the status above may not change), and the rollout
        # would stall. Raised after the status, it brings the key back rate-limited instead.
        raise failures[0]


async def reconcile_new_replica_set(
    s: DeploymentSync, all_rss: Sequence[RS | None], new_rs: RS, d: RS
) -> bool:
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
    s: DeploymentSync,
    all_rss: Sequence[RS | None],
    old_rss: list[RS],
    new_rs: RS | None,
    d: RS,
    pod_map: Mapping[str, Sequence[Obj]],
    *,
    failures: list[Exception] | None = None,
) -> bool:
    """`reconcileOldReplicaSets`: scale old ReplicaSets down without breaking maxUnavailable.

    A failed write is "nothing scaled", as in KCM; it is appended to `failures` when given."""
    if replica_count(old_rss) == 0:
        return False
    all_pods = replica_count(all_rss)
    min_available = replicas(d) - max_unavailable(d)
    new_unavailable = replicas(new_rs) - status_int(new_rs, "availableReplicas") if new_rs is not None else 0
    max_scaled_down = all_pods - min_available - new_unavailable
    if max_scaled_down <= 0:
        return False
    # A failed scale-down is not this sync's error, as in KCM: the step reports "nothing scaled"
    # and the sync goes on to the rollout status (the ReplicaSet's next event brings it back).
    try:
        old_rss, cleaned = await cleanup_unhealthy_replicas(s, old_rss, d, max_scaled_down, pod_map)
    except Exception as exc:
        log.info("cleaning up unhealthy replicas failed", deployment=name_of(d), error=str(exc))
        if failures is not None:
            failures.append(exc)
        return False
    try:
        scaled_down = await scale_down_old_replica_sets_for_rolling_update(s, [*old_rss, new_rs], old_rss, d)
    except Exception as exc:
        log.info("scaling down old replica sets failed", deployment=name_of(d), error=str(exc))
        if failures is not None:
            failures.append(exc)
        return False
    return cleaned + scaled_down > 0


async def cleanup_unhealthy_replicas(
    s: DeploymentSync, old_rss: list[RS], d: RS, max_cleanup: int, pod_map: Mapping[str, Sequence[Obj]]
) -> tuple[list[RS], int]:
    """Scale old ReplicaSets down by their unavailable pods, oldest first, up to `max_cleanup`.

    KCM relies on the ReplicaSet controller deleting not-ready pods first, so this costs no
    availability. Ours deletes evacuation-requested pods before anything else, so the count is
    also capped by `unhealthy_deletions_first` (a ready requested pod must not go here).
    """
    out = sorted(old_rss, key=creation_key)
    total = 0
    for i, rs in enumerate(out):
        if total >= max_cleanup:
            break
        if replicas(rs) == 0 or replicas(rs) == status_int(rs, "availableReplicas"):
            continue
        count = min(max_cleanup - total, replicas(rs) - status_int(rs, "availableReplicas"))
        pods = pod_map.get(uid_of(rs))
        if pods is not None:
            count = min(count, unhealthy_deletions_first(pods, min_ready_seconds(d), utcnow()))
        if count <= 0:
            continue
        _, out[i] = await s.scale_replica_set_and_record_event(rs, replicas(rs) - count, d)
        total += count
    return out, total


def unhealthy_deletions_first(pods: Sequence[Obj], min_ready: int, now: datetime) -> int:
    """How many pods a scale-down removes before reaching an available one.

    Deletion order is requested pods first (not-ready ones first among them), then the rest
    (not-ready first). Without requested pods this is just the unavailable count.
    """
    active = [p for p in pods if is_pod_active(p)]
    requested = [p for p in active if has_evacuation_request(p)]
    unavailable_requested = sum(1 for p in requested if not is_pod_available(p, min_ready, now))
    if unavailable_requested < len(requested):
        return unavailable_requested
    rest = [p for p in active if not has_evacuation_request(p)]
    return len(requested) + sum(1 for p in rest if not is_pod_available(p, min_ready, now))


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
