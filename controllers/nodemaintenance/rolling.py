"""The maintenance sync's rolling side: gates asked, completions seen, the next start held back.

A rolling maintenance (`spec.completion` set) releases each node once its maintenance is done
and lets the next one start only after the released node passed its gates (`maintenancerollout`
has the rules and the records). The maintenance sync calls this module in two steps:

- `prepare` (may suspend: Prometheus and Alertmanager are asked here, with timeouts) honours a
  resume, runs the gates that are due for nodes in `InMaintenance` and `Gating`, settles finished
  rounds (a node `Completed`; a pause or an abort), and asks the Alertmanager gates when a node
  might start now. It returns the records the plan works on.
- `plan` (no suspension: it runs inside the maintenance sync's node planning) moves drained nodes
  to `InMaintenance`, completed ones to `Gating` (they leave the working sets, so the node sync
  releases them), records a starting node's bootID and workloads, and says what holds starts back.

The status is written by the maintenance sync afterwards, in one patch, before any node sync acts
on the decisions; what was decided but not written is decided again from the same records.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import structlog

from controllers.context import EventRecorder
from controllers.nodemaintenance import api, rolloutmetrics
from kubeutil.timestamps import format_time
from maintenancerollout import alertmanager, health, planner, prometheus
from maintenancerollout import spec as rspec
from maintenancerollout.analysis import Measurement, Result
from maintenancerollout.planner import GateState, Hold, NodeRecord, Rollout

log = structlog.get_logger()

Obj = Mapping[str, Any]
Measure = Callable[..., Awaitable[Measurement]]
AlertCheck = Callable[..., Awaitable[alertmanager.Check]]
GATE_TIMEOUT_SECONDS = 10.0
# How often the gates judged from the caches (nodeReady, workloads) look again while they wait.
CACHE_GATE_POLL_SECONDS = 2.0


def _deadline_timeout(s: rspec.RollingSpec, gate: GateState) -> float | None:
    if gate.type == rspec.GATE_NODE_READY:
        return s.node_ready_timeout
    if gate.type == rspec.GATE_WORKLOADS:
        return s.workloads_timeout
    return None


@dataclass
class Decisions:
    """What `prepare` and `plan` decided for one sync, for the status and the node planning."""

    spec: rspec.RollingSpec
    rollout: Rollout
    records: dict[str, NodeRecord]
    hold: Hold = field(default_factory=Hold)
    #: nodes released by the rollout (Gating, Completed): out of the working sets for good
    released: set[str] = field(default_factory=set)
    #: released in this sync: let go by the node syncs only once the status says so
    newly_released: set[str] = field(default_factory=set)
    wake: datetime | None = None
    events: list[tuple[str, str, str]] = field(default_factory=list)

    def wake_at(self, when: datetime | None) -> None:
        if when is not None and (self.wake is None or when < self.wake):
            self.wake = when

    def event(self, type_: str, reason: str, message: str, **fields: Any) -> None:
        self.events.append((type_, reason, message))
        log.info(message, reason=reason, **fields)


@dataclass(kw_only=True, eq=False)
class RollingGates:
    """The gates' side effects: the two HTTP clients (swappable in tests) and the events."""

    recorder: EventRecorder
    lookup: health.Lookup
    measure: Measure = prometheus.measure
    alerts: AlertCheck = alertmanager.check
    #: maintenance name -> when the Alertmanager gates were last asked, and what they said
    alert_checks: dict[str, tuple[datetime, list[GateState]]] = field(default_factory=dict)

    def forget(self, name: str) -> None:
        self.alert_checks.pop(name, None)
        rolloutmetrics.forget(name)

    # -- prepare ---------------------------------------------------------------------------------

    async def prepare(
        self,
        obj: Obj,
        m: api.Maintenance,
        s: rspec.RollingSpec,
        previous: Obj,
        *,
        nodes: Mapping[str, Obj],
        now: datetime,
    ) -> Decisions:
        rollout = Rollout.from_status(previous)
        records = {
            name: NodeRecord.from_status(entry) for name, entry in (previous.get("nodes") or {}).items()
        }
        d = Decisions(s, rollout, records)
        d.released = {n for n, r in records.items() if r.phase in planner.RELEASED}
        if rollout.aborted:
            d.hold = planner.hold(s, rollout, now=now)
            return d
        self._resume(obj, m, d, now)
        if not s.paused and not (
            d.rollout.paused_reason and d.rollout.paused_reason != planner.PAUSED_ALERT_FIRING
        ):
            await self._run_gates(m, d, nodes=nodes, now=now)
        d.hold = planner.hold(s, d.rollout, now=now)
        d.wake_at(d.hold.wake)
        if not d.hold.reason and s.alertmanager and self._may_start(m, d, nodes):
            await self._alerts(m, d, now=now)
        elif d.rollout.paused_reason == planner.PAUSED_ALERT_FIRING and not d.hold.reason:
            d.rollout = replace(d.rollout, paused_reason="", paused_message="", paused_time=None)
        return d

    def _may_start(self, m: api.Maintenance, d: Decisions, nodes: Mapping[str, Obj]) -> bool:
        """A node may start in this sync: one is waiting and the limit has room for it."""
        phases = [d.records.get(n, NodeRecord()).phase for n in nodes]
        waiting = sum(1 for p in phases if p in ("", api.PHASE_WAITING))
        in_progress = sum(1 for p in phases if p not in ("", api.PHASE_WAITING, planner.NODE_COMPLETED))
        return waiting > 0 and in_progress < m.concurrent_nodes(len(nodes))

    def _resume(self, obj: Obj, m: api.Maintenance, d: Decisions, now: datetime) -> None:
        requested = planner.resume_requested(obj, d.rollout)
        if requested is None:
            return
        if d.rollout.paused_reason in (
            planner.PAUSED_GATE_FAILED,
            planner.PAUSED_GATE_ERROR,
            planner.PAUSED_GATE_INCONCLUSIVE,
        ):
            d.rollout = replace(
                d.rollout,
                paused_reason="",
                paused_message="",
                paused_time=None,
                resume_honoured=requested,
                gates=planner.rerun_failed(d.rollout, now=now),
            )
            d.event(
                "Normal", "RolloutResumed", "rollout resumed: its failed gates run again", maintenance=m.name
            )
        else:
            d.rollout = replace(d.rollout, resume_honoured=requested)

    async def _run_gates(
        self, m: api.Maintenance, d: Decisions, *, nodes: Mapping[str, Obj], now: datetime
    ) -> None:
        s = d.spec
        gates: list[GateState] = []
        for gate in d.rollout.gates:
            record = d.records.get(gate.node, NodeRecord())
            if gate.done or record.phase not in (planner.NODE_IN_MAINTENANCE, planner.NODE_GATING):
                gates.append(gate)
                continue
            gates.append(await self._evaluate(m, s, gate, record, nodes.get(gate.node), now=now))
        d.rollout = replace(d.rollout, gates=tuple(gates))
        for g in gates:
            if g.done:
                continue
            if g.next_evaluation is not None:
                d.wake_at(g.next_evaluation)
            timeout = _deadline_timeout(s, g)
            if timeout is not None:  # judged from the caches: cheap to look at often, and at the deadline
                d.wake_at(
                    min(
                        planner.deadline_of(g, timeout, now=now),
                        now + timedelta(seconds=CACHE_GATE_POLL_SECONDS),
                    )
                )
        gating = sorted(n for n, r in d.records.items() if r.phase == planner.NODE_GATING)
        in_maintenance = sorted(n for n, r in d.records.items() if r.phase == planner.NODE_IN_MAINTENANCE)
        for node in in_maintenance + gating:
            result = planner.round_result(gates, node)
            if result in (Result.FAILED, Result.ERROR, Result.INCONCLUSIVE):
                self._fail(m, d, node, result, now)
                return
            if result is Result.SUCCESSFUL and node in gating:
                d.records[node] = replace(d.records[node], phase=planner.NODE_COMPLETED)
                d.rollout = replace(d.rollout, last_completion_time=now)
                d.event(
                    "Normal",
                    "NodeCompleted",
                    f"node {node}: maintenance complete, every gate passed",
                    maintenance=m.name,
                    node=node,
                )

    async def _evaluate(
        self,
        m: api.Maintenance,
        s: rspec.RollingSpec,
        gate: GateState,
        record: NodeRecord,
        node: Obj | None,
        *,
        now: datetime,
    ) -> GateState:
        if gate.type == rspec.GATE_NODE_READY and s.node_ready_timeout is not None:
            if record.phase == planner.NODE_IN_MAINTENANCE:
                done, waiting = planner.completion_reached(s, maintenance=m.name, record=record, node=node)
                verdict = health.node_health(node) if done else health.Verdict(False, waiting)
            else:
                verdict = health.node_health(node)
            out = planner.judge_deadline_gate(gate, timeout=s.node_ready_timeout, verdict=verdict, now=now)
        elif gate.type == rspec.GATE_WORKLOADS and s.workloads_timeout is not None:
            if record.phase != planner.NODE_GATING:
                return gate
            verdict = health.workloads_health(record.workloads, self.lookup)
            out = planner.judge_deadline_gate(gate, timeout=s.workloads_timeout, verdict=verdict, now=now)
        elif gate.type == rspec.GATE_PROMETHEUS:
            if record.phase != planner.NODE_GATING:
                return gate
            g = next((p for p in s.prometheus if p.name == gate.name), None)
            if g is None:  # the gate was removed from the spec meanwhile: nothing to wait for
                return replace(gate, result=Result.SUCCESSFUL.value, message="no longer in the spec")
            if gate.next_evaluation is not None and gate.next_evaluation > now:
                return gate
            measurement = await self.measure(
                g.address, g.query, success=g.success, failure=g.failure, timeout=GATE_TIMEOUT_SECONDS
            )
            rolloutmetrics.count_gate(rspec.GATE_PROMETHEUS, measurement.result.value)
            out = planner.apply_measurement(gate, measurement, g, now=now)
            log.info(
                "gate measured",
                maintenance=m.name,
                node=gate.node,
                gate=gate.name,
                result=measurement.result.value,
                value=measurement.value,
                verdict=out.result,
            )
            return out
        else:
            return gate
        if out.done:
            rolloutmetrics.count_gate(gate.type, out.result)
            log.info(
                "gate evaluated",
                maintenance=m.name,
                node=gate.node,
                gate=gate.name,
                result=out.result,
                message=out.message,
            )
        return out

    def _fail(self, m: api.Maintenance, d: Decisions, node: str, result: Result, now: datetime) -> None:
        bad = planner.first_bad(d.rollout.gates, node, result)
        name = bad.name if bad is not None else "?"
        detail = bad.message if bad is not None else ""
        value = f" (value {bad.value})" if bad is not None and bad.value else ""
        message = f"gate {name} on node {node}: {result.value}{value}: {detail}"
        d.event("Warning", "GateFailed", message, maintenance=m.name, node=node, gate=name)
        if result is Result.FAILED and d.spec.on_gate_failure == rspec.ON_FAILURE_ABORT:
            d.rollout = replace(
                d.rollout,
                aborted_reason=planner.PAUSED_GATE_FAILED,
                aborted_message=message,
                aborted_time=now,
            )
            d.event("Warning", "RolloutAborted", f"rollout aborted: {message}", maintenance=m.name, node=node)
            return
        d.rollout = replace(
            d.rollout, paused_reason=planner.pause_reason(result), paused_message=message, paused_time=now
        )
        d.event(
            "Warning",
            "RolloutPaused",
            f"rollout paused: {message}; `aiokcm maintenance resume {m.name}` runs the gate again",
            maintenance=m.name,
            node=node,
        )

    async def _alerts(self, m: api.Maintenance, d: Decisions, *, now: datetime) -> None:
        """The Alertmanager gates, asked at most every interval while a start is due."""
        interval = min(g.interval for g in d.spec.alertmanager)
        last = self.alert_checks.get(m.name)
        # Asked afresh before a start; only a hold already in place is looked at once an interval.
        holding = last is not None and any(g.result != Result.SUCCESSFUL.value for g in last[1])
        if last is not None and holding and now < last[0] + timedelta(seconds=interval):
            results = last[1]
        else:
            results = []
            for g in d.spec.alertmanager:
                check = await self.alerts(g.address, g.matchers, timeout=GATE_TIMEOUT_SECONDS)
                if check.error:
                    result, message = Result.ERROR, check.error
                elif check.firing:
                    names = ", ".join(sorted({a.name for a in check.firing}))
                    result, message = Result.FAILED, f"{len(check.firing)} alerts firing: {names}"
                else:
                    result, message = Result.SUCCESSFUL, "no matching alert firing"
                rolloutmetrics.count_gate(rspec.GATE_ALERTMANAGER, result.value)
                results.append(
                    GateState(
                        g.name,
                        rspec.GATE_ALERTMANAGER,
                        "",
                        result=result.value,
                        message=message,
                        last_evaluation=now,
                    )
                )
            self.alert_checks[m.name] = (now, results)
        d.wake_at(now + timedelta(seconds=interval))
        others = tuple(g for g in d.rollout.gates if g.type != rspec.GATE_ALERTMANAGER)
        d.rollout = replace(d.rollout, gates=others + tuple(results))
        blocking = [g for g in results if g.result != Result.SUCCESSFUL.value]
        if blocking:
            message = "; ".join(f"gate {g.name}: {g.message}" for g in blocking)
            if d.rollout.paused_reason != planner.PAUSED_ALERT_FIRING or d.rollout.paused_message != message:
                d.event("Warning", "RolloutPaused", f"next node held back: {message}", maintenance=m.name)
            d.rollout = replace(
                d.rollout,
                paused_reason=planner.PAUSED_ALERT_FIRING,
                paused_message=message,
                paused_time=d.rollout.paused_time
                if d.rollout.paused_reason == planner.PAUSED_ALERT_FIRING
                else now,
            )
            d.hold = Hold(planner.PAUSED_ALERT_FIRING, f"paused: {message}")
        elif d.rollout.paused_reason == planner.PAUSED_ALERT_FIRING:
            d.rollout = replace(d.rollout, paused_reason="", paused_message="", paused_time=None)
            d.event(
                "Normal",
                "RolloutResumed",
                "no matching alert firing any more: the next node may start",
                maintenance=m.name,
            )

    # -- plan (no suspension) --------------------------------------------------------------------

    def settle_drained(
        self, m: api.Maintenance, d: Decisions, *, name: str, node: Obj | None, drained: bool, now: datetime
    ) -> bool:
        """A node of the working sets: True when the rollout releases it now (its completion seen)."""
        record = d.records.get(name, NodeRecord())
        if record.phase in planner.RELEASED:
            return True
        if not drained or d.rollout.aborted:  # an aborted rollout releases nothing more
            return False
        if record.phase != planner.NODE_IN_MAINTENANCE:
            record = replace(
                record, phase=planner.NODE_IN_MAINTENANCE, drained_time=record.drained_time or now
            )
            if not record.boot_id:
                record = replace(record, boot_id=health.boot_id(node))
            d.records[name] = record
            d.event(
                "Normal",
                "NodeInMaintenance",
                f"node {name}: drained, in maintenance until {d.spec.completion.lower()}",
                maintenance=m.name,
                node=name,
            )
            wait_gate = planner.reboot_wait_gate(d.spec, node=name, since=record.drained_time or now)
            if wait_gate is not None:
                d.rollout = replace(d.rollout, gates=(*_without_node(d.rollout.gates, name), wait_gate))
                d.wake_at((record.drained_time or now) + timedelta(seconds=d.spec.node_ready_timeout or 0))
        if d.rollout.paused_reason in (
            planner.PAUSED_GATE_FAILED,
            planner.PAUSED_GATE_ERROR,
            planner.PAUSED_GATE_INCONCLUSIVE,
        ):
            return False  # a node whose wait already failed stays as it is until someone resumes
        done, _why = planner.completion_reached(d.spec, maintenance=m.name, record=record, node=node)
        if not done:
            return False
        d.records[name] = replace(record, phase=planner.NODE_GATING, completed_time=now)
        kept = tuple(
            g for g in d.rollout.gates if d.records.get(g.node, NodeRecord()).phase != planner.NODE_COMPLETED
        )
        round_ = planner.start_round(d.spec, node=name, now=now, kept=kept)
        d.rollout = replace(
            d.rollout, gates=_without_node(kept, name) + round_ + _alert_gates(d.rollout.gates)
        )
        d.released.add(name)
        d.newly_released.add(name)
        d.wake_at(now)
        d.event(
            "Normal",
            "NodeReleased",
            f"node {name}: maintenance done ({_why}); released, gates running",
            maintenance=m.name,
            node=name,
        )
        return True

    def record_start(self, d: Decisions, *, name: str, node: Obj, pods: Sequence[Obj]) -> None:
        """A node the rollout starts now: its bootID and the workloads its gate waits for."""
        record = d.records.get(name, NodeRecord())
        d.records[name] = replace(
            record,
            phase="",
            boot_id=health.boot_id(node),
            workloads=health.workloads_of(pods, self.lookup)[: planner.MAX_RECORDED_WORKLOADS],
            drained_time=None,
            completed_time=None,
        )

    def publish(self, obj: Obj, m: api.Maintenance, d: Decisions, *, total: int) -> None:
        """Events (after the status write) and the rollout's gauges."""
        for type_, reason, message in d.events:
            self.recorder.event(obj, type_, reason, message)
        completed = sum(1 for r in d.records.values() if r.phase == planner.NODE_COMPLETED)
        rolloutmetrics.set_progress(m.name, completed=completed, total=total)
        paused = d.rollout.paused_reason or (planner.PAUSED_BY_SPEC if d.spec.paused else None)
        if d.rollout.aborted:
            paused = "Aborted"
        rolloutmetrics.set_paused(m.name, paused or None)


_RECORD_FIELDS = ("bootID", "workloads", "drainedTime", "completedTime")
_ROLLOUT_FIELDS = (
    "pausedReason",
    "pausedMessage",
    "pausedTime",
    "abortedReason",
    "abortedMessage",
    "abortedTime",
    "lastCompletionTime",
    "resumeHonoured",
)


def _without_node(gates: Sequence[GateState], node: str) -> tuple[GateState, ...]:
    return tuple(g for g in gates if g.node != node and g.type != rspec.GATE_ALERTMANAGER)


def _alert_gates(gates: Sequence[GateState]) -> tuple[GateState, ...]:
    return tuple(g for g in gates if g.type == rspec.GATE_ALERTMANAGER)


def overlay_status(status: dict[str, Any], d: Decisions) -> None:
    """The rolling fields on top of the drain's status (which counts released nodes as drained)."""
    nodes: dict[str, Any] = status.get("nodes") or {}
    phases: dict[str, str] = {}
    for name, entry in nodes.items():
        if not isinstance(entry, dict):
            continue
        record = d.records.get(name)
        if record is not None and record.phase:
            entry["phase"] = record.phase
            if record.phase == planner.NODE_IN_MAINTENANCE:
                entry["message"] = (
                    entry.get("message") or f"drained; waiting for its maintenance ({d.spec.completion})"
                )
        # A merge patch keeps what it does not name: a field that went is written as null.
        entry.update(dict.fromkeys(_RECORD_FIELDS))
        entry.setdefault("message", None)
        if record is not None:
            entry.update(record.as_status())
        phases[name] = str(entry.get("phase") or "")
    total = len(nodes)
    status["completedNodes"] = sum(1 for p in phases.values() if p == planner.NODE_COMPLETED)
    current = sorted(
        n
        for n, p in phases.items()
        if p not in ("", api.PHASE_WAITING, planner.NODE_COMPLETED, api.PHASE_NODE_NOT_FOUND)
    )
    status["currentNode"] = ",".join(current)
    status["phase"] = planner.rollout_phase(rollout=d.rollout, held=d.hold, phases=phases, total=total)
    status["rollout"] = {**dict.fromkeys(_ROLLOUT_FIELDS), **d.rollout.rollout_status()}
    status["gates"] = d.rollout.gates_status()
    if d.hold.next_window is not None:
        status["nextWindowTime"] = format_time(d.hold.next_window)
    else:
        status["nextWindowTime"] = None
