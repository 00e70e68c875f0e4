"""The stale `DisruptionTarget` reconcile: KCM's `syncStalePodDisruption`.

A pod marked `DisruptionTarget=True` by a disruption that never happened (the deletion that
should have followed failed) would be reported as about to go forever; after
`stalePodDisruptionTimeout` the condition is reset to False. The kubelet's own condition, a
terminating pod and a terminal one are left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from structlog.typing import FilteringBoundLogger

from apiclient import KubeClient
from controllers.common.pods import get_pod_condition, is_pod_terminal, is_terminating
from controllers.common.podstatus import patch_pod_condition
from informers import Lister
from kubeutil.timestamps import format_time, parse_time, utcnow

#: `stalePodDisruptionTimeout`.
STALE_POD_DISRUPTION_TIMEOUT = timedelta(minutes=2)
DISRUPTION_TARGET = "DisruptionTarget"
#: `v1.PodReasonTerminationByKubelet`: the kubelet's DisruptionTarget is never stale.
REASON_TERMINATION_BY_KUBELET = "TerminationByKubelet"


def stale_disruption_wait(pod: Mapping[str, Any], now: datetime) -> float | None:
    """`nonTerminatingPodHasStaleDisruptionCondition`: seconds until the condition is stale, or None.

    None when there is nothing to clean: no `DisruptionTarget=True`, the kubelet's own condition,
    a terminating pod (the disruption is happening) or a terminal one (no needless writes).
    """
    if is_terminating(pod):
        return None
    cond = get_pod_condition(pod, DISRUPTION_TARGET)
    if cond is None or cond.get("status") != "True" or cond.get("reason") == REASON_TERMINATION_BY_KUBELET:
        return None
    if is_pod_terminal(pod):
        return None
    since = parse_time(cond.get("lastTransitionTime"))
    if since is None:
        return 0.0
    return max(0.0, (since + STALE_POD_DISRUPTION_TIMEOUT - now).total_seconds())


@dataclass(kw_only=True, eq=False)
class StalePodDisruptionSync:
    """One pod's stale condition; `recheck(key, seconds)` looks again once it would be stale."""

    client: KubeClient
    pod_lister: Lister
    recheck: Callable[[str, float], None]
    log: FilteringBoundLogger

    async def sync(self, key: str) -> None:
        """`syncStalePodDisruption`: reset a stale `DisruptionTarget=True` to False (or look again later)."""
        pod = self.pod_lister.get_by_key(key)
        if pod is None:
            return
        now = utcnow()
        wait = stale_disruption_wait(pod, now)
        if wait is None:
            return
        if wait > 0:
            self.recheck(key, wait)
            return
        old = get_pod_condition(pod, DISRUPTION_TARGET) or {}
        cond: dict[str, Any] = {
            "type": DISRUPTION_TARGET,
            "status": "False",
            "lastTransitionTime": format_time(now),
        }
        # UpdatePodCondition replaces the whole condition: clear the old reason and message too, and
        # any probe time (not in the informer's projection: cleared blindly, a no-op when absent).
        for field_name in ("reason", "message"):
            if old.get(field_name):
                cond[field_name] = None
        cond["lastProbeTime"] = None
        await patch_pod_condition(self.client, pod, cond)
        self.log.info("reset stale DisruptionTarget condition to False", pod=key)
