"""`disruption_test.go`'s cases that go through `dc.sync`: events, writes, fail-safe and the finders' errors.

The controller is built on an in-memory client (`FakeApi`): its informer stores are filled by hand
as the Go tests fill their indexers, `controller.syncer.sync(key)` is `dc.sync(key)`, and the
status writes are what the Go tests' `pdbStates` updater would have stored. Discovery and `/scale`
answer from dicts, as Go's fake discovery and scale clients do.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, cast

import pytest

from apiclient import ApiError, KubeClient
from controllers.context import ControllerContext
from controllers.disruption import DisruptionController
from controllers.disruption.budget import BudgetError, fail_safe_status
from informers import SharedInformerFactory
from kubeutil.timestamps import format_time, utcnow
from tests.controllers.disruption.fixtures import NS, new_pdb, new_pod, new_rs
from tests.controllers.harness import RecordingEvents, build

Obj = dict[str, Any]
KEY = f"{NS}/foobar"
CUSTOM_API = "custom.k8s.io/v1"
CUSTOM_KIND = "customresource"


class FakeApi:
    """Status writes, pod status patches, discovery and `/scale` reads, all in memory."""

    def __init__(self) -> None:
        self.status_writes: list[Obj] = []
        self.pod_patches: list[tuple[str, Obj]] = []
        self.discovery: dict[str, list[Obj]] = {}
        self.scales: dict[str, Obj] = {}
        self.conflicts = 0

    async def replace(self, res: Any, body: Obj, *, namespace: str = "", name: str = "", **_: Any) -> Obj:
        if self.conflicts:
            self.conflicts -= 1
            raise ApiError(409, {"reason": "Conflict", "message": "the object has been modified"})
        self.status_writes.append(body)
        return body

    async def patch(self, res: Any, name: str, body: Obj, *, namespace: str = "", **_: Any) -> Obj:
        self.pod_patches.append((name, body))
        return {}

    async def request(self, method: str, path: str, **_: Any) -> Obj:
        if path in self.discovery:
            return {"resources": self.discovery[path]}
        for suffix, scale in self.scales.items():
            if path.endswith(suffix):
                return scale
        raise ApiError(404, {"reason": "NotFound", "message": f"{path} not found"}, method=method, path=path)


class Harness:
    def __init__(self) -> None:
        self.api = FakeApi()
        self.events = RecordingEvents()
        client = cast(KubeClient, self.api)
        ctx = ControllerContext(client=client, informers=SharedInformerFactory(client), events=self.events)
        self.controller = build(DisruptionController, ctx)

    def add(self, obj: Obj) -> Obj:
        informers = {
            "PodDisruptionBudget": self.controller.pdb_informer,
            "Pod": self.controller.pod_informer,
            "ReplicaSet": self.controller.rs_informer,
        }
        meta = obj["metadata"]
        informers[obj["kind"]].store.update(f"{meta['namespace']}/{meta['name']}", obj)
        return obj

    async def sync(self, key: str = KEY) -> None:
        await self.controller.syncer.sync(key)

    @property
    def status(self) -> Obj:
        return dict(self.api.status_writes[-1]["status"])

    def verify_pdb_status(self, allowed: int, healthy: int, desired: int, expected: int) -> None:
        """`VerifyPdbStatus` (no disrupted pods): the numbers, the generation, the condition's status."""
        st = self.status
        generation = self.api.status_writes[-1]["metadata"].get("generation", 0)
        assert (
            st.get("disruptionsAllowed", 0),
            st.get("currentHealthy", 0),
            st.get("desiredHealthy", 0),
            st.get("expectedPods", 0),
            st.get("disruptedPods") or {},
            st.get("observedGeneration", 0),
        ) == (allowed, healthy, desired, expected, {}, generation)
        assert self.condition()["status"] == ("True" if allowed > 0 else "False")

    def condition(self, type_: str = "DisruptionAllowed") -> Obj:
        return dict(next(c for c in self.status["conditions"] if c["type"] == type_))

    def events_of(self, reason: str) -> list[tuple[str, str, str]]:
        return [(e.object_name, e.type_, e.message) for e in self.events.events if e.reason == reason]


def custom_owned_pod(name: str, uid: str) -> Obj:
    pod = new_pod(name)
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": CUSTOM_API, "kind": CUSTOM_KIND, "uid": uid, "controller": True}
    ]
    return pod


async def test_pdb_not_exist() -> None:
    """TestPDBNotExist: syncing a key with no budget is no error and writes nothing."""
    h = Harness()
    h.add(new_pdb(min_available="67%"))
    await h.sync(f"{NS}/notExist")
    assert h.api.status_writes == []


async def test_no_selector_reports_no_pods() -> None:
    """TestNoSelector's first sync: no pods is a Normal `NoPods` event, not a failure."""
    h = Harness()
    h.add(new_pdb(min_available=3, selector={}))
    await h.sync()
    h.verify_pdb_status(0, 0, 3, 0)
    assert h.events_of("NoPods") == [("foobar", "Normal", "No matching pods found")]
    assert h.condition()["reason"] == "InsufficientPods"


async def test_keep_existing_pdb_condition_during_sync() -> None:
    """TestKeepExistingPDBConditionDuringSync: other conditions on the budget survive the sync."""
    h = Harness()
    pdb = new_pdb(min_available=3, selector={})
    existing = {
        "type": "ExistingTestCondition",
        "status": "True",
        "message": "This is a test condition",
        "reason": "Test",
        "lastTransitionTime": format_time(utcnow()),
    }
    pdb["status"] = {"conditions": [existing]}
    h.add(pdb)
    await h.sync()
    h.verify_pdb_status(0, 0, 3, 0)
    assert len(h.status["conditions"]) == 2
    assert h.condition("ExistingTestCondition") == existing


@pytest.mark.parametrize(
    "budget",
    [{"max_unavailable": 1}, {"min_available": "28%"}],
    ids=["TestIntegerMaxUnavailable", "TestNakedPod / TestStatusForUnmanagedPod"],
)
async def test_unmanaged_pods_are_reported_not_failed(budget: dict[str, Any]) -> None:
    """An unmanaged pod: `UnmanagedPods` (Warning), no disruption, and no `SyncFailed` condition."""
    h = Harness()
    h.add(new_pdb(**budget))
    await h.sync()
    assert h.status["disruptionsAllowed"] == 0
    h.add(new_pod("naked"))
    await h.sync()
    assert h.status["disruptionsAllowed"] == 0
    assert [(name, type_) for name, type_, _ in h.events_of("UnmanagedPods")] == [("foobar", "Warning")]
    assert h.condition()["reason"] == "InsufficientPods"


async def test_unsupported_controller_pod() -> None:
    """TestUnsupportedControllerPod: `CalculateExpectedPodCountFailed`, then fail-safe with Go's message."""
    h = Harness()
    h.add(new_pdb(min_available="28%"))
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
    h.add(pod)
    await h.sync()
    message = 'no matches for kind "TestWorkload" in version "apps.test.io/v1"'
    assert h.events_of("CalculateExpectedPodCountFailed") == [
        ("foobar", "Warning", f"Failed to calculate the number of expected pods: {message}")
    ]
    assert h.status["disruptionsAllowed"] == 0
    assert (h.condition()["reason"], h.condition()["message"]) == ("SyncFailed", message)


async def test_scale_resource() -> None:
    """TestScaleResource: 4 pods of a custom resource whose `/scale` says 10, maxUnavailable 5."""
    h = Harness()
    uid = str(uuid.uuid4())
    h.api.discovery["/apis/custom.k8s.io/v1"] = [{"name": "customresources", "kind": CUSTOM_KIND}]
    h.api.scales["/customresources//scale"] = {
        "metadata": {"namespace": NS, "uid": uid},
        "spec": {"replicas": 10},
    }
    h.add(new_pdb(max_unavailable=5))
    for i in range(4):
        h.add(custom_owned_pod(f"pod-{i}", uid))
    await h.sync()
    h.verify_pdb_status(0, 4, 5, 10)


@pytest.mark.parametrize(
    ("resources", "expect_error"),
    [
        pytest.param(
            [
                {"kind": CUSTOM_KIND, "name": "customresources/status"},
                {"kind": "Scale", "group": "autoscaling", "version": "v1", "name": "customresources/scale"},
                {"kind": CUSTOM_KIND, "name": "customresources"},
            ],
            False,
            id="resource implements scale",
        ),
        pytest.param(
            [
                {"kind": CUSTOM_KIND, "name": "customresources"},
                {"kind": CUSTOM_KIND, "name": "customresources/scale"},
            ],
            True,
            id="resource implements unsupported data format for scale subresource",
        ),
        pytest.param(
            [{"kind": CUSTOM_KIND, "name": "customresources"}], True, id="resource does not implement scale"
        ),
    ],
)
async def test_scale_finder_no_resource(resources: list[Obj], expect_error: bool) -> None:
    """TestScaleFinderNoResource: `/scale` is 404; discovery tells a gone object from a kind without scale."""
    h = Harness()
    h.api.discovery["/apis/custom.k8s.io/v1"] = resources
    ref = {"apiVersion": CUSTOM_API, "kind": CUSTOM_KIND, "uid": str(uuid.uuid4()), "controller": True}
    scale = h.controller.finder.scale
    assert scale is not None
    if expect_error:
        with pytest.raises(BudgetError) as err:
            await scale(ref, NS)
        assert str(err.value) == "customresources.custom.k8s.io does not implement the scale subresource"
    else:
        assert await scale(ref, NS) is None


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "foo", "operator": "illegal", "values": ["bar"]}]},
            '"illegal" is not a valid label selector operator',
        ),
        ({"matchLabels": {"k8s.io/too/many/slashes": "value"}}, None),
    ],
    ids=["illegal operator", "illegal value key"],
)
async def test_invalid_selectors(selector: Obj, message: str | None) -> None:
    """TestInvalidSelectors: fail-safe (0, 0, 0, 0) and a Warning `NoPods` naming the error."""
    h = Harness()
    pdb = new_pdb(min_available=3, selector=selector)
    del pdb["metadata"]["generation"]  # as the Go test's budget: observedGeneration 0 == generation 0
    h.add(pdb)
    await h.sync()
    h.verify_pdb_status(0, 0, 0, 0)
    assert h.condition()["reason"] == "SyncFailed"
    [(_, type_, text)] = h.events_of("NoPods")
    assert type_ == "Warning" and text.startswith("Failed to get pods: ")
    if message is not None:
        assert h.condition()["message"] == message
        assert text == f"Failed to get pods: {message}"


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        (
            {"max_unavailable": "x%"},
            'invalid value for IntOrString: invalid value "x%": strconv.Atoi: parsing "x": invalid syntax',
        ),
        ({"min_available": "3"}, "invalid value for IntOrString: invalid type: string is not a percentage"),
        (
            {"max_unavailable": " 30%"},
            'invalid value for IntOrString: invalid value " 30%": strconv.Atoi: parsing " 30": invalid syntax',
        ),
    ],
    ids=["not a number", "a string without %", "a space before the number"],
)
async def test_bad_int_or_string_fails_safe_with_go_s_message(budget: dict[str, Any], message: str) -> None:
    """`GetScaledValueFromIntOrPercent`'s error is the SyncFailed message, verbatim."""
    h = Harness()
    rs = h.add(new_rs(3))
    rs["kind"] = "ReplicaSet"
    h.add(new_pod("p", owner=rs))
    h.add(new_pdb(**budget))
    await h.sync()
    assert h.status["disruptionsAllowed"] == 0
    assert (h.condition()["reason"], h.condition()["message"]) == ("SyncFailed", message)


async def test_update_pdb_status_conflict_is_requeued_not_failed_safe() -> None:
    """TestUpdatePDBStatusRetries: a 409 on the status write is returned for a requeue; no fail-safe write."""
    h = Harness()
    h.add(new_pdb(min_available=1))
    for name in ("moe", "larry", "curly"):
        h.add(new_pod(name))
    h.api.conflicts = 1
    with pytest.raises(ApiError) as err:
        await h.sync()
    assert err.value.conflict
    assert h.api.status_writes == []
    await h.sync()
    h.verify_pdb_status(2, 3, 1, 3)


async def test_a_disrupted_pod_without_a_time_is_long_expired() -> None:
    """`buildDisruptedPodMap`: an entry with no readable time is Go's zero time: dropped, and `NotDeleted`."""
    h = Harness()
    pdb = new_pdb(min_available=1)
    fresh = format_time(utcnow() - timedelta(seconds=30))
    pdb["status"] = {"disruptedPods": {"p1": None, "p2": "not a time", "p3": fresh}}
    h.add(pdb)
    for name in ("p1", "p2", "p3"):
        h.add(new_pod(name))
    await h.sync()
    assert h.status["disruptedPods"] == {"p3": fresh}
    assert (h.status["currentHealthy"], h.status["disruptionsAllowed"]) == (2, 1)
    assert sorted(name for name, _, _ in h.events_of("NotDeleted")) == ["p1", "p2"]


def test_fail_safe_needs_no_write_when_the_server_omitted_a_zero_generation() -> None:
    """`SetStatusCondition` compares Go fields: an omitted `observedGeneration` is 0, an omitted message ""."""
    pdb = new_pdb(min_available=1)
    pdb["status"] = {
        "disruptionsAllowed": 0,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "False",
                "reason": "SyncFailed",
                "message": "boom",
                "lastTransitionTime": "2024-05-01T10:00:00Z",
            }
        ],
    }
    assert fail_safe_status(pdb, "boom", utcnow()) is None


# -- TestStalePodDisruption, through the stale-pod worker's sync ------------------------------------


def disruption_target(status: str, *, reason: str = "EvictionByEvictionAPI", ago: timedelta) -> Obj:
    return {
        "type": "DisruptionTarget",
        "status": status,
        "reason": reason,
        "message": "Eviction API: evicting",
        "lastTransitionTime": format_time(utcnow() - ago),
    }


async def test_stale_pod_disruption_is_reset_as_a_whole_condition() -> None:
    """TestStalePodDisruption "stale pod disruption": `{DisruptionTarget, False}` replaces the whole condition."""
    h = Harness()
    pod = new_pod("foo", ready=False)
    pod["status"]["conditions"] = [disruption_target("True", ago=timedelta(minutes=2, seconds=1))]
    h.add(pod)
    await h.controller.stale_syncer.sync(f"{NS}/foo")
    [(name, patch)] = h.api.pod_patches
    [cond] = patch["status"]["conditions"]
    assert name == "foo" and patch["metadata"] == {"uid": pod["metadata"]["uid"]}
    assert {k: v for k, v in cond.items() if k != "lastTransitionTime"} == {
        "type": "DisruptionTarget",
        "status": "False",
        "reason": None,
        "message": None,
        "lastProbeTime": None,
    }


IN_PROGRESS = ("True", "EvictionByEvictionAPI", timedelta(minutes=1, seconds=30))
OLD = ("True", "EvictionByEvictionAPI", timedelta(minutes=3))


@pytest.mark.parametrize(
    ("condition", "terminating", "phase"),
    [
        pytest.param(IN_PROGRESS, False, "Running", id="pod disruption in progress"),
        pytest.param(OLD, True, "Running", id="pod disruption actuated"),
        pytest.param(None, True, "Running", id="no pod disruption"),
        pytest.param(
            ("False", "EvictionByEvictionAPI", timedelta(minutes=3)),
            True,
            "Running",
            id="pod disruption cleared",
        ),
        pytest.param(OLD, False, "Failed", id="terminal pod"),
        pytest.param(
            ("True", "TerminationByKubelet", timedelta(minutes=3)), False, "Running", id="kubelet's condition"
        ),
    ],
)
async def test_stale_pod_disruption_left_alone(
    condition: tuple[str, str, timedelta] | None, terminating: bool, phase: str
) -> None:
    """The other TestStalePodDisruption cases (and the kubelet's and terminal pods): no write."""
    h = Harness()
    pod = new_pod("foo", ready=False)
    pod["status"]["phase"] = phase
    if condition is not None:
        status, reason, ago = condition
        pod["status"]["conditions"] = [disruption_target(status, reason=reason, ago=ago)]
    if terminating:
        pod["metadata"]["deletionTimestamp"] = format_time(utcnow())
    h.add(pod)
    await h.controller.stale_syncer.sync(f"{NS}/foo")
    assert h.api.pod_patches == []
