"""One rolling maintenance's state machine: records read from its status, decisions as values.

Everything a rollout has decided is written to the NodeMaintenance's status before it acts on
it (a node marked `Gating` before it is uncordoned, `Completed` before the next one starts), so
these records are the whole memory: a manager killed at any line reads them back and neither
repeats a node nor skips one or a gate. The functions here decide from the records, the cached
node and the gates' results; the controller does the requests and writes.

A node goes `InMaintenance` once drained, `Gating` when its completion is seen (it is released
then), and `Completed` when every gate passed. A gate's result is Argo Rollouts' (`analysis.py`);
`nodeReady` and `workloads` are judged from the caches (`health.py`) and fail only at their
deadline. What holds the next start back (`hold`) is checked in a fixed order: an abort, a
pause by spec or by a gate, a closed window, the soak time, and last the Alertmanager gates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from kubeutil.timestamps import format_time, parse_time
from maintenancerollout import health
from maintenancerollout import spec as rspec
from maintenancerollout.analysis import Measurement, Result, Tally, outcome
from maintenancerollout.windows import is_open, next_open

Obj = Mapping[str, Any]

NODE_IN_MAINTENANCE = "InMaintenance"
NODE_GATING = "Gating"
NODE_COMPLETED = "Completed"
RELEASED = frozenset({NODE_GATING, NODE_COMPLETED})

PHASE_WAITING_FOR_WINDOW = "WaitingForWindow"
PHASE_DRAINING = "Draining"
PHASE_IN_MAINTENANCE = "InMaintenance"
PHASE_GATING = "Gating"
PHASE_SOAKING = "Soaking"
PHASE_PENDING = "Pending"
PHASE_PAUSED = "Paused"
PHASE_ABORTED = "Aborted"
PHASE_COMPLETED = "Completed"

PAUSED_BY_SPEC = "PausedBySpec"
PAUSED_GATE_FAILED = "GateFailed"
PAUSED_GATE_INCONCLUSIVE = "GateInconclusive"
PAUSED_GATE_ERROR = "GateError"
PAUSED_ALERT_FIRING = "AlertFiring"

COMPLETE_ANNOTATION = "maintenance.aiokcm.io/maintenance-complete"
RESUME_ANNOTATION = "maintenance.aiokcm.io/resume-requested"
# A node's workloads are recorded for its gate; a node with more owners than this is judged on these.
MAX_RECORDED_WORKLOADS = 64


def _time(raw: object) -> datetime | None:
    return parse_time(raw) if raw else None


def _fmt(value: datetime | None) -> str | None:
    return format_time(value) if value is not None else None


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """What the rollout remembers of one node, beside the drain's own counts."""

    phase: str = ""
    boot_id: str = ""
    workloads: tuple[str, ...] = ()
    drained_time: datetime | None = None
    completed_time: datetime | None = None

    @classmethod
    def from_status(cls, raw: object) -> NodeRecord:
        if not isinstance(raw, Mapping):
            return cls()
        workloads = raw.get("workloads")
        return cls(
            phase=str(raw.get("phase") or ""),
            boot_id=str(raw.get("bootID") or ""),
            workloads=tuple(str(w) for w in workloads) if isinstance(workloads, list) else (),
            drained_time=_time(raw.get("drainedTime")),
            completed_time=_time(raw.get("completedTime")),
        )

    def as_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.boot_id:
            out["bootID"] = self.boot_id
        if self.workloads and self.phase != NODE_COMPLETED:
            out["workloads"] = list(self.workloads)
        if self.drained_time is not None:
            out["drainedTime"] = format_time(self.drained_time)
        if self.completed_time is not None:
            out["completedTime"] = format_time(self.completed_time)
        return out


@dataclass(frozen=True, slots=True)
class GateState:
    """One gate's round for one node: Argo's counts, its last value and when it runs next."""

    name: str
    type: str
    node: str
    result: str = Result.RUNNING.value
    value: str = ""
    message: str = ""
    tally: Tally = field(default_factory=Tally)
    start_time: datetime | None = None
    last_evaluation: datetime | None = None
    next_evaluation: datetime | None = None

    @property
    def done(self) -> bool:
        return self.result != Result.RUNNING.value

    @classmethod
    def from_status(cls, raw: object) -> GateState | None:
        if not isinstance(raw, Mapping) or not raw.get("name"):
            return None
        return cls(
            name=str(raw.get("name")),
            type=str(raw.get("type") or ""),
            node=str(raw.get("node") or ""),
            result=str(raw.get("result") or Result.RUNNING.value),
            value=str(raw.get("value") or ""),
            message=str(raw.get("message") or ""),
            tally=Tally.from_status(raw),
            start_time=_time(raw.get("startTime")),
            last_evaluation=_time(raw.get("lastEvaluationTime")),
            next_evaluation=_time(raw.get("nextEvaluationTime")),
        )

    def as_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "node": self.node,
            "result": self.result,
            **self.tally.as_status(),
        }
        if self.value:
            out["value"] = self.value
        if self.message:
            out["message"] = self.message
        for key, when in (
            ("startTime", self.start_time),
            ("lastEvaluationTime", self.last_evaluation),
            ("nextEvaluationTime", self.next_evaluation),
        ):
            if when is not None:
                out[key] = format_time(when)
        return out


@dataclass(frozen=True, slots=True)
class Rollout:
    """`status.rollout` and `status.gates`."""

    paused_reason: str = ""
    paused_message: str = ""
    paused_time: datetime | None = None
    aborted_reason: str = ""
    aborted_message: str = ""
    aborted_time: datetime | None = None
    last_completion_time: datetime | None = None
    resume_honoured: str = ""
    gates: tuple[GateState, ...] = ()

    @property
    def aborted(self) -> bool:
        return bool(self.aborted_reason)

    @classmethod
    def from_status(cls, status: Obj) -> Rollout:
        raw = status.get("rollout")
        r = raw if isinstance(raw, Mapping) else {}
        gates = tuple(
            g for g in (GateState.from_status(x) for x in status.get("gates") or []) if g is not None
        )
        return cls(
            paused_reason=str(r.get("pausedReason") or ""),
            paused_message=str(r.get("pausedMessage") or ""),
            paused_time=_time(r.get("pausedTime")),
            aborted_reason=str(r.get("abortedReason") or ""),
            aborted_message=str(r.get("abortedMessage") or ""),
            aborted_time=_time(r.get("abortedTime")),
            last_completion_time=_time(r.get("lastCompletionTime")),
            resume_honoured=str(r.get("resumeHonoured") or ""),
            gates=gates,
        )

    def rollout_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in (
            ("pausedReason", self.paused_reason),
            ("pausedMessage", self.paused_message),
            ("pausedTime", _fmt(self.paused_time)),
            ("abortedReason", self.aborted_reason),
            ("abortedMessage", self.aborted_message),
            ("abortedTime", _fmt(self.aborted_time)),
            ("lastCompletionTime", _fmt(self.last_completion_time)),
            ("resumeHonoured", self.resume_honoured),
        ):
            if value:
                out[key] = value
        return out

    def gates_status(self) -> list[dict[str, Any]]:
        return [g.as_status() for g in self.gates]


def completion_reached(
    s: rspec.RollingSpec, *, maintenance: str, record: NodeRecord, node: Obj | None
) -> tuple[bool, str]:
    """Whether a drained node's maintenance is done, with what the rollout waits for otherwise."""
    if s.completion == rspec.COMPLETION_DRAINED:
        return True, "drained"
    if node is None:
        return False, "the node does not exist"
    if s.completion == rspec.COMPLETION_ANNOTATION:
        value = ((node.get("metadata") or {}).get("annotations") or {}).get(COMPLETE_ANNOTATION)
        if value == maintenance:
            return True, f"{COMPLETE_ANNOTATION} set"
        return False, f"waiting for {COMPLETE_ANNOTATION}={maintenance} on the node"
    current = health.boot_id(node)
    verdict = health.node_health(node)
    if not record.boot_id or current == record.boot_id:
        if not verdict.healthy:
            return False, f"waiting for the node to come back from its reboot ({verdict.message})"
        return False, "waiting for the node to reboot (its bootID has not changed)"
    if not verdict.healthy:
        return False, f"rebooted, waiting for it to be Ready ({verdict.message})"
    return True, "rebooted and Ready"


def start_round(
    s: rspec.RollingSpec, *, node: str, now: datetime, kept: Sequence[GateState] = ()
) -> tuple[GateState, ...]:
    """The gates of `node`'s round, all Running from `now` (a gate already running for it is kept)."""
    have = {g.name: g for g in kept if g.node == node}
    out: list[GateState] = []
    if s.node_ready_timeout is not None:
        out.append(
            have.get(rspec.GATE_NODE_READY)
            or GateState(rspec.GATE_NODE_READY, rspec.GATE_NODE_READY, node, start_time=now)
        )
    if s.workloads_timeout is not None:
        out.append(GateState(rspec.GATE_WORKLOADS, rspec.GATE_WORKLOADS, node, start_time=now))
    for g in s.prometheus:
        out.append(GateState(g.name, rspec.GATE_PROMETHEUS, node, start_time=now, next_evaluation=now))
    return tuple(out)


def reboot_wait_gate(s: rspec.RollingSpec, *, node: str, since: datetime) -> GateState | None:
    """With `completion: Reboot`, the nodeReady gate's clock runs from the drain: a node that
    never comes back fails it while still cordoned."""
    if s.completion != rspec.COMPLETION_REBOOT or s.node_ready_timeout is None:
        return None
    return GateState(rspec.GATE_NODE_READY, rspec.GATE_NODE_READY, node, start_time=since)


def judge_deadline_gate(
    gate: GateState, *, timeout: float, verdict: health.Verdict, now: datetime, waiting_for: str = ""
) -> GateState:
    """`nodeReady` and `workloads`: Successful when healthy, Failed once the deadline passed."""
    if gate.done:
        return gate
    if verdict.healthy:
        return replace(gate, result=Result.SUCCESSFUL.value, message=verdict.message, last_evaluation=now)
    message = waiting_for or verdict.message
    if now >= deadline_of(gate, timeout, now=now):
        return replace(
            gate,
            result=Result.FAILED.value,
            message=f"not healthy within {timeout:g}s: {message}",
            last_evaluation=now,
        )
    # Looked at again from the caches, so nothing about the wait is written but what it waits for.
    return replace(gate, message=message)


def deadline_of(gate: GateState, timeout: float, *, now: datetime) -> datetime:
    return (gate.start_time or now) + timedelta(seconds=timeout)


def apply_measurement(
    gate: GateState, m: Measurement, g: rspec.PrometheusGate, *, now: datetime
) -> GateState:
    """One Prometheus measurement added to the gate's counts, and Argo's verdict on them."""
    tally = gate.tally.add(m)
    verdict = outcome(tally, g.limits)
    message = m.message or (f"{m.result.value}: {m.value}" if m.value else m.result.value)
    return replace(
        gate,
        result=verdict.value,
        value=m.value,
        message=message,
        tally=tally,
        last_evaluation=now,
        next_evaluation=None if verdict is not Result.RUNNING else now + timedelta(seconds=g.interval),
    )


def round_result(gates: Sequence[GateState], node: str) -> Result:
    """The node's round: the worst finished result (Failed, then Error, then Inconclusive),
    Running while any gate still runs, else Successful (also with no gate at all)."""
    mine = [g for g in gates if g.node == node]
    results = {g.result for g in mine}
    for bad in (Result.FAILED, Result.ERROR, Result.INCONCLUSIVE):
        if bad.value in results:
            return bad
    if Result.RUNNING.value in results:
        return Result.RUNNING
    return Result.SUCCESSFUL


def pause_reason(result: Result) -> str:
    return {
        Result.FAILED: PAUSED_GATE_FAILED,
        Result.ERROR: PAUSED_GATE_ERROR,
        Result.INCONCLUSIVE: PAUSED_GATE_INCONCLUSIVE,
    }.get(result, PAUSED_GATE_FAILED)


def first_bad(gates: Sequence[GateState], node: str, result: Result) -> GateState | None:
    return next((g for g in gates if g.node == node and g.result == result.value), None)


def resume_requested(obj: Obj, rollout: Rollout) -> str | None:
    """The resume-requested annotation when it asks for a resume not yet acted on, after the pause."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(RESUME_ANNOTATION)
    if not raw or raw == rollout.resume_honoured:
        return None
    when = parse_time(raw)
    if when is None:
        return None
    if rollout.paused_time is not None and when < rollout.paused_time:
        return None
    return str(raw)


def rerun_failed(rollout: Rollout, *, now: datetime) -> tuple[GateState, ...]:
    """A resume runs every gate that did not pass again, from the start."""
    return tuple(
        g
        if g.result == Result.SUCCESSFUL.value
        else replace(
            g,
            result=Result.RUNNING.value,
            message="",
            value="",
            tally=Tally(),
            start_time=now,
            next_evaluation=now,
        )
        for g in rollout.gates
    )


@dataclass(frozen=True, slots=True)
class Hold:
    """Why no new node may start now (empty: it may), and when to look again."""

    reason: str = ""
    message: str = ""
    wake: datetime | None = None
    next_window: datetime | None = None


def hold(s: rspec.RollingSpec, rollout: Rollout, *, now: datetime) -> Hold:
    """What keeps the next node from starting, before the Alertmanager gates are asked."""
    if rollout.aborted:
        return Hold(PHASE_ABORTED, f"aborted: {rollout.aborted_message}")
    if s.paused:
        return Hold(PAUSED_BY_SPEC, "paused: spec.paused is true")
    if rollout.paused_reason and rollout.paused_reason != PAUSED_ALERT_FIRING:
        return Hold(rollout.paused_reason, f"paused: {rollout.paused_message}")
    if s.windows and not is_open(s.windows, now):
        opens = next_open(s.windows, now)
        when = format_time(opens) if opens is not None else "never"
        return Hold(
            PHASE_WAITING_FOR_WINDOW,
            f"outside every maintenance window; the next opens at {when}",
            opens,
            opens,
        )
    if s.soak_seconds and rollout.last_completion_time is not None:
        until = rollout.last_completion_time + timedelta(seconds=s.soak_seconds)
        if now < until:
            return Hold(PHASE_SOAKING, f"soaking until {format_time(until)} (spec.soakSeconds)", until)
    return Hold()


def rollout_phase(
    *,
    rollout: Rollout,
    held: Hold,
    phases: Mapping[str, str],
    total: int,
) -> str:
    """The rollout's phase for `kubectl get nm`, from the nodes' phases and what holds it."""
    completed = sum(1 for p in phases.values() if p == NODE_COMPLETED)
    if rollout.aborted:
        return PHASE_ABORTED
    if total and completed == total:
        return PHASE_COMPLETED
    if held.reason in (
        PAUSED_BY_SPEC,
        PAUSED_GATE_FAILED,
        PAUSED_GATE_ERROR,
        PAUSED_GATE_INCONCLUSIVE,
        PAUSED_ALERT_FIRING,
    ):
        return PHASE_PAUSED
    values = set(phases.values())
    if values & {"WaitingForLease", "Cordoned", "Draining", "Drained"}:
        return PHASE_DRAINING
    if NODE_IN_MAINTENANCE in values:
        return PHASE_IN_MAINTENANCE
    if NODE_GATING in values:
        return PHASE_GATING
    if held.reason == PHASE_WAITING_FOR_WINDOW:
        return PHASE_WAITING_FOR_WINDOW
    if held.reason == PHASE_SOAKING:
        return PHASE_SOAKING
    return PHASE_PENDING
