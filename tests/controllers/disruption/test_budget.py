"""`disruption_test.go`'s cases as objects in, status out, on the pure computation.

Each test keeps the Kubernetes test's name in its docstring and asserts KCM's
`VerifyPdbStatus(disruptionsAllowed, currentHealthy, desiredHealthy, expectedPods, disruptedPods)`.
`Sim` plays the fake updater: a computed status is stored on the budget, so the next sync starts
from it, exactly as the Go tests chain `dc.sync` calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controllers.disruption.budget import (
    Budget,
    BudgetError,
    compute_budget,
    expected_scale,
    fail_safe_status,
    new_status,
)
from controllers.disruption.finders import ControllerFinder, parse_group_version
from controllers.disruption.stalepodsync import stale_disruption_wait
from kubeutil.selectors import SelectorError, from_label_selector
from kubeutil.timestamps import format_time
from tests.controllers.disruption.fixtures import (
    NS,
    new_deployment,
    new_pdb,
    new_pod,
    new_rc,
    new_rs,
    new_statefulset,
    set_owner,
)

Obj = dict[str, Any]
#: `VerifyPdbStatus`'s order: disruptionsAllowed, currentHealthy, desiredHealthy, expectedPods, disruptedPods.
Status = tuple[int, int, int, int, dict[str, str]]
NOW = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)


class Store:
    """A lister over a dict: `get(name, namespace)` as the informers' listers answer."""

    def __init__(self) -> None:
        self.objs: dict[tuple[str, str], Obj] = {}

    def add(self, obj: Obj) -> Obj:
        self.objs[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
        return obj

    def get(self, name: str, namespace: str | None = None) -> Obj | None:
        return self.objs.get((namespace or "", name))


@dataclass
class Sim:
    """One budget, its candidate pods and the workloads: `sync()` stores and returns the status."""

    pdb: Obj
    pods: list[Obj] = field(default_factory=list)
    rcs: Store = field(default_factory=Store)
    rss: Store = field(default_factory=Store)
    deps: Store = field(default_factory=Store)
    sss: Store = field(default_factory=Store)
    evacuation: bool = False
    last: Budget | None = None

    @property
    def finder(self) -> ControllerFinder:
        return ControllerFinder(
            rcs=self.rcs, replicasets=self.rss, deployments=self.deps, statefulsets=self.sss
        )

    async def sync(self, now: datetime = NOW) -> Status:
        try:
            selector = from_label_selector(self.pdb["spec"].get("selector"))
            selected = [p for p in self.pods if selector.matches(p["metadata"].get("labels"))]
            self.last = await compute_budget(self.pdb, selected, self.finder, now, evacuation=self.evacuation)
        except (BudgetError, SelectorError) as exc:
            status = fail_safe_status(self.pdb, str(exc), now)
        else:
            status = new_status(self.pdb, self.last, now)
        if status is not None:
            self.pdb["status"] = status
        return self.observed()

    def observed(self) -> Status:
        st = self.pdb.get("status") or {}
        return (
            st.get("disruptionsAllowed", 0),
            st.get("currentHealthy", 0),
            st.get("desiredHealthy", 0),
            st.get("expectedPods", 0),
            dict(st.get("disruptedPods") or {}),
        )

    def condition(self) -> Mapping[str, Any]:
        return next(c for c in self.pdb["status"]["conditions"] if c["type"] == "DisruptionAllowed")


def unready(pod: Obj) -> None:
    pod["status"]["conditions"] = []


async def test_no_selector_matches_all_pods() -> None:
    """TestNoSelector: an empty selector `{}` selects every pod of the namespace."""
    sim = Sim(new_pdb(min_available=3, selector={}))
    assert await sim.sync() == (0, 0, 3, 0, {})
    sim.pods.append(new_pod("yo-yo-yo", labels={"other": "x"}))
    assert await sim.sync() == (0, 1, 3, 1, {})


async def test_unavailable() -> None:
    """TestUnavailable: counts rise with each pod; one unready pod takes the disruption away."""
    sim = Sim(new_pdb(min_available=3))
    await sim.sync()
    for i in range(4):
        assert sim.observed() == (0, i, 3, i, {})
        sim.pods.append(new_pod(f"yo-yo-yo {i}"))
        await sim.sync()
    assert sim.observed() == (1, 4, 3, 4, {})
    assert sim.condition()["reason"] == "SufficientPods" and sim.condition()["status"] == "True"
    unready(sim.pods[0])
    assert await sim.sync() == (0, 3, 3, 4, {})
    assert sim.condition()["reason"] == "InsufficientPods" and sim.condition()["status"] == "False"


async def test_integer_max_unavailable_naked_pod() -> None:
    """TestIntegerMaxUnavailable: no pods, then an unmanaged pod: never a disruption."""
    sim = Sim(new_pdb(max_unavailable=1))
    assert (await sim.sync())[0] == 0
    sim.pods.append(new_pod("naked"))
    assert (await sim.sync())[0] == 0
    assert sim.last is not None and sim.last.unmanaged_pods == ["naked"]


@pytest.mark.parametrize(
    ("max_unavailable", "first", "second"),
    [(2, (0, 1, 5, 7, {}), (0, 1, 3, 5, {})), ("30%", (0, 1, 4, 7, {}), (0, 1, 2, 3, {}))],
    ids=["TestIntegerMaxUnavailableWithScaling", "TestPercentageMaxUnavailableWithScaling"],
)
async def test_max_unavailable_follows_scale(
    max_unavailable: int | str, first: tuple[Any, ...], second: tuple[Any, ...]
) -> None:
    """maxUnavailable against the ReplicaSet's scale, recomputed when the ReplicaSet scales."""
    sim = Sim(new_pdb(max_unavailable=max_unavailable))
    rs = sim.rss.add(new_rs(7))
    sim.pods.append(new_pod("pod", owner=rs))
    assert await sim.sync() == first
    rs["spec"]["replicas"] = 5 if max_unavailable == 2 else 3
    assert await sim.sync() == second


async def test_naked_pod_percentage() -> None:
    """TestNakedPod / TestStatusForUnmanagedPod / TestTotalUnmanagedPods: 28% over an unmanaged pod."""
    sim = Sim(new_pdb(min_available="28%"))
    assert (await sim.sync())[0] == 0
    sim.pods.append(new_pod("unmanaged"))
    assert (await sim.sync())[0] == 0
    assert sim.last is not None and sim.last.unmanaged_pods == ["unmanaged"]
    # Not a sync failure: the condition is the ordinary InsufficientPods.
    assert sim.condition()["reason"] == "InsufficientPods"
    total, unmanaged = await expected_scale(sim.pods, sim.finder)
    assert (total, unmanaged) == (0, ["unmanaged"])


async def test_unsupported_controller_pod_fails_safe() -> None:
    """TestUnsupportedControllerPod: a controller no finder knows is a sync failure: allowed 0."""
    sim = Sim(new_pdb(min_available="28%"))
    await sim.sync()
    pod = new_pod("naked")
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps.test.io/v1",
            "kind": "TestWorkload",
            "name": "fake-controller",
            "uid": "b7329742-8daa-493a-8881-6ca07139172b",
            "controller": True,
        }
    ]
    sim.pods.append(pod)
    assert (await sim.sync())[0] == 0
    cond = sim.condition()
    assert (cond["status"], cond["reason"]) == ("False", "SyncFailed")
    assert "found no controllers" in cond["message"]


async def test_replicaset_without_deployment() -> None:
    """TestReplicaSet: 20% of a ReplicaSet of 10 with one pod."""
    sim = Sim(new_pdb(min_available="20%"))
    rs = sim.rss.add(new_rs(10))
    sim.pods.append(new_pod("pod", owner=rs))
    assert await sim.sync() == (0, 1, 2, 10, {})


async def test_multiple_controllers_percent() -> None:
    """TestMultipleControllers: 1% of pods with no controller, then of a one-replica RC."""
    sim = Sim(new_pdb(min_available="1%"))
    pods = [new_pod(f"pod {i}") for i in range(2)]
    sim.pods.extend(pods)
    assert (await sim.sync())[0] == 0
    rc = sim.rcs.add(new_rc(1, name="rc 1"))
    for pod in pods:
        set_owner(pod, rc)
    assert (await sim.sync())[0] == 1


@pytest.mark.parametrize("kind", ["ReplicationController", "StatefulSet"])
async def test_controller_34_percent_rounds_up(kind: str) -> None:
    """TestReplicationController / TestStatefulSetController: 34% of 3 rounds up to 2."""
    labels = {"foo": "bar", "baz": "quux"}
    sim = Sim(new_pdb(min_available="34%"))
    owner = (
        sim.rcs.add(new_rc(3, labels=labels))
        if kind == "ReplicationController"
        else sim.sss.add(new_statefulset(3))
    )
    assert await sim.sync() == (0, 0, 0, 0, {})
    for i in range(3):
        sim.pods.append(new_pod(f"foobar {i}", labels=labels, owner=owner))
        expected: Status = (0, i + 1, 2, 3, {}) if i < 2 else (1, 3, 2, 3, {})
        assert await sim.sync() == expected
    if kind == "ReplicationController":
        # A rogue pod with only foo=bar: unmanaged but healthy, so it still counts.
        sim.pods.append(new_pod("rogue"))
        assert (await sim.sync())[0] == 2


async def test_two_controllers() -> None:
    """TestTwoControllers: an RC and a Deployment's ReplicaSet of 11 each under 28%."""
    rc_labels = {"foo": "bar", "baz": "quux"}
    d_labels = {"foo": "bar", "baz": "quuux"}
    size, minimum_one, minimum_two = 11, 4, 7
    sim = Sim(new_pdb(min_available="28%"))
    rc = sim.rcs.add(new_rc(size, labels=rc_labels))
    assert await sim.sync() == (0, 0, 0, 0, {})
    pods: list[Obj] = []
    unavailable = size - minimum_one - 1
    for i in range(1, size + 1):
        pod = new_pod(f"quux {i}", labels=rc_labels, owner=rc, ready=i > unavailable)
        pods.append(pod)
        sim.pods.append(pod)
        await sim.sync()
        if i <= unavailable:
            assert sim.observed() == (0, 0, minimum_one, size, {})
        elif i - unavailable <= minimum_one:
            assert sim.observed() == (0, i - unavailable, minimum_one, size, {})
        else:
            assert sim.observed() == (1, i - unavailable, minimum_one, size, {})
    dep = sim.deps.add(new_deployment(size, labels=d_labels))
    assert await sim.sync() == (1, minimum_one + 1, minimum_one, size, {})
    rs = sim.rss.add(new_rs(size, labels=d_labels))
    set_owner(rs, dep)
    assert await sim.sync() == (1, minimum_one + 1, minimum_one, size, {})
    unavailable = 2 * size - (minimum_two + 2) - unavailable
    for i in range(1, size + 1):
        pod = new_pod(f"quuux {i}", labels=d_labels, owner=rs, ready=i > unavailable)
        pods.append(pod)
        sim.pods.append(pod)
        await sim.sync()
        if i <= unavailable:
            assert sim.observed() == (0, minimum_one + 1, minimum_two, 2 * size, {})
        elif i - unavailable <= minimum_two - (minimum_one + 1):
            assert sim.observed() == (0, minimum_one + 1 + i - unavailable, minimum_two, 2 * size, {})
        else:
            allowed = i - unavailable - (minimum_two - (minimum_one + 1))
            assert sim.observed() == (allowed, minimum_one + 1 + i - unavailable, minimum_two, 2 * size, {})
    assert sim.observed() == (2, 2 + minimum_two, minimum_two, 2 * size, {})
    unready(pods[size - 1])
    assert await sim.sync() == (1, 1 + minimum_two, minimum_two, 2 * size, {})
    unready(pods[size - 2])
    assert await sim.sync() == (0, minimum_two, minimum_two, 2 * size, {})
    pods[size - 1]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert await sim.sync() == (1, 1 + minimum_two, minimum_two, 2 * size, {})


async def test_update_disrupted_pods() -> None:
    """TestUpdateDisruptedPods: terminating, expired and vanished entries go; a fresh one stays."""
    pdb = new_pdb(min_available=1)
    p3_time = format_time(NOW - timedelta(minutes=1))
    pdb["status"] = {
        "disruptedPods": {
            "p1": format_time(NOW),
            "p2": format_time(NOW - timedelta(minutes=3)),
            "p3": p3_time,
            "notthere": format_time(NOW),
        }
    }
    sim = Sim(pdb)
    p1 = new_pod("p1")
    p1["metadata"]["deletionTimestamp"] = format_time(NOW)
    sim.pods.extend([p1, new_pod("p2"), new_pod("p3")])
    assert await sim.sync() == (0, 1, 1, 3, {"p3": p3_time})
    assert sim.last is not None
    # Rechecked when p3's entry expires; p2's expiry is reported (KCM's NotDeleted event).
    assert sim.last.recheck_at == NOW + timedelta(minutes=1)
    assert [p["metadata"]["name"] for p in sim.last.expired_pods] == ["p2"]


def test_finder_functions() -> None:
    """TestBasicFinderFunctions: each finder resolves its own kind and group only."""
    sim = Sim(new_pdb(min_available=1))
    rs = sim.rss.add(new_rs(10))
    rc = sim.rcs.add(new_rc(12))
    ss = sim.sss.add(new_statefulset(14))
    f = sim.finder

    def ref(api_version: str, kind: str, obj: Obj) -> dict[str, Any]:
        return {
            "apiVersion": api_version,
            "kind": kind,
            "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"],
        }

    found = f.replicaset(ref("apps/v1", "ReplicaSet", rs), NS)
    assert found is not None and (found.scale, found.uid) == (10, rs["metadata"]["uid"])
    assert f.replicaset(ref("invalid/v1", "ReplicaSet", rs), NS) is None
    found = f.replication_controller(ref("/v1", "ReplicationController", rc), NS)
    assert found is not None and found.scale == 12
    assert f.replication_controller(ref("apps/v1", "ReplicationController", rc), NS) is None
    found = f.statefulset(ref("apps/v1", "StatefulSet", ss), NS)
    assert found is not None and found.scale == 14
    assert f.statefulset(ref("apps/v1", "ReplicaSet", ss), NS) is None
    # A namesake with another UID is not the pod's controller.
    assert f.replicaset({**ref("apps/v1", "ReplicaSet", rs), "uid": "other"}, NS) is None


@pytest.mark.parametrize(
    ("rs_api", "rs_kind", "dep_api", "dep_kind", "finds"),
    [
        ("apps/v1", "ReplicaSet", "extensions/v1", "Deployment", True),
        ("invalid/v1", "ReplicaSet", "apps/v1", "Deployment", False),
        ("apps/v1", "InvalidKind", "apps/v1", "Deployment", False),
        ("extensions/v1", "ReplicaSet", "deployment/v1", "Deployment", False),
        ("apps/v1", "ReplicaSet", "extensions/v1", "InvalidKind", False),
    ],
    ids=[
        "happy path",
        "invalid rs apiVersion",
        "invalid rs kind",
        "invalid deployment apiVersion",
        "invalid deployment kind",
    ],
)
def test_deployment_finder(rs_api: str, rs_kind: str, dep_api: str, dep_kind: str, finds: bool) -> None:
    """TestDeploymentFinderFunction: a Deployment's scale through the ReplicaSet it controls."""
    sim = Sim(new_pdb(min_available=1))
    dep = sim.deps.add(new_deployment(10))
    rs = sim.rss.add(new_rs(5))
    set_owner(rs, dep, api_version=dep_api, kind=dep_kind)
    ref = {
        "apiVersion": rs_api,
        "kind": rs_kind,
        "name": rs["metadata"]["name"],
        "uid": rs["metadata"]["uid"],
    }
    found = sim.finder.deployment(ref, NS)
    if finds:
        assert found is not None and (found.scale, found.uid) == (10, dep["metadata"]["uid"])
    else:
        assert found is None


def test_parse_group_version() -> None:
    """`schema.ParseGroupVersion`: the core group, a named group, and too many slashes."""
    assert parse_group_version("v1") == ("", "v1")
    assert parse_group_version("apps/v1") == ("apps", "v1")
    with pytest.raises(BudgetError):
        parse_group_version("a/b/c")


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {"k8s.io/too/many/slashes": "value"}},
        {"matchExpressions": [{"key": "foo", "operator": "illegal", "values": ["bar"]}]},
    ],
    ids=["illegal value key", "illegal operator"],
)
async def test_invalid_selectors_fail_safe(selector: Obj) -> None:
    """TestInvalidSelectors: (0, 0, 0, 0) and DisruptionAllowed=False/SyncFailed."""
    sim = Sim(new_pdb(min_available=3, selector=selector))
    sim.pods.append(new_pod("pod"))
    assert await sim.sync() == (0, 0, 0, 0, {})
    assert sim.condition()["reason"] == "SyncFailed"


async def test_fail_safe_keeps_other_fields() -> None:
    """failSafe zeroes only disruptionsAllowed: the last known counts stay for the user to see."""
    sim = Sim(new_pdb(min_available=1))
    rs = sim.rss.add(new_rs(3))
    sim.pods.extend(new_pod(f"p{i}", owner=rs) for i in range(3))
    assert await sim.sync() == (2, 3, 1, 3, {})
    sim.pdb["spec"] = {**sim.pdb["spec"], "minAvailable": None, "maxUnavailable": "x%"}
    assert await sim.sync() == (0, 3, 1, 3, {})
    assert sim.condition()["reason"] == "SyncFailed"
    # The same failure again changes nothing: no write.
    assert fail_safe_status(sim.pdb, sim.condition()["message"], NOW) is None


async def test_status_written_only_when_changed() -> None:
    """updatePdbStatus: an unchanged budget yields no status to write; a new generation does."""
    sim = Sim(new_pdb(min_available=1))
    sim.pods.append(new_pod("p"))
    await sim.sync()
    assert sim.last is not None
    assert new_status(sim.pdb, sim.last, NOW) is None
    sim.pdb["metadata"]["generation"] = 2
    status = new_status(sim.pdb, sim.last, NOW)
    assert status is not None and status["observedGeneration"] == 2
    assert status["conditions"][0]["observedGeneration"] == 2


async def test_unhealthy_pod_eviction_policy_does_not_change_numbers() -> None:
    """`unhealthyPodEvictionPolicy` only matters to the eviction API, never to the status."""
    results = []
    for policy in (None, "IfHealthyBudget", "AlwaysAllow"):
        pdb = new_pdb(min_available=2)
        if policy:
            pdb["spec"]["unhealthyPodEvictionPolicy"] = policy
        sim = Sim(pdb, pods=[new_pod("a"), new_pod("b"), new_pod("c", ready=False)])
        results.append(await sim.sync())
    assert results == [(0, 2, 2, 3, {})] * 3


async def test_evacuating_pods_are_disrupted() -> None:
    """KEP-4212: with the gate, EvacuationInitiated pods are not healthy, so surge pods are protected."""
    rs = new_rs(3)
    pods = [new_pod(f"p{i}", owner=rs) for i in range(3)] + [new_pod("surge", owner=rs)]
    pods[0]["status"]["conditions"].append({"type": "EvacuationInitiated", "status": "True"})
    cases: list[tuple[bool, Status]] = [(False, (2, 4, 2, 4, {})), (True, (1, 3, 2, 4, {}))]
    for evacuation, expected in cases:
        sim = Sim(new_pdb(min_available=2), pods=pods, evacuation=evacuation)
        assert await sim.sync() == expected
        assert sim.last is not None and sim.last.evacuating_pods == (1 if evacuation else 0)


@pytest.mark.parametrize(
    ("name", "condition", "terminating", "passed", "stale"),
    [
        ("stale pod disruption", {"status": "True"}, False, 121, True),
        ("pod disruption in progress", {"status": "True"}, False, 119, False),
        ("pod disruption actuated", {"status": "True"}, True, 121, None),
        ("no pod disruption", None, True, 121, None),
        ("pod disruption cleared", {"status": "False"}, False, 121, None),
        ("kubelet's condition", {"status": "True", "reason": "TerminationByKubelet"}, False, 121, None),
    ],
)
def test_stale_pod_disruption(
    name: str, condition: Obj | None, terminating: bool, passed: int, stale: bool | None
) -> None:
    """TestStalePodDisruption: only a non-terminating pod's DisruptionTarget older than 2 min is stale."""
    pod = new_pod("foo", ready=False)
    if condition is not None:
        pod["status"]["conditions"] = [
            {"type": "DisruptionTarget", "lastTransitionTime": format_time(NOW), **condition}
        ]
    if terminating:
        pod["metadata"]["deletionTimestamp"] = format_time(NOW)
    wait = stale_disruption_wait(pod, NOW + timedelta(seconds=passed))
    if stale is None:
        assert wait is None
    elif stale:
        assert wait == 0.0
    else:
        assert wait == pytest.approx(1.0)
