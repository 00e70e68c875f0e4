"""The NodeMaintenance API as the controller reads it, and the names it writes onto other objects.

`Maintenance` is a frozen view of one object's spec so that planning code works on typed values
instead of reaching into dicts; the raw object stays the source for writes (patches).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controllers.common.evacuation import (
    EVACUATION_INITIATED,
    EVACUATION_REQUEST,
    REASON_NODE_MAINTENANCE,
)
from controllers.nodemaintenance.drain import DrainOptions
from controllers.nodemaintenance.rollout import DEFAULT_MAX_CONCURRENT_NODES, LimitError, scaled
from kubeutil.selectors import SelectorError, parse
from maintenancerollout import spec as rolling_spec

GROUP = "maintenance.aiokcm.io"
FINALIZER = f"{GROUP}/finalizer"
# On nodes: the phase of the most advanced maintenance (KEP: "advertise the current phase").
PHASE_ANNOTATION = f"{GROUP}/phase"
# On nodes: the maintenances currently applied there (comma-separated, sorted). Written last in a node
# sync, after pods and cordon, so that it is the commit record a deleted maintenance waits on.
MAINTENANCES_ANNOTATION = f"{GROUP}/maintenances"
# On nodes: `spec.unschedulable` as it was before the first maintenance cordoned the node; present
# exactly while some maintenance holds the cordon.
ORIGINAL_UNSCHEDULABLE_ANNOTATION = f"{GROUP}/original-unschedulable"

# Pod conditions from the KEP (PodConditionType and the requester's reason) live in controllers.common.
__all__ = [
    "EVACUATION_INITIATED",
    "EVACUATION_REQUEST",
    "REASON_NODE_MAINTENANCE",
]

DEFAULT_EVACUATION_TIMEOUT_SECONDS = 180.0

# spec.evictionAPI: how pods are asked to leave (see evictionrequests.py for the second way).
EVICTION_API_POD_CONDITION = "PodCondition"
EVICTION_API_EVICTION_REQUEST = "EvictionRequest"
EVICTION_APIS = (EVICTION_API_POD_CONDITION, EVICTION_API_EVICTION_REQUEST)

# Node phases, in the order a maintenance advances through them.
PHASE_PLANNING = "Planning"
PHASE_WAITING_FOR_LEASE = "WaitingForLease"
PHASE_CORDONED = "Cordoned"
PHASE_DRAINING = "Draining"
PHASE_DRAINED = "Drained"
PHASE_ORDER = (PHASE_PLANNING, PHASE_WAITING_FOR_LEASE, PHASE_CORDONED, PHASE_DRAINING, PHASE_DRAINED)
# In status only: a selected node the maintenance has not started on (its limit, or the cluster's).
PHASE_WAITING = "Waiting"
# In status only: a selected node that was deleted before it drained (its pods went with it, unasked).
PHASE_NODE_NOT_FOUND = "NodeNotFound"


@dataclass(frozen=True, slots=True)
class Maintenance:
    """What the controller needs of one NodeMaintenance."""

    name: str
    uid: str
    generation: int
    created: str
    selector: Mapping[str, Any]
    cordon: bool
    drain: bool
    reason: str
    evacuation_timeout: float
    deleting: bool
    has_finalizer: bool
    options: DrainOptions = field(default_factory=DrainOptions)
    invalid: str = ""  # why the spec cannot be acted on (the drain then touches no pod)
    max_concurrent_nodes: int | str = DEFAULT_MAX_CONCURRENT_NODES  # an integer or "N%" of the selected nodes
    override_max_unschedulable: bool = False
    eviction_api: str = EVICTION_API_POD_CONDITION
    #: `spec.completion` and what goes with it (`maintenancerollout.spec`); None: not a rolling one
    rolling: rolling_spec.RollingSpec | None = None

    @property
    def by_eviction_request(self) -> bool:
        """Pods are asked to leave through EvictionRequests rather than the pod condition."""
        return self.eviction_api == EVICTION_API_EVICTION_REQUEST

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> Maintenance:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        timeout = spec.get("evacuationTimeoutSeconds")
        drain = bool(spec.get("drain", False))
        options, invalid = _drain_options(spec)
        limit, limit_invalid = _max_concurrent(spec)
        eviction_api = spec.get("evictionAPI") or EVICTION_API_POD_CONDITION
        api_invalid = (
            ""
            if eviction_api in EVICTION_APIS
            else f"spec.evictionAPI: {eviction_api!r} is not one of {', '.join(EVICTION_APIS)}"
        )
        rolling, rolling_invalid = _rolling(spec)
        return cls(
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            generation=int(meta.get("generation") or 0),
            created=str(meta.get("creationTimestamp") or ""),
            selector=spec.get("nodeSelector") or {},
            # The CRD rejects drain without cordon; treat a stray one (no validation on the server)
            # as cordoned too, because draining pods onto a schedulable node just reschedules them there.
            cordon=bool(spec.get("cordon", False)) or drain,
            drain=drain,
            reason=str(spec.get("reason") or ""),
            evacuation_timeout=(
                float(timeout) if isinstance(timeout, int | float) else DEFAULT_EVACUATION_TIMEOUT_SECONDS
            ),
            deleting=bool(meta.get("deletionTimestamp")),
            has_finalizer=FINALIZER in (meta.get("finalizers") or []),
            options=options,
            invalid="; ".join(filter(None, (invalid, limit_invalid, api_invalid, rolling_invalid))),
            max_concurrent_nodes=limit,
            override_max_unschedulable=spec.get("overrideMaxUnschedulable") is True,
            eviction_api=str(eviction_api) if eviction_api in EVICTION_APIS else EVICTION_API_POD_CONDITION,
            rolling=rolling,
        )

    @property
    def active(self) -> bool:
        """Still wanted: a maintenance being deleted is undone, whatever its spec says."""
        return not self.deleting

    @property
    def paced(self) -> bool:
        """Whether the limits apply: only a maintenance that cordons or drains disrupts anything."""
        return self.cordon or self.drain

    def concurrent_nodes(self, selected: int) -> int:
        """`spec.maxConcurrentNodes` for `selected` nodes (an invalid value is reported; 1 meanwhile)."""
        try:
            return scaled(self.max_concurrent_nodes, selected, field_name="spec.maxConcurrentNodes")
        except LimitError:
            return DEFAULT_MAX_CONCURRENT_NODES

    @property
    def holder(self) -> str:
        """The identity this maintenance uses towards node leases."""
        return f"aiokcm/nodemaintenance/{self.name}"


def _drain_options(spec: Mapping[str, Any]) -> tuple[DrainOptions, str]:
    """`kubectl drain`'s flags from the spec; an unparsable `podSelector` is reported, never guessed."""
    grace = spec.get("gracePeriodSeconds")
    raw_selector = spec.get("podSelector")
    selector = None
    invalid = ""
    if isinstance(raw_selector, str) and raw_selector.strip():
        try:
            selector = parse(raw_selector)
        except SelectorError as exc:
            invalid = f"spec.podSelector: {exc}"
    options = DrainOptions(
        force=spec.get("force") is True,
        delete_emptydir_data=spec.get("deleteEmptyDirData") is True,
        pod_selector=selector,
        grace_period_seconds=int(grace)
        if isinstance(grace, int) and not isinstance(grace, bool) and grace >= 0
        else None,
    )
    return options, invalid


def _rolling(spec: Mapping[str, Any]) -> tuple[rolling_spec.RollingSpec | None, str]:
    """The rolling part of the spec, or why it cannot be acted on. An invalid one still makes the
    maintenance a paused rolling one that completes nothing by itself, so nothing it started is
    released early, and nothing new starts, while the spec waits to be fixed."""
    try:
        return rolling_spec.parse(spec), ""
    except rolling_spec.SpecError as exc:
        return rolling_spec.RollingSpec(completion=rolling_spec.COMPLETION_ANNOTATION, paused=True), str(exc)


def _max_concurrent(spec: Mapping[str, Any]) -> tuple[int | str, str]:
    """`spec.maxConcurrentNodes` as given, or why it is not a limit (the CRD rejects it; a server without
    the schema does not)."""
    raw = spec.get("maxConcurrentNodes")
    if raw is None:
        return DEFAULT_MAX_CONCURRENT_NODES, ""
    try:
        scaled(raw, 100, field_name="spec.maxConcurrentNodes")
    except LimitError as exc:
        return DEFAULT_MAX_CONCURRENT_NODES, str(exc)
    return raw, ""


def applied_maintenances(node: Mapping[str, Any]) -> list[str]:
    """The maintenances the node's annotation says are applied to it."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(MAINTENANCES_ANNOTATION) or ""
    return sorted({part for part in raw.split(",") if part})


#: The node index by applied maintenance: a maintenance finds the nodes it holds without a
#: pass over every node.
APPLIED_MAINTENANCES_INDEX = "maintenance.aiokcm.io/applied"


def oldest_first(maintenances: list[Maintenance]) -> list[Maintenance]:
    """Oldest first (then by name): the one whose reason a pod's request carries when several drain."""
    return sorted(maintenances, key=lambda m: (m.created, m.name))
