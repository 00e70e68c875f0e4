"""What an operator graphs and alerts on during a rolling maintenance (docs/rolling-maintenance.md).

- `aiokcm_nodemaintenance_gate_evaluations_total` (counter, by `gate`: the gate's type, `nodeReady`,
  `workloads`, `prometheus` or `alertmanager`; and `result`: `Successful`, `Failed`, `Inconclusive`
  or `Error`): one per measurement or check of a gate;
- `aiokcm_nodemaintenance_rollout_nodes` (gauge, by `maintenance` and `state`: `completed`, `total`):
  a rolling maintenance's nodes done and selected, the dashboard's progress bar;
- `aiokcm_nodemaintenance_rollout_paused` (gauge, by `maintenance` and `reason`: `GateFailed`,
  `GateInconclusive`, `GateError`, `AlertFiring`, `PausedBySpec`): 1 while a maintenance is paused
  for that reason. The alert "paused by a gate, a person must look" is
  `aiokcm_nodemaintenance_rollout_paused{reason=~"GateFailed|GateInconclusive|GateError"} == 1`.

The controller calls the helpers below; a maintenance's series go when `forget` is called (the
object deleted, or no longer rolling), so a finished rollout leaves nothing stale behind. The
registry is prometheus-client's default, as in `metrics.py`, which `/metrics` serves.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

# The label values the controller writes (the alerts match on them; tests/manager/test_monitoring.py).
GATE_TYPES = ("nodeReady", "workloads", "prometheus", "alertmanager")
GATE_RESULTS = ("Successful", "Failed", "Inconclusive", "Error")
STATE_COMPLETED = "completed"
STATE_TOTAL = "total"
STATES = (STATE_COMPLETED, STATE_TOTAL)
PAUSED_REASONS = ("GateFailed", "GateInconclusive", "GateError", "AlertFiring", "PausedBySpec")

GATE_EVALUATIONS = Counter(
    "aiokcm_nodemaintenance_gate_evaluations_total",
    "Health gate evaluations of rolling maintenances, by gate type and result",
    ["gate", "result"],
)
ROLLOUT_NODES = Gauge(
    "aiokcm_nodemaintenance_rollout_nodes",
    "Nodes of a rolling maintenance, completed and selected in total",
    ["maintenance", "state"],
)
ROLLOUT_PAUSED = Gauge(
    "aiokcm_nodemaintenance_rollout_paused",
    "1 while a rolling maintenance is paused, by the reason",
    ["maintenance", "reason"],
)

# What each maintenance has series for, so that a new reason, a resume or `forget` removes exactly
# those (prometheus-client has no public way to list a metric's children, and in older versions removing
# a child it does not have raises).
_paused: dict[str, str] = {}
_progress: set[str] = set()


def count_gate(gate: str, result: str) -> None:
    """One evaluation of a gate of type `gate` with `result`."""
    GATE_EVALUATIONS.labels(gate, result).inc()


def set_progress(maintenance: str, *, completed: int, total: int) -> None:
    ROLLOUT_NODES.labels(maintenance, STATE_COMPLETED).set(completed)
    ROLLOUT_NODES.labels(maintenance, STATE_TOTAL).set(total)
    _progress.add(maintenance)


def set_paused(maintenance: str, reason: str | None) -> None:
    """Paused for `reason` (its series reads 1, another reason's goes), or not paused (None: every
    reason's series of the maintenance goes)."""
    old = _paused.pop(maintenance, None)
    if old is not None and old != reason:
        ROLLOUT_PAUSED.remove(maintenance, old)
    if reason is not None:
        ROLLOUT_PAUSED.labels(maintenance, reason).set(1)
        _paused[maintenance] = reason


def forget(maintenance: str) -> None:
    """Remove every series of `maintenance` (deleted, or no longer rolling)."""
    set_paused(maintenance, None)
    if maintenance in _progress:
        _progress.discard(maintenance)
        for state in STATES:
            ROLLOUT_NODES.remove(maintenance, state)


__all__ = [
    "GATE_RESULTS",
    "GATE_TYPES",
    "PAUSED_REASONS",
    "STATES",
    "count_gate",
    "forget",
    "set_paused",
    "set_progress",
]
