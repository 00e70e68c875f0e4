"""Zones and their health, as `node_lifecycle_controller.go` judges them.

A zone is the pair (region, zone) of a node's topology labels. Its state comes from the Ready
conditions of its nodes (nodes labelled `node.kubernetes.io/exclude-disruption` do not count):

- FullDisruption: no node Ready and at least one not;
- PartialDisruption: more than 2 nodes not Ready and at least `unhealthy_zone_threshold` of them;
- Normal otherwise.

The state picks the zone's tainting rate: Normal -> `--node-eviction-rate`; PartialDisruption ->
`--secondary-node-eviction-rate` in a zone larger than `--large-cluster-size-threshold`, else 0
(a small zone in trouble is probably a control-plane-side problem: stop); FullDisruption -> the
normal rate again (the zone is really down, move its pods elsewhere) unless *every* zone is fully
disrupted, when the controller is the one likely cut off, so all tainting stops and the
unreachable / not-ready taints are removed.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping, Sequence
from typing import Any

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
BETA_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"
EXCLUDE_DISRUPTION_LABEL = "node.kubernetes.io/exclude-disruption"


class ZoneState(enum.Enum):
    INITIAL = "Initial"
    NORMAL = "Normal"
    FULL_DISRUPTION = "FullDisruption"
    PARTIAL_DISRUPTION = "PartialDisruption"


def zone_key(node: Mapping[str, Any]) -> str:
    """`nodetopology.GetZoneKey`: "region:\\x00:zone", or "" for a node with neither label."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    region = labels.get(REGION_LABEL) or labels.get(BETA_REGION_LABEL) or ""
    zone = labels.get(ZONE_LABEL) or labels.get(BETA_ZONE_LABEL) or ""
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


def excluded_from_disruption(node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return EXCLUDE_DISRUPTION_LABEL in labels


def _float32(x: float) -> float:
    """`x` rounded to a float32, as Go holds the threshold and the ratio it is compared with."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def compute_zone_state(
    ready_statuses: Sequence[str | None], unhealthy_threshold: float
) -> tuple[int, ZoneState]:
    """`ComputeZoneState` over the zone's Ready statuses (None = no Ready condition).

    Returns the number of nodes not Ready and the state. The ratio is compared in float32, as
    in Go, so a ratio within float32 rounding of the threshold counts as reaching it.
    """
    ready = sum(1 for s in ready_statuses if s == "True")
    not_ready = len(ready_statuses) - ready
    if ready == 0 and not_ready > 0:
        return not_ready, ZoneState.FULL_DISRUPTION
    if not_ready > 2 and _float32(not_ready / (not_ready + ready)) >= _float32(unhealthy_threshold):
        return not_ready, ZoneState.PARTIAL_DISRUPTION
    return not_ready, ZoneState.NORMAL


def zone_rate(
    state: ZoneState,
    zone_size: int,
    *,
    eviction_rate: float,
    secondary_rate: float,
    large_cluster_threshold: int,
) -> float:
    """The tainting rate for a zone in `state` (`setLimiterInZone`)."""
    if state is ZoneState.PARTIAL_DISRUPTION:
        return secondary_rate if zone_size > large_cluster_threshold else 0.0
    return eviction_rate
