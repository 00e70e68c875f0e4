"""Rolling maintenances gated by a real Prometheus and a real Alertmanager (Debian's packages).

The stack (tests/support/monitoring.py): an exporter serving gauges the test sets, Prometheus
scraping it every second with the rule `TestSignalHigh: aiokcm_test_signal > 0` alerting to
Alertmanager. On the 3-node local cluster:

- a firing alert holds the next node back (the rollout `Paused`, `AlertFiring`, the node left
  schedulable); a real silence lifts the hold and the next node starts by itself;
- a PromQL gate crossing its failure condition pauses with the value in the message, or aborts
  when the spec says so;
- an unreachable Prometheus, and a query Prometheus refuses, are `Error` measurements with the
  reason; the rollout pauses once they exceed `consecutiveErrorLimit`, and nothing crashes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import NODEMAINTENANCES, NODES
from controllers.nodemaintenance import NodeMaintenanceController
from kubeutil.timestamps import format_time
from maintenancerollout.planner import COMPLETE_ANNOTATION, RESUME_ANNOTATION
from tests.controllers.harness import running_controllers
from tests.controllers.nodemaintenance.helpers import GATES, NO_CLUSTER_LIMIT
from tests.e2e.rolling import node_phase, rolling_maintenance, rollout_status
from tests.support.monitoring import Monitoring, closed_port, monitoring_binaries_or_skip, running_monitoring
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("cluster", "crd")
SIGNAL = "aiokcm_test_signal"


@pytest.fixture
async def mon(tmp_path: Path) -> AsyncIterator[Monitoring]:
    async with running_monitoring(tmp_path, monitoring_binaries_or_skip()) as m:
        yield m


async def _status_is(kube: KubeClient, name: str, check: Callable[[dict[str, Any]], bool]) -> bool:
    return check(await rollout_status(kube, name))


def _prometheus_gate(address: str, query: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "signal",
        "address": address,
        "query": query,
        "successCondition": "result[0] <= 0.5",
        "failureCondition": "result[0] > 0.5",
        "intervalSeconds": 1,
        **extra,
    }


async def test_a_firing_alert_holds_the_next_node_and_a_silence_lets_it_go(
    kube: KubeClient, node_names: list[str], mon: Monitoring
) -> None:
    first, second = node_names[0], node_names[1]
    mon.signal.set(SIGNAL, 0.0)
    await mon.wait_value(SIGNAL, 0.0)
    gates = {
        "alertmanager": [
            {
                "name": "no-critical",
                "address": mon.alertmanager_url,
                "matchers": ['severity="critical"'],
                "intervalSeconds": 1,
            }
        ]
    }
    async with running_controllers(
        kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]
    ) as h:
        await kube.create(
            NODEMAINTENANCES, rolling_maintenance("am", node_names[:2], completion="Annotation", gates=gates)
        )
        await eventually(
            lambda: _status_is(kube, "am", lambda s: node_phase(s, first) == "InMaintenance"), "first node in"
        )
        mon.signal.set(SIGNAL, 1.0)
        await mon.wait_alert_firing("TestSignalHigh")
        await kube.patch(NODES, first, {"metadata": {"annotations": {COMPLETE_ANNOTATION: "am"}}})

        def held(s: dict[str, Any]) -> bool:
            return (
                s.get("phase") == "Paused" and (s.get("rollout") or {}).get("pausedReason") == "AlertFiring"
            )

        await eventually(
            lambda: _status_is(kube, "am", held), "the next node held back by the alert", timeout=30
        )
        status = await rollout_status(kube, "am")
        assert "TestSignalHigh" in status["rollout"]["pausedMessage"], status["rollout"]
        assert node_phase(status, first) == "Completed" and node_phase(status, second) == "Waiting"
        await anyio.sleep(2.0)  # held, not just slow: two more checks and still nothing started
        assert not (await kube.get(NODES, second))["spec"].get("unschedulable")
        await mon.silence(['alertname="TestSignalHigh"'])
        await eventually(
            lambda: _status_is(kube, "am", lambda s: node_phase(s, second) == "InMaintenance"),
            "the silence lets the next node start",
            timeout=30,
        )
        assert "RolloutResumed" in h.events.reasons("am")
        am_gate = next(g for g in (await rollout_status(kube, "am"))["gates"] if g["name"] == "no-critical")
        assert am_gate["result"] == "Successful", am_gate


@pytest.mark.parametrize("on_failure", ["Pause", "Abort"])
async def test_a_promql_gate_over_its_failure_condition_stops_the_rollout(
    kube: KubeClient, node_names: list[str], mon: Monitoring, on_failure: str
) -> None:
    mon.signal.set(SIGNAL, 0.75)
    await mon.wait_value(SIGNAL, 0.75)
    gates = {"prometheus": [_prometheus_gate(mon.prometheus_url, f"max({SIGNAL})")]}
    want = "Paused" if on_failure == "Pause" else "Aborted"
    async with running_controllers(
        kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]
    ) as h:
        await kube.create(
            NODEMAINTENANCES, rolling_maintenance("prom", node_names, gates=gates, onGateFailure=on_failure)
        )
        await eventually(lambda: _status_is(kube, "prom", lambda s: s.get("phase") == want), want, timeout=30)
        await anyio.sleep(1.0)
        status = await rollout_status(kube, "prom")
    gate = next(g for g in status["gates"] if g["name"] == "signal")
    assert gate["result"] == "Failed" and gate["value"] == "[0.75]" and gate["failed"] == 1, gate
    message = status["rollout"]["pausedMessage" if on_failure == "Pause" else "abortedMessage"]
    assert "signal" in message and "0.75" in message and node_names[0] in message, message
    assert status["nodes"][node_names[0]]["phase"] == "Gating"
    for n in node_names[1:]:
        assert node_phase(status, n) == "Waiting"
        assert not (await kube.get(NODES, n))["spec"].get("unschedulable")
    reasons = h.events.reasons("prom")
    assert (
        "GateFailed" in reasons
        and ("RolloutPaused" if on_failure == "Pause" else "RolloutAborted") in reasons
    )


@pytest.mark.parametrize("broken", ["unreachable", "refused"])
async def test_a_prometheus_it_cannot_ask_is_an_error_then_a_pause(
    kube: KubeClient, node_names: list[str], mon: Monitoring, broken: str
) -> None:
    if broken == "unreachable":
        gate = _prometheus_gate(
            f"http://127.0.0.1:{closed_port()}", f"max({SIGNAL})", consecutiveErrorLimit=2
        )
    else:
        gate = _prometheus_gate(mon.prometheus_url, "max(", consecutiveErrorLimit=2)
    async with running_controllers(kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]):
        await kube.create(
            NODEMAINTENANCES, rolling_maintenance("err", node_names, gates={"prometheus": [gate]})
        )
        await eventually(
            lambda: _status_is(kube, "err", lambda s: s.get("phase") == "Paused"), "paused", timeout=30
        )
        status = await rollout_status(kube, "err")
    g = next(x for x in status["gates"] if x["name"] == "signal")
    assert g["result"] == "Error" and g["error"] == 3 and g["consecutiveErrors"] == 3, g
    assert status["rollout"]["pausedReason"] == "GateError"
    expected = "connect" if broken == "unreachable" else "parse error"
    assert expected in g["message"].lower(), g["message"]
    assert expected in status["rollout"]["pausedMessage"].lower()


async def test_resume_runs_the_failed_gate_again_and_the_rollout_goes_on(
    kube: KubeClient, node_names: list[str], mon: Monitoring
) -> None:
    mon.signal.set(SIGNAL, 0.75)
    await mon.wait_value(SIGNAL, 0.75)
    gates = {"prometheus": [_prometheus_gate(mon.prometheus_url, f"max({SIGNAL})")]}
    async with running_controllers(
        kube, NodeMaintenanceController, gates=GATES, configs=[NO_CLUSTER_LIMIT]
    ) as h:
        await kube.create(NODEMAINTENANCES, rolling_maintenance("again", node_names[:2], gates=gates))
        await eventually(lambda: _status_is(kube, "again", lambda s: s.get("phase") == "Paused"), "paused")
        mon.signal.set(SIGNAL, 0.0)
        await mon.wait_value(SIGNAL, 0.0)
        await anyio.sleep(1.5)  # a paused rollout evaluates nothing: still paused with the signal fixed
        assert (await rollout_status(kube, "again"))["rollout"]["pausedReason"] == "GateFailed"
        now = format_time(datetime.now(UTC))
        await kube.patch(NODEMAINTENANCES, "again", {"metadata": {"annotations": {RESUME_ANNOTATION: now}}})
        await eventually(
            lambda: _status_is(kube, "again", lambda s: s.get("phase") == "Completed"),
            "completed",
            timeout=30,
        )
        status = await rollout_status(kube, "again")
    assert status["rollout"]["resumeHonoured"] == now and "pausedReason" not in status["rollout"], status
    gate = next(g for g in status["gates"] if g["name"] == "signal")
    assert gate["node"] == node_names[1] and gate["result"] == "Successful", gate
    reasons = h.events.reasons("again")
    assert reasons.count("NodeCompleted") == 2 and "RolloutResumed" in reasons
