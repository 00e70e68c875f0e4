"""The rolling part of a NodeMaintenance spec, parsed once and validated with the field's path.

A spec the CRD could not fully check (an old server without the schema's patterns, a zone name,
a PromQL condition) is still refused here with a reason naming the field, which the controller
shows as `SpecValid=False`: a bad window or gate must stop the rollout before it starts, never
half-way through it, and never crash the sync that reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from maintenancerollout import alertmanager, expressions
from maintenancerollout.analysis import Limits
from maintenancerollout.windows import Window, WindowError, parse_windows

COMPLETION_DRAINED = "Drained"
COMPLETION_REBOOT = "Reboot"
COMPLETION_ANNOTATION = "Annotation"
COMPLETIONS = (COMPLETION_DRAINED, COMPLETION_REBOOT, COMPLETION_ANNOTATION)

ON_FAILURE_PAUSE = "Pause"
ON_FAILURE_ABORT = "Abort"
ON_FAILURES = (ON_FAILURE_PAUSE, ON_FAILURE_ABORT)

GATE_NODE_READY = "nodeReady"
GATE_WORKLOADS = "workloads"
GATE_PROMETHEUS = "prometheus"
GATE_ALERTMANAGER = "alertmanager"

DEFAULT_GATE_TIMEOUT_SECONDS = 600.0
DEFAULT_INTERVAL_SECONDS = 30.0
# The CRD's int32 bound: a "never" timeout stays a number a datetime can hold.
MAX_SECONDS = 2**31 - 1


class SpecError(ValueError):
    """A rolling field that cannot be acted on; the message starts with its path."""


@dataclass(frozen=True, slots=True)
class PrometheusGate:
    name: str
    address: str
    query: str
    success: str | None
    failure: str | None
    interval: float
    limits: Limits


@dataclass(frozen=True, slots=True)
class AlertmanagerGate:
    name: str
    address: str
    matchers: tuple[str, ...]
    interval: float


@dataclass(frozen=True, slots=True)
class RollingSpec:
    completion: str
    windows: tuple[Window, ...] = ()
    soak_seconds: float = 0.0
    paused: bool = False
    on_gate_failure: str = ON_FAILURE_PAUSE
    node_ready_timeout: float | None = None
    workloads_timeout: float | None = None
    prometheus: tuple[PrometheusGate, ...] = ()
    alertmanager: tuple[AlertmanagerGate, ...] = field(default_factory=tuple)

    @property
    def gate_names(self) -> tuple[str, ...]:
        """The gates evaluated after each node, in the order they are reported."""
        names: list[str] = []
        if self.node_ready_timeout is not None:
            names.append(GATE_NODE_READY)
        if self.workloads_timeout is not None:
            names.append(GATE_WORKLOADS)
        names.extend(g.name for g in self.prometheus)
        return tuple(names)


def _seconds(raw: object, path: str, default: float, *, minimum: float = 0.0) -> float:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise SpecError(f"{path}: must be a number of seconds, got {raw!r}")
    if raw < minimum or raw > MAX_SECONDS:
        raise SpecError(f"{path}: must be between {minimum:g} and {MAX_SECONDS}, got {raw}")
    return float(raw)


def _count(raw: object, path: str, default: int, *, minimum: int = 0) -> int:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < minimum or raw > MAX_SECONDS:
        raise SpecError(f"{path}: must be an integer of at least {minimum}, got {raw!r}")
    return raw


def _address(raw: object, path: str) -> str:
    if not isinstance(raw, str) or not raw.startswith(("http://", "https://")):
        raise SpecError(f"{path}: must be an http:// or https:// URL, got {raw!r}")
    return raw.rstrip("/")


def _name(raw: object, path: str, taken: set[str]) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise SpecError(f"{path}: a gate needs a name")
    if raw in taken:
        raise SpecError(f"{path}: gate name {raw!r} is used twice")
    taken.add(raw)
    return raw


def _timeout(gates: Mapping[str, Any], key: str) -> float | None:
    raw = gates.get(key)
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SpecError(f"spec.gates.{key}: must be an object like {{timeoutSeconds: 600}}")
    return _seconds(
        raw.get("timeoutSeconds"), f"spec.gates.{key}.timeoutSeconds", DEFAULT_GATE_TIMEOUT_SECONDS
    )


def _condition(raw: object, path: str) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise SpecError(f"{path}: must be an expression string, got {raw!r}")
    try:
        expressions.check(raw)
    except expressions.ExpressionError as exc:
        raise SpecError(f"{path}: {exc}") from None
    return raw


def _prometheus(raw: object, taken: set[str]) -> tuple[PrometheusGate, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise SpecError("spec.gates.prometheus: must be a list")
    out: list[PrometheusGate] = []
    for i, g in enumerate(raw):
        path = f"spec.gates.prometheus[{i}]"
        if not isinstance(g, Mapping):
            raise SpecError(f"{path}: must be an object")
        query = g.get("query")
        if not isinstance(query, str) or not query.strip():
            raise SpecError(f"{path}.query: a PromQL query is required")
        out.append(
            PrometheusGate(
                name=_name(g.get("name"), f"{path}.name", taken),
                address=_address(g.get("address"), f"{path}.address"),
                query=query,
                success=_condition(g.get("successCondition"), f"{path}.successCondition"),
                failure=_condition(g.get("failureCondition"), f"{path}.failureCondition"),
                interval=_seconds(
                    g.get("intervalSeconds"), f"{path}.intervalSeconds", DEFAULT_INTERVAL_SECONDS, minimum=1
                ),
                limits=Limits(
                    count=_count(g.get("count"), f"{path}.count", 1, minimum=1),
                    failure_limit=_count(g.get("failureLimit"), f"{path}.failureLimit", 0),
                    inconclusive_limit=_count(g.get("inconclusiveLimit"), f"{path}.inconclusiveLimit", 0),
                    consecutive_error_limit=_count(
                        g.get("consecutiveErrorLimit"), f"{path}.consecutiveErrorLimit", 4
                    ),
                ),
            )
        )
    return tuple(out)


def _alertmanager(raw: object, taken: set[str]) -> tuple[AlertmanagerGate, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise SpecError("spec.gates.alertmanager: must be a list")
    out: list[AlertmanagerGate] = []
    for i, g in enumerate(raw):
        path = f"spec.gates.alertmanager[{i}]"
        if not isinstance(g, Mapping):
            raise SpecError(f"{path}: must be an object")
        matchers = g.get("matchers") or []
        if not isinstance(matchers, Sequence) or isinstance(matchers, str):
            raise SpecError(f"{path}.matchers: must be a list of matchers like 'severity=\"critical\"'")
        for j, text in enumerate(matchers):
            try:
                alertmanager.parse_matcher(str(text))
            except alertmanager.MatcherError as exc:
                raise SpecError(f"{path}.matchers[{j}]: {exc}") from None
        out.append(
            AlertmanagerGate(
                name=_name(g.get("name"), f"{path}.name", taken),
                address=_address(g.get("address"), f"{path}.address"),
                matchers=tuple(str(m) for m in matchers),
                interval=_seconds(
                    g.get("intervalSeconds"), f"{path}.intervalSeconds", DEFAULT_INTERVAL_SECONDS, minimum=1
                ),
            )
        )
    return tuple(out)


def parse(spec: Mapping[str, Any]) -> RollingSpec | None:
    """The rolling spec, or None when `spec.completion` is absent (not a rolling maintenance).

    Raises `SpecError` naming the first field that cannot be acted on.
    """
    completion = spec.get("completion")
    if completion is None or completion == "":
        return None
    if completion not in COMPLETIONS:
        raise SpecError(f"spec.completion: {completion!r} is not one of {', '.join(COMPLETIONS)}")
    on_failure = spec.get("onGateFailure") or ON_FAILURE_PAUSE
    if on_failure not in ON_FAILURES:
        raise SpecError(f"spec.onGateFailure: {on_failure!r} is not one of {', '.join(ON_FAILURES)}")
    try:
        windows = parse_windows(spec.get("windows"), field="spec.windows")
    except WindowError as exc:
        raise SpecError(str(exc)) from None
    gates = spec.get("gates") or {}
    if not isinstance(gates, Mapping):
        raise SpecError("spec.gates: must be an object")
    taken = {GATE_NODE_READY, GATE_WORKLOADS}
    return RollingSpec(
        completion=str(completion),
        windows=windows,
        soak_seconds=_seconds(spec.get("soakSeconds"), "spec.soakSeconds", 0.0),
        paused=spec.get("paused") is True,
        on_gate_failure=str(on_failure),
        node_ready_timeout=_timeout(gates, GATE_NODE_READY),
        workloads_timeout=_timeout(gates, GATE_WORKLOADS),
        prometheus=_prometheus(gates.get(GATE_PROMETHEUS), taken),
        alertmanager=_alertmanager(gates.get(GATE_ALERTMANAGER), taken),
    )
