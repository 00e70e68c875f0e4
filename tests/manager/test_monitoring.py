"""deploy/monitoring queries only what the manager exports: a renamed metric breaks this, not an alert.

Every metric an alert or a dashboard panel queries is one the manager's registry (the one
`/metrics` serves) holds once every controller module is loaded, every label a selector names is
one of that metric's labels, and the node maintenance label values the alerts match are ones the
controller writes. The manifests render with the real `kubectl kustomize`.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from prometheus_client import REGISTRY

from controller_manager.registry import _TABLE, import_controller_class
from controllers.nodemaintenance import api, drain, rolloutmetrics

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
_KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
}
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*\"([^\"]*)\"")


def _exported() -> dict[str, tuple[str, ...]]:
    """Sample name -> label names, for every metric of the manager's registry."""
    for module in (
        "controller_manager.app",
        "controller_manager.leaderelection",
        "controller_manager.loopmonitor",
        # The rolling maintenance's metrics, until the nodemaintenance controller imports them.
        "controllers.nodemaintenance.rolloutmetrics",
    ):
        importlib.import_module(module)
    for row in _TABLE:
        # The class itself: the packages export their controllers lazily, and a controller's
        # metrics module is loaded with its controller, not with its package.
        import_controller_class(row.import_path)
    out: dict[str, tuple[str, ...]] = {}
    collectors = getattr(REGISTRY, "_collector_to_names", {})
    for collector, names in collectors.items():
        labels = tuple(getattr(collector, "_labelnames", ()))
        for name in names:
            out[name] = labels
    # a counter is exposed as `<name>_total` only: its bare family name would query nothing
    return {name: labels for name, labels in out.items() if f"{name}_total" not in out}


def _metric_names(expr: str) -> set[str]:
    text = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range durations
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", text)  # grouping labels
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or match.group(0) in _KEYWORDS:
            continue  # a function or an aggregation
        names.add(match.group(0))
    return names


def _rules_exprs() -> list[str]:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    return [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]


def _dashboard_exprs() -> list[str]:
    dashboard: dict[str, Any] = json.loads((MONITORING / "dashboard.json").read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


@pytest.mark.parametrize("source", ["rules", "dashboard"])
def test_every_queried_metric_and_label_is_exported(source: str) -> None:
    exprs = _rules_exprs() if source == "rules" else _dashboard_exprs()
    assert exprs
    exported = _exported()
    for expr in exprs:
        names = _metric_names(expr)
        assert names, expr
        for name in names:
            assert name in exported, f"{name} (in {expr!r}) is not exported by the manager"
        for name, matchers in _SELECTOR.findall(expr):
            for label, _op, _value in _MATCHER.findall(matchers):
                assert label in exported[name], f"{name} has no label {label!r} (in {expr!r})"


def test_the_alerts_match_values_the_controller_writes() -> None:
    written = {
        "reason": {v for k, v in vars(drain).items() if k.startswith("BLOCK_")},
        "phase": set(api.PHASE_ORDER),
        "result": {v for k, v in vars(drain).items() if k.startswith("BLOCK_")} | {"evicted", "conflict"},
        "limit": {"maintenance", "cluster"},
        "controller": {row.name for row in _TABLE},
    }
    # The rolling maintenance's metrics write their own vocabulary under the same label names.
    written_by_metric = {
        "aiokcm_nodemaintenance_gate_evaluations_total": {
            "gate": set(rolloutmetrics.GATE_TYPES),
            "result": set(rolloutmetrics.GATE_RESULTS),
        },
        "aiokcm_nodemaintenance_rollout_nodes": {"state": set(rolloutmetrics.STATES)},
        "aiokcm_nodemaintenance_rollout_paused": {"reason": set(rolloutmetrics.PAUSED_REASONS)},
    }
    checked = 0
    for expr in _rules_exprs() + _dashboard_exprs():
        for name, matchers in _SELECTOR.findall(expr):
            known = {**written, **written_by_metric.get(name, {})}
            for label, op, value in _MATCHER.findall(matchers):
                if (
                    not name.startswith(("aiokcm_nodemaintenance_", "controller_runtime_"))
                    or label not in known
                ):
                    continue
                values = value.split("|") if op == "=~" else [value]
                assert set(values) <= known[label], f"{label}={value!r} is never written ({expr!r})"
                checked += 1
    assert checked >= 5


async def test_the_monitoring_kustomization_renders() -> None:
    done = await anyio.run_process(["kubectl", "kustomize", str(MONITORING)])
    docs = [d for d in yaml.safe_load_all(done.stdout.decode()) if d]
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"ConfigMap", "PrometheusRule", "ServiceMonitor"}
    dashboard = kinds["ConfigMap"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    (body,) = dashboard["data"].values()
    assert json.loads(body)["uid"] == "aiokcm-nodemaintenance"
    assert {d["metadata"]["namespace"] for d in docs} == {"aiokcm-system"}


def test_the_rollout_metrics_leave_no_stale_series() -> None:
    """A new pause reason replaces the old one's series, a resume and `forget` remove them."""

    def paused(reason: str) -> float | None:
        return REGISTRY.get_sample_value(
            "aiokcm_nodemaintenance_rollout_paused", {"maintenance": "m-test", "reason": reason}
        )

    def nodes(state: str) -> float | None:
        return REGISTRY.get_sample_value(
            "aiokcm_nodemaintenance_rollout_nodes", {"maintenance": "m-test", "state": state}
        )

    rolloutmetrics.set_paused("m-test", "GateFailed")
    assert paused("GateFailed") == 1
    rolloutmetrics.set_paused("m-test", "AlertFiring")
    assert (paused("GateFailed"), paused("AlertFiring")) == (None, 1)
    rolloutmetrics.set_paused("m-test", None)
    assert paused("AlertFiring") is None
    rolloutmetrics.set_paused("m-test", None)  # twice: nothing to remove

    rolloutmetrics.set_progress("m-test", completed=2, total=5)
    rolloutmetrics.set_paused("m-test", "PausedBySpec")
    assert (nodes("completed"), nodes("total")) == (2, 5)
    rolloutmetrics.forget("m-test")
    rolloutmetrics.forget("m-test")
    assert (nodes("completed"), nodes("total"), paused("PausedBySpec")) == (None, None, None)

    labels = {"gate": "prometheus", "result": "Inconclusive"}
    before = REGISTRY.get_sample_value("aiokcm_nodemaintenance_gate_evaluations_total", labels) or 0.0
    rolloutmetrics.count_gate("prometheus", "Inconclusive")
    assert REGISTRY.get_sample_value("aiokcm_nodemaintenance_gate_evaluations_total", labels) == before + 1
