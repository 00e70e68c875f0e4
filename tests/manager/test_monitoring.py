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
from controllers.nodemaintenance import api, drain

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
    checked = 0
    for expr in _rules_exprs() + _dashboard_exprs():
        for name, matchers in _SELECTOR.findall(expr):
            for label, op, value in _MATCHER.findall(matchers):
                if (
                    not name.startswith(("aiokcm_nodemaintenance_", "controller_runtime_"))
                    or label not in written
                ):
                    continue
                values = value.split("|") if op == "=~" else [value]
                assert set(values) <= written[label], f"{label}={value!r} is never written ({expr!r})"
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
