"""`aiokcm maintenance status|pause|resume|complete` against an API server, through the real entry points.

Each command runs as a user runs it: `aiokcm` (`cli.main`, or `cli.kubectl_plugin_main` for
`kubectl maintenance ...`) with `--kubeconfig`, in a worker thread since it starts its own event
loop, while the cluster serves from the test's. No controller runs: the status a rollout would have
is written by hand through the status subresource, as docs/rolling-maintenance.md lays it out, and
what the commands wrote is read back from the objects.

The NodeMaintenance CRD is the shipped one, which declares the rolling fields, so a field the
server would prune shows up as a failed read-back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from apiclient import KubeClient
from apiclient.resources import NODEMAINTENANCES, NODES
from controller_manager import cli
from controller_manager.rollout_cli import describe
from controllers.nodemaintenance.api import MAINTENANCES_ANNOTATION
from kubeutil.timestamps import format_time, parse_time, utcnow
from localcluster.cluster import LocalCluster
from localcluster.demo import ensure_crd
from maintenancerollout.planner import COMPLETE_ANNOTATION, RESUME_ANNOTATION
from tests.manager.logcapture import restore_logging  # noqa: F401 - autouse: cli.main() configures logging
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")

NAME = "kernel-patch"
SELECT_ALL = {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "Exists"}]}]
}
ROLLING_SPEC = {
    "nodeSelector": SELECT_ALL,
    "cordon": True,
    "drain": True,
    "completion": "Reboot",
    "soakSeconds": 300,
    "gates": {
        "nodeReady": {"timeoutSeconds": 600},
        "prometheus": [
            {
                "name": "error-rate",
                "address": "http://prometheus.monitoring:9090",
                "query": "sum(rate(http_errors_total[5m]))",
                "successCondition": "result[0] < 0.05",
                "failureCondition": "result[0] >= 0.2",
                "count": 3,
            }
        ],
    },
}


# -- the API --------------------------------------------------------------------------------------


@pytest.fixture
async def rolling_api(kube: KubeClient) -> AsyncIterator[None]:
    """The NodeMaintenance API as shipped (it has the rolling fields); afterwards no maintenance."""
    await ensure_crd(kube)
    yield
    for nm in await kube.list_all(NODEMAINTENANCES):
        await kube.delete(NODEMAINTENANCES, nm["metadata"]["name"])


# -- objects ---------------------------------------------------------------------------------------


def _kept(want: Any, got: Any) -> bool:
    """Every field of `want` is in `got` as given (what a server pruned or not applied yet is not);
    `got` may have more (the schema's defaults)."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(_kept(v, got.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(_kept(w, g) for w, g in zip(want, got, strict=True))
        )
    return bool(want == got)


async def maintenance(kube: KubeClient, name: str, spec: dict[str, Any]) -> None:
    """Create `name`; while the server still prunes the rolling fields (a CRD update takes a moment
    to apply), write the spec again."""
    await kube.create(
        NODEMAINTENANCES,
        {
            "apiVersion": NODEMAINTENANCES.api_version,
            "kind": NODEMAINTENANCES.kind,
            "metadata": {"name": name},
            "spec": spec,
        },
    )

    async def stored() -> bool:
        return _kept(spec, (await kube.patch(NODEMAINTENANCES, name, {"spec": spec})).get("spec"))

    await eventually(stored, f"the spec of {name} stored with its rolling fields", timeout=30)


async def write_status(kube: KubeClient, name: str, status: dict[str, Any]) -> dict[str, Any]:
    """The status a controller would write, through the status subresource."""

    async def stored() -> dict[str, Any] | None:
        got = await kube.patch(NODEMAINTENANCES, name, {"status": status}, subresource="status")
        return got if _kept(status, got.get("status")) else None

    written: dict[str, Any] = await eventually(stored, f"the status of {name} stored", timeout=30)
    return written


async def annotate_node(kube: KubeClient, node: str, annotations: dict[str, str | None]) -> None:
    await kube.patch(NODES, node, {"metadata": {"annotations": annotations}})


def _t(at: datetime) -> str:
    return format_time(at)


def paused_by_gate(now: datetime, **rollout: str) -> dict[str, Any]:
    """A rollout on node-2 of three, paused by a failed Prometheus gate, as the design's example."""
    return {
        "phase": "Paused",
        "completedNodes": 1,
        "nodeCount": 3,
        "currentNode": "node-2",
        "nextWindowTime": _t(now + timedelta(hours=3, seconds=30)),
        "rollout": {
            "pausedReason": "GateFailed",
            "pausedMessage": "gate error-rate on node-2: Failed: value 0.31 (result[0] >= 0.2)",
            "pausedTime": _t(now - timedelta(hours=2)),
            "lastCompletionTime": _t(now - timedelta(hours=4)),
            **rollout,
        },
        "gates": [
            {
                "name": "nodeReady",
                "type": "nodeReady",
                "node": "node-2",
                "result": "Successful",
                "message": "node-2 is Ready",
                "successful": 1,
                "failed": 0,
                "inconclusive": 0,
                "error": 0,
                "consecutiveErrors": 0,
            },
            {
                "name": "error-rate",
                "type": "prometheus",
                "node": "node-2",
                "result": "Failed",
                "value": "0.31",
                "message": "value 0.31 (result[0] >= 0.2)",
                "successful": 2,
                "failed": 1,
                "inconclusive": 0,
                "error": 0,
                "consecutiveErrors": 0,
                "startTime": _t(now - timedelta(hours=2, minutes=10)),
                "lastEvaluationTime": _t(now - timedelta(hours=2)),
            },
        ],
        "nodes": {
            "node-1": {
                "phase": "Completed",
                "bootID": "boot-1b",
                "completedTime": _t(now - timedelta(hours=4)),
            },
            "node-2": {
                "phase": "Gating",
                "bootID": "boot-2a",
                "workloads": ["Deployment/default/web"],
                "drainedTime": _t(now - timedelta(hours=3)),
                "message": "gate error-rate: Failed",
            },
            "node-3": {"phase": "Waiting"},
        },
    }


# -- running the commands ---------------------------------------------------------------------------


class Run:
    """`aiokcm maintenance ...` (or `kubectl maintenance ...`) as a user runs it, with its outcome."""

    def __init__(self, cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
        self.kubeconfig = cluster.kubeconfig_path
        self.capsys = capsys

    async def __call__(self, *argv: str, plugin: bool = False) -> tuple[int, str, str]:
        args = [*argv, "--kubeconfig", self.kubeconfig]
        entry: Callable[[Sequence[str]], int]
        if plugin:
            entry = cli.kubectl_plugin_main
        else:
            entry, args = cli.main, ["maintenance", *args]
        self.capsys.readouterr()
        code = await anyio.to_thread.run_sync(entry, args)
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err


@pytest.fixture
def aiokcm(cluster: LocalCluster, capsys: pytest.CaptureFixture[str], rolling_api: None) -> Run:
    """The commands, against `cluster` with the rolling NodeMaintenance API installed."""
    return Run(cluster, capsys)


def _fields(out: str) -> dict[str, str]:
    """The `Label:   value` lines of the description (the first of each label)."""
    fields: dict[str, str] = {}
    for line in out.splitlines():
        label, sep, value = line.partition(":")
        if sep and line[:1] not in ("", " "):
            fields.setdefault(label, value.strip())
    return fields


def _rows(out: str, header: str) -> list[list[str]]:
    """The table under the line starting with `header`, each row split into its cells (on 3+ spaces)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(header))
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append([c for c in (part.strip() for part in line.strip().split("   ")) if c])
    return rows


# -- status ----------------------------------------------------------------------------------------


async def test_status_prints_the_rollout_its_gates_and_its_nodes(kube: KubeClient, aiokcm: Run) -> None:
    now = utcnow()
    await maintenance(kube, NAME, ROLLING_SPEC)
    stored = await write_status(kube, NAME, paused_by_gate(now))

    code, out, err = await aiokcm("status", NAME)
    assert (code, err) == (0, ""), (out, err)
    fields = _fields(out)
    assert fields["Name"] == NAME
    assert fields["Rolling"] == "yes (completion: Reboot)"
    assert fields["Phase"] == "Paused"
    assert fields["Done"] == "1/3 nodes"
    assert fields["In progress"] == "node-2"
    assert fields["Next window"] == f"{_t(now + timedelta(hours=3, seconds=30))} (in 3h)"
    assert fields["Paused"] == (
        f"GateFailed since {_t(now - timedelta(hours=2))} (2h ago): "
        "gate error-rate on node-2: Failed: value 0.31 (result[0] >= 0.2)"
    )
    assert f"to run the gates again: aiokcm maintenance resume {NAME}" in out
    assert fields["Last node done"].endswith("(4h ago) (soak 300s)")
    assert _rows(out, "GATE") == [
        ["nodeReady", "nodeReady", "node-2", "Successful", "1", "0", "0", "0", "node-2 is Ready"],
        [
            "error-rate",
            "prometheus",
            "node-2",
            "Failed",
            "0.31",
            "2",
            "1",
            "0",
            "0",
            "value 0.31 (result[0] >= 0.2)",
        ],
    ]
    assert _rows(out, "NODE") == [
        ["node-1", "Completed"],
        ["node-2", "Gating", "gate error-rate: Failed"],
        ["node-3", "Waiting"],
    ]

    code, out, err = await aiokcm("status", f"nodemaintenance/{NAME}", "-o", "json")
    assert (code, err) == (0, "")
    assert json.loads(out) == stored["status"]


async def test_status_of_a_maintenance_that_is_not_rolling(kube: KubeClient, aiokcm: Run) -> None:
    await maintenance(kube, "plain", {"nodeSelector": SELECT_ALL, "cordon": True, "drain": True})
    await write_status(
        kube,
        "plain",
        {
            "nodeCount": 2,
            "podsPendingEvacuation": 1,
            "nodes": {
                "node-1": {"phase": "Drained"},
                "node-2": {
                    "phase": "Draining",
                    "podsPendingEvacuation": 1,
                    "blockingPods": [{"namespace": "default", "name": "db-0", "reason": "EvictionRefused"}],
                },
            },
        },
    )
    code, out, err = await aiokcm("status", "plain")
    assert (code, err) == (0, ""), (out, err)
    fields = _fields(out)
    assert fields["Rolling"].startswith("no (no spec.completion)")
    assert (fields["Cordon"], fields["Drain"], fields["Nodes"], fields["Pending pods"]) == (
        "yes",
        "yes",
        "2",
        "1",
    )
    assert "Phase" not in fields and "Gates" not in out
    assert _rows(out, "NODE") == [
        ["node-1", "Drained"],
        ["node-2", "Draining", "blocked by default/db-0: EvictionRefused"],
    ]

    # Nothing written yet by a controller: the object alone.
    await maintenance(kube, "fresh", ROLLING_SPEC)
    code, out, err = await aiokcm("status", "fresh")
    assert (code, err) == (0, "")
    assert _fields(out)["Phase"] == "Pending (no status from the controller yet)"
    assert "No node selected yet." in out and "Gates: none evaluated yet" in out


async def test_a_missing_maintenance_is_exit_1_with_one_line(aiokcm: Run) -> None:
    for action in ("status", "pause", "resume"):
        code, out, err = await aiokcm(action, "ghost")
        assert (code, out, err) == (1, "", 'error: nodemaintenance "ghost" not found\n'), action


# -- pause and resume ------------------------------------------------------------------------------


async def test_pause_then_resume_by_hand(kube: KubeClient, aiokcm: Run) -> None:
    await maintenance(kube, NAME, ROLLING_SPEC)

    code, out, err = await aiokcm("pause", NAME)
    assert (code, err) == (0, ""), err
    assert out == (
        f"nodemaintenance/{NAME} paused (spec.paused: true): no node starts and no gate runs "
        f"until `aiokcm maintenance resume {NAME}`\n"
    )
    nm = await kube.get(NODEMAINTENANCES, NAME)
    assert nm["spec"]["paused"] is True
    assert RESUME_ANNOTATION not in (nm["metadata"].get("annotations") or {})

    code, out, _err = await aiokcm("pause", NAME, plugin=True)  # kubectl maintenance pause NAME
    assert (code, out) == (0, f"nodemaintenance/{NAME} already paused (spec.paused: true)\n")
    assert (await kube.get(NODEMAINTENANCES, NAME))["metadata"]["generation"] == nm["metadata"]["generation"]

    before = utcnow().replace(microsecond=0)
    code, out, err = await aiokcm("resume", NAME)
    after = utcnow()
    assert (code, err) == (0, ""), err
    nm = await kube.get(NODEMAINTENANCES, NAME)
    assert nm["spec"]["paused"] is False
    requested = nm["metadata"]["annotations"][RESUME_ANNOTATION]
    at = parse_time(requested)
    assert requested.endswith("Z") and at is not None and before <= at <= after, requested
    assert out == (
        f"nodemaintenance/{NAME} resumed (spec.paused: false, {RESUME_ANNOTATION}: {requested}); "
        "it was paused by spec.paused\n"
    )


async def test_resume_after_a_gate_asks_for_the_gates_again_never_before_the_pause(
    kube: KubeClient, aiokcm: Run
) -> None:
    now = utcnow()
    await maintenance(kube, NAME, ROLLING_SPEC)
    # The cluster's clock is ahead of ours: the pause it records is later than our "now".
    paused_at = _t(now + timedelta(minutes=10))
    await write_status(kube, NAME, paused_by_gate(now, pausedTime=paused_at))

    code, out, err = await aiokcm("resume", NAME, plugin=True)
    assert (code, err) == (0, ""), err
    nm = await kube.get(NODEMAINTENANCES, NAME)
    assert nm["metadata"]["annotations"][RESUME_ANNOTATION] == paused_at
    assert nm["spec"]["paused"] is False
    assert out.endswith("; it was paused by a gate (GateFailed): the gates that did not pass run again\n")

    # `status` shows the request until the controller honours it.
    code, out, _err = await aiokcm("status", NAME)
    assert _fields(out)["Resume"] == f"requested at {paused_at}, not acted on yet"


async def test_an_aborted_rollout_stays_aborted(kube: KubeClient, aiokcm: Run) -> None:
    now = utcnow()
    await maintenance(kube, NAME, {**ROLLING_SPEC, "paused": True, "onGateFailure": "Abort"})
    status = paused_by_gate(now)
    status["phase"] = "Aborted"
    status["rollout"] = {
        "abortedReason": "GateFailed",
        "abortedMessage": "gate error-rate on node-2: Failed: value 0.31 (result[0] >= 0.2)",
        "abortedTime": _t(now - timedelta(hours=3)),
    }
    await write_status(kube, NAME, status)
    generation = (await kube.get(NODEMAINTENANCES, NAME))["metadata"]["generation"]

    code, out, err = await aiokcm("resume", NAME)
    assert (code, out) == (1, "")
    assert err == (
        f"error: nodemaintenance/{NAME} was aborted (GateFailed: gate error-rate on node-2: Failed: "
        "value 0.31 (result[0] >= 0.2)) and stays aborted; nothing was written (delete it to end the "
        "maintenance)\n"
    )
    nm = await kube.get(NODEMAINTENANCES, NAME)
    assert nm["metadata"]["generation"] == generation and nm["spec"]["paused"] is True
    assert RESUME_ANNOTATION not in (nm["metadata"].get("annotations") or {})

    code, out, _err = await aiokcm("status", NAME)
    fields = _fields(out)
    assert fields["Phase"] == "Aborted"
    assert fields["Aborted"].startswith(
        f"GateFailed at {_t(now - timedelta(hours=3))} (3h ago): gate error-rate"
    )
    assert "an aborted rollout stays aborted; delete the maintenance to end it" in out


async def test_pause_and_resume_refuse_a_maintenance_that_is_not_rolling(
    kube: KubeClient, aiokcm: Run
) -> None:
    await maintenance(kube, "plain", {"nodeSelector": SELECT_ALL, "cordon": True})
    for action in ("pause", "resume"):
        code, out, err = await aiokcm(action, "plain")
        assert (code, out) == (1, "")
        assert err == (
            "error: nodemaintenance/plain is not a rolling maintenance (no spec.completion), so there is "
            f"nothing to {action}; nothing was written\n"
        )
    nm = await kube.get(NODEMAINTENANCES, "plain")
    assert "paused" not in nm["spec"] and RESUME_ANNOTATION not in (nm["metadata"].get("annotations") or {})


# -- complete --------------------------------------------------------------------------------------


async def _completion_world(kube: KubeClient) -> None:
    """reboot (Reboot), by-hand and by-agent (Annotation); node-1 under reboot and by-hand, node-2
    under both Annotation ones, node-3 under reboot only."""
    await maintenance(kube, "reboot", ROLLING_SPEC)
    for name in ("by-hand", "by-agent"):
        await maintenance(kube, name, {**ROLLING_SPEC, "completion": "Annotation"})
    await annotate_node(kube, "node-1", {MAINTENANCES_ANNOTATION: "by-hand,reboot"})
    await annotate_node(kube, "node-2", {MAINTENANCES_ANNOTATION: "by-agent,by-hand"})
    await annotate_node(kube, "node-3", {MAINTENANCES_ANNOTATION: "reboot"})


async def _mark(kube: KubeClient, node: str) -> str | None:
    annotations = (await kube.get(NODES, node))["metadata"].get("annotations") or {}
    value = annotations.get(COMPLETE_ANNOTATION)
    return str(value) if value is not None else None


async def test_complete_marks_the_nodes_only_maintenance_completing_by_annotation(
    kube: KubeClient, aiokcm: Run
) -> None:
    await _completion_world(kube)
    code, out, err = await aiokcm("complete", "node-1")
    assert (code, err) == (0, ""), err
    assert out == (
        f"node/node-1 annotated {COMPLETE_ANNOTATION}=by-hand: nodemaintenance/by-hand releases it and runs "
        "its gates\n"
    )
    assert await _mark(kube, "node-1") == "by-hand"

    code, out, _err = await aiokcm("complete", "node/node-1", plugin=True)  # kubectl maintenance complete
    assert (code, out) == (0, "node/node-1 already marked complete for nodemaintenance/by-hand\n")


async def test_complete_needs_the_maintenance_named_when_the_node_has_several_or_none(
    kube: KubeClient, aiokcm: Run
) -> None:
    await _completion_world(kube)
    code, out, err = await aiokcm("complete", "node-2")
    assert (code, out) == (2, "")
    assert err == (
        "error: node node-2 is under 2 maintenances that complete by annotation (by-agent, by-hand): "
        "pass --maintenance NAME\n"
    )
    code, out, err = await aiokcm("complete", "node-3")
    assert (code, out) == (2, "")
    assert err == (
        "error: node node-3 is under no maintenance that completes by annotation (its maintenances: "
        "reboot): pass --maintenance NAME\n"
    )
    assert await _mark(kube, "node-2") is None and await _mark(kube, "node-3") is None

    code, out, err = await aiokcm("complete", "node-2", "--maintenance", "by-agent")
    assert (code, err) == (0, ""), err
    assert await _mark(kube, "node-2") == "by-agent"


async def test_complete_refuses_what_would_not_complete_anything(kube: KubeClient, aiokcm: Run) -> None:
    await _completion_world(kube)
    refusals = {
        ("ghost",): 'error: node "ghost" not found; nothing was written\n',
        ("node-1", "--maintenance", "nope"): 'error: nodemaintenance "nope" not found\n',
        ("node-1", "--maintenance", "reboot"): (
            "error: nodemaintenance/reboot completes its nodes on completion Reboot, not by annotation; "
            "nothing was written\n"
        ),
        ("node-3", "--maintenance", "by-hand"): (
            "error: node node-3 is not under nodemaintenance/by-hand (its maintenances: reboot); nothing "
            "was written (a mark on a node not started yet would end its maintenance as soon as it drained)\n"
        ),
    }
    for argv, message in refusals.items():
        code, out, err = await aiokcm("complete", *argv)
        assert (code, out, err) == (1, "", message), argv
    for node in ("node-1", "node-3"):
        assert await _mark(kube, node) is None


# -- bad usage, and the description on its own ------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["maintenance"], "error: aiokcm maintenance: the following arguments are required: action"),
        (
            ["maintenance", "status"],
            "error: aiokcm maintenance status: the following arguments are required: NAME",
        ),
        (["maintenance", "status", "x", "-o", "yaml"], "invalid choice: 'yaml'"),
        (["maintenance", "pause", "deployment/x"], "'deployment/x' is not a nodemaintenance"),
        (["maintenance", "complete", "pod/x"], "'pod/x' is not a node"),
        (["maintenance", "resume", "a", "b"], "unrecognized arguments: b"),
    ],
)
def test_bad_usage_is_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    assert cli.kubectl_plugin_main(argv[1:] or ["status"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("error: aiokcm maintenance") for line in err), err
    assert message in err[0]


def test_the_usage_texts_name_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert cli.kubectl_plugin_main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "maintenance status|pause|resume NAME" in out
    assert "maintenance complete NODE [--maintenance NAME]" in out
    assert "kubectl maintenance status|pause|resume NAME" in out
    assert cli.kubectl_plugin_main(["bogus"]) == 2
    assert "status, pause, resume, complete" in capsys.readouterr().err


def test_a_gate_still_running_shows_its_next_evaluation_and_a_stale_status_says_so() -> None:
    now = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    nm = {
        "metadata": {"name": NAME, "generation": 3},
        "spec": {**ROLLING_SPEC, "paused": True},
        "status": {
            "observedGeneration": 2,
            "phase": "Gating",
            "completedNodes": 0,
            "nodeCount": 1,
            "currentNode": "node-1",
            "gates": [
                {
                    "name": "error-rate",
                    "type": "prometheus",
                    "node": "node-1",
                    "result": "Running",
                    "value": "0.01",
                    "successful": 1,
                    "nextEvaluationTime": "2026-12-01T10:00:30Z",
                }
            ],
            "nodes": {"node-1": {"phase": "Gating"}},
        },
    }
    out = "\n".join(describe(nm, now))
    assert _rows(out, "GATE") == [
        [
            "error-rate",
            "prometheus",
            "node-1",
            "Running",
            "0.01",
            "1",
            "0",
            "0",
            "0",
            "2026-12-01T10:00:30Z (in 30s)",
        ]
    ]
    fields = _fields(out)
    assert fields["Spec"] == "paused (spec.paused: true)"
    assert fields["Note"] == "the status is of generation 2, the spec is at 3: not seen yet"
