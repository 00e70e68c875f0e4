"""`taint_eviction_test.go` (KCM's NoExecute taint manager), case for case, on a virtual clock.

Each Go case builds the controller on a fake clientset, fills the informer indexers by hand, calls
`PodUpdated` / `NodeUpdated` and then polls the clientset's actions for up to 5 s
(`verifyPodActions`). Here the informer stores are filled by hand, the informer handlers are called
the way the informers call them, the workers run, and the actions are read after 5 s of loop time
(`looptime`: no real sleeping). Pods are `testutil.NewPod`'s: namespace `default`, no UID.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import pytest

from apiclient import KubeClient
from controllers.context import ControllerContext, EventRecorder
from controllers.tainteviction import TaintEvictionController
from controllers.tainteviction.evictionsync import disruption_target_update
from informers import SharedInformerFactory
from tests.controllers.harness import build

pytestmark = pytest.mark.looptime

Obj = dict[str, Any]
NS = "default"
#: `verifyPodActions` polls for at most 5 s.
VERIFY_WINDOW = 5.0


# -- `testutil` and the Go file's helpers -------------------------------------------------------


def new_pod(name: str, host: str) -> Obj:
    """`testutil.NewPod`: Ready, bound to `host`, no UID."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"nodeName": host},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def new_node(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}}


def no_execute_taint(index: int) -> Obj:
    """`createNoExecuteTaint`."""
    return {
        "key": f"testTaint{index}",
        "value": f"test{index}",
        "effect": "NoExecute",
        "timeAdded": "2024-05-01T10:00:00Z",
    }


def add_toleration(pod: Obj, index: int, duration: int) -> Obj:
    """`addToleration`: a negative duration tolerates forever (no `tolerationSeconds`)."""
    toleration: Obj = {"key": f"testTaint{index}", "value": f"test{index}", "effect": "NoExecute"}
    if duration >= 0:
        toleration["tolerationSeconds"] = duration
    pod["spec"]["tolerations"] = [toleration]
    return pod


def add_taints_to_node(node: Obj, indices: list[int]) -> Obj:
    """`addTaintsToNode`."""
    node["spec"]["taints"] = [no_execute_taint(i) for i in indices]
    return node


# -- the fake clientset and the running controller -----------------------------------------------


@dataclass
class FakeClientset:
    """Records pod status patches and deletes as the Go fake clientset's actions."""

    actions: list[tuple[str, str]] = field(default_factory=list)

    async def patch(self, res: Any, name: str, body: Any, *, namespace: str = "", **_: Any) -> Obj:
        self.actions.append(("patch", name))
        return {}

    async def delete(self, res: Any, name: str, *, namespace: str = "", **_: Any) -> Obj:
        self.actions.append(("delete", name))
        return {}

    def verbs(self) -> set[str]:
        return {verb for verb, _ in self.actions}

    def deleted(self) -> list[str]:
        return [name for verb, name in self.actions if verb == "delete"]


@dataclass
class RecordedEvent:
    involved: Mapping[str, Any]
    type_: str
    reason: str
    message: str


@dataclass
class ObjectEvents:
    """Keeps the object each event was raised on, to compare it with KCM's `ObjectReference`."""

    events: list[RecordedEvent] = field(default_factory=list)

    def recorder(self, component: str) -> EventRecorder:
        events = self.events

        class _Recorder:
            def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
                events.append(RecordedEvent(obj, type_, reason, message))

        return _Recorder()

    def messages(self) -> list[str]:
        return [e.message for e in self.events]


@dataclass
class Run:
    controller: TaintEvictionController
    client: FakeClientset
    events: ObjectEvents

    def add_pod(self, pod: Obj) -> None:
        """`podIndexer.Add` / `Update`."""
        self.controller.pod_informer.store.update(f"{NS}/{pod['metadata']['name']}", pod)

    def add_node(self, node: Obj) -> None:
        """`nodeIndexer.Add` / `Update`."""
        self.controller.node_informer.store.update(node["metadata"]["name"], node)

    def pod_updated(self, old: Obj | None, new: Obj | None) -> None:
        """`PodUpdated(old, new)`, as the pod informer's add / update / delete handlers call it."""
        c = self.controller
        if old is None and new is not None:
            c._pod_added(new)
        elif old is not None and new is not None:
            c._pod_updated(old, new)
        elif old is not None:
            c._pod_deleted(old)

    def node_updated(self, old: Obj | None, new: Obj | None) -> None:
        """`NodeUpdated(old, new)`, as the node informer's handlers call it."""
        c = self.controller
        if old is None and new is not None:
            c._node_added(new)
        elif old is not None and new is not None:
            c._node_updated(old, new)
        elif old is not None:
            c._node_deleted(old)

    def scheduled(self, name: str) -> float | None:
        """`taintEvictionQueue.GetWorkerUnsafe(key)` is not nil: a deletion is pending."""
        work = self.controller.evictions.get_work(f"{NS}/{name}")
        return None if work is None else work.fire_at

    async def verify(self, *, patch: bool, delete: bool) -> None:
        """`verifyPodActions`: what was done by the end of the 5 s window."""
        await anyio.sleep(VERIFY_WINDOW)
        assert ("patch" in self.client.verbs(), "delete" in self.client.verbs()) == (patch, delete)


@asynccontextmanager
async def running(
    pods: list[Obj] | None = None, tainted: Mapping[str, list[Obj]] | None = None
) -> AsyncIterator[Run]:
    """`setupNewController` + `go controller.Run(ctx)`, with `pods` in the pod indexer."""
    client = FakeClientset()
    events = ObjectEvents()
    kube = cast(KubeClient, client)
    ctx = ControllerContext(client=kube, informers=SharedInformerFactory(kube), events=events)
    controller = build(TaintEvictionController, ctx)
    run = Run(controller, client, events)
    for pod in pods or []:
        run.add_pod(pod)
    controller.schedule_sync.tainted.update({k: list(v) for k, v in (tainted or {}).items()})
    with anyio.fail_after(3600):
        async with anyio.create_task_group() as tg:
            controller.start_workers(tg, controller.workers)
            yield run
            controller.stop()


TAINTED_NODE1 = {"node1": [no_execute_taint(1)]}


# -- TestCreatePod ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "tainted", "expect_patch", "expect_delete"),
    [
        pytest.param(new_pod("pod1", ""), {}, False, False, id="not scheduled - ignore"),
        pytest.param(new_pod("pod1", "node1"), {}, False, False, id="scheduled on untainted Node"),
        pytest.param(new_pod("pod1", "node1"), TAINTED_NODE1, True, True, id="schedule on tainted Node"),
        pytest.param(
            add_toleration(new_pod("pod1", "node1"), 1, 100),
            TAINTED_NODE1,
            False,
            False,
            id="schedule on tainted Node with finite toleration",
        ),
        pytest.param(
            add_toleration(new_pod("pod1", "node1"), 1, -1),
            TAINTED_NODE1,
            False,
            False,
            id="schedule on tainted Node with infinite toleration",
        ),
        pytest.param(
            add_toleration(new_pod("pod1", "node1"), 2, -1),
            TAINTED_NODE1,
            True,
            True,
            id="schedule on tainted Node with infinite invalid toleration",
        ),
    ],
)
async def test_create_pod(
    pod: Obj, tainted: dict[str, list[Obj]], expect_patch: bool, expect_delete: bool
) -> None:
    """TestCreatePod."""
    async with running(tainted=tainted) as run:
        run.add_pod(pod)
        run.pod_updated(None, pod)
        await run.verify(patch=expect_patch, delete=expect_delete)


# -- TestDeletePod ------------------------------------------------------------------------------


async def test_delete_pod() -> None:
    """TestDeletePod: a deleted pod on a tainted node is only a cancellation (nothing to cancel)."""
    async with running(tainted=TAINTED_NODE1) as run:
        run.pod_updated(new_pod("pod1", "node1"), None)
        await anyio.sleep(0.02)
        assert run.client.actions == []
        assert run.events.events == []


async def test_deleting_a_pod_cancels_its_scheduled_deletion_with_an_event() -> None:
    """`handlePodUpdate` on a pod gone from the cache: `cancelWorkWithEvent`, as KCM's reference."""
    pod = add_toleration(new_pod("pod1", "node1"), 1, 100)
    async with running(tainted=TAINTED_NODE1) as run:
        run.add_pod(pod)
        run.pod_updated(None, pod)
        await anyio.sleep(0.01)
        assert run.scheduled("pod1") is not None
        run.controller.pod_informer.store.delete(f"{NS}/pod1")
        run.pod_updated(pod, None)
        await anyio.sleep(200)
        assert run.scheduled("pod1") is None
        assert run.client.actions == []
        assert run.events.messages() == [f"Cancelling deletion of Pod {NS}/pod1"]


# -- TestUpdatePod ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prev", "new", "await_scheduled", "expect_patch", "expect_delete"),
    [
        pytest.param(
            new_pod("pod1", ""),
            new_pod("pod1", "node1"),
            False,
            True,
            True,
            id="scheduling onto tainted Node",
        ),
        pytest.param(
            add_toleration(new_pod("pod1", ""), 1, -1),
            add_toleration(new_pod("pod1", "node1"), 1, -1),
            False,
            False,
            False,
            id="scheduling onto tainted Node with toleration",
        ),
        pytest.param(
            add_toleration(new_pod("pod1", "node1"), 1, 100),
            new_pod("pod1", "node1"),
            True,
            True,
            True,
            id="removing toleration",
        ),
        pytest.param(
            add_toleration(new_pod("pod1", "node1"), 1, 1),
            add_toleration(new_pod("pod1", "node1"), 1, 100),
            True,
            True,
            True,
            id="lengthening toleration shouldn't work",
        ),
    ],
)
async def test_update_pod(
    prev: Obj, new: Obj, await_scheduled: bool, expect_patch: bool, expect_delete: bool
) -> None:
    """TestUpdatePod."""
    async with running(tainted=TAINTED_NODE1) as run:
        run.add_pod(prev)
        run.pod_updated(None, prev)
        if await_scheduled:
            await anyio.sleep(0.01)
            assert run.scheduled("pod1") is not None
        run.add_pod(new)
        run.pod_updated(prev, new)
        await run.verify(patch=expect_patch, delete=expect_delete)


async def test_lengthening_a_toleration_at_the_same_instant_keeps_the_first_schedule() -> None:
    """TestUpdatePod "lengthening toleration shouldn't work", with no time passing in between."""
    prev = add_toleration(new_pod("pod1", "node1"), 1, 1)
    new = add_toleration(new_pod("pod1", "node1"), 1, 100)
    async with running(tainted=TAINTED_NODE1) as run:
        run.add_pod(new)
        start = anyio.current_time()
        run.controller.schedule_sync.process_pod_on_node(prev, TAINTED_NODE1["node1"], start)
        run.controller.schedule_sync.process_pod_on_node(new, TAINTED_NODE1["node1"], start)
        assert run.scheduled("pod1") == start + 1
        await anyio.sleep(1.5)
        assert run.client.deleted() == ["pod1"]


# -- TestCreateNode -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pods", "node", "expect_patch", "expect_delete"),
    [
        pytest.param(
            [new_pod("pod1", "node1")],
            new_node("node1"),
            False,
            False,
            id="Creating Node matching already assigned Pod",
        ),
        pytest.param(
            [new_pod("pod1", "node1")],
            add_taints_to_node(new_node("node1"), [1]),
            True,
            True,
            id="Creating tainted Node matching already assigned Pod",
        ),
        pytest.param(
            [add_toleration(new_pod("pod1", "node1"), 1, -1)],
            add_taints_to_node(new_node("node1"), [1]),
            False,
            False,
            id="Creating tainted Node matching already assigned tolerating Pod",
        ),
    ],
)
async def test_create_node(pods: list[Obj], node: Obj, expect_patch: bool, expect_delete: bool) -> None:
    """TestCreateNode."""
    async with running(pods) as run:
        run.add_node(node)
        run.node_updated(None, node)
        await run.verify(patch=expect_patch, delete=expect_delete)


async def test_a_node_recreated_without_taints_cancels_its_pods_deletions() -> None:
    """`NodeUpdated(nil, node)` for every node: an untainted new node cancels what its pods had scheduled."""
    pod = add_toleration(new_pod("pod1", "node1"), 1, 100)
    tainted = add_taints_to_node(new_node("node1"), [1])
    async with running([pod]) as run:
        run.add_node(tainted)
        run.node_updated(None, tainted)
        await anyio.sleep(1)
        assert run.scheduled("pod1") is not None
        run.controller.node_informer.store.delete("node1")
        run.node_updated(tainted, None)
        await anyio.sleep(1)
        assert run.scheduled("pod1") is not None  # a node deletion alone leaves scheduled deletions be
        run.add_node(new_node("node1"))
        run.node_updated(None, new_node("node1"))
        await anyio.sleep(200)
        assert run.scheduled("pod1") is None
        assert run.client.actions == []
        assert run.events.messages() == [f"Cancelling deletion of Pod {NS}/pod1"]


# -- TestDeleteNode -----------------------------------------------------------------------------


async def test_delete_node() -> None:
    """TestDeleteNode: the node's taints are forgotten."""
    async with running(tainted=TAINTED_NODE1) as run:
        run.node_updated(new_node("node1"), None)
        await anyio.sleep(0.01)
        assert "node1" not in run.controller.schedule_sync.tainted


# -- TestUpdateNode -----------------------------------------------------------------------------


def _two_toleration_pod() -> Obj:
    pod = new_pod("pod1", "node1")
    pod["spec"]["tolerations"] = [
        {"key": "testTaint1", "value": "test1", "effect": "NoExecute", "tolerationSeconds": 1},
        {"key": "testTaint2", "value": "test2", "effect": "NoExecute", "tolerationSeconds": 100},
    ]
    return pod


@pytest.mark.parametrize(
    ("pods", "old", "new", "expect_patch", "expect_delete", "additional_sleep"),
    [
        pytest.param(
            [new_pod("pod1", "node1")],
            new_node("node1"),
            add_taints_to_node(new_node("node1"), [1]),
            True,
            True,
            0.0,
            id="Added taint, expect node patched and deleted",
        ),
        pytest.param(
            [add_toleration(new_pod("pod1", "node1"), 1, 100)],
            new_node("node1"),
            add_taints_to_node(new_node("node1"), [1]),
            False,
            False,
            0.0,
            id="Added tolerated taint",
        ),
        pytest.param(
            [add_toleration(new_pod("pod1", "node1"), 1, 100)],
            new_node("node1"),
            add_taints_to_node(new_node("node1"), [1, 2]),
            True,
            True,
            0.0,
            id="Only one added taint tolerated",
        ),
        pytest.param(
            [add_toleration(new_pod("pod1", "node1"), 1, 1)],
            add_taints_to_node(new_node("node1"), [1]),
            new_node("node1"),
            False,
            False,
            1.5,
            id="Taint removed",
        ),
        pytest.param(
            [_two_toleration_pod()],
            new_node("node1"),
            add_taints_to_node(new_node("node1"), [1, 2]),
            True,
            True,
            0.0,
            id="Pod with multiple tolerations are evicted when first one runs out",
        ),
    ],
)
async def test_update_node(
    pods: list[Obj], old: Obj, new: Obj, expect_patch: bool, expect_delete: bool, additional_sleep: float
) -> None:
    """TestUpdateNode."""
    async with running(pods) as run:
        run.add_node(new)
        run.node_updated(old, new)
        await anyio.sleep(additional_sleep)
        await run.verify(patch=expect_patch, delete=expect_delete)


async def test_multiple_tolerations_evict_when_the_first_runs_out() -> None:
    """TestUpdateNode "Pod with multiple tolerations...": the 1 s toleration decides, not the 100 s one."""
    async with running([_two_toleration_pod()]) as run:
        node = add_taints_to_node(new_node("node1"), [1, 2])
        run.add_node(node)
        run.node_updated(new_node("node1"), node)
        await anyio.sleep(0.9)
        assert run.client.actions == []
        await anyio.sleep(0.2)
        assert run.client.actions == [("patch", "pod1"), ("delete", "pod1")]


# -- TestUpdateNodeWithMultipleTaints -----------------------------------------------------------


async def test_update_node_with_multiple_taints() -> None:
    """TestUpdateNodeWithMultipleTaints: forever -> 60 s -> forever again, and never a deletion."""
    taint1, taint2 = no_execute_taint(1), no_execute_taint(2)
    pod = new_pod("pod1", "node1")
    pod["spec"]["tolerations"] = [
        {"key": taint1["key"], "operator": "Exists", "effect": "NoExecute"},
        {"key": taint2["key"], "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
    ]
    untainted = new_node("node1")
    double = {**new_node("node1"), "spec": {"taints": [taint1, taint2]}}
    single = {**new_node("node1"), "spec": {"taints": [taint1]}}
    async with running([pod]) as run:
        sync = run.controller.schedule_sync
        run.add_node(untainted)
        sync.handle_node_update("node1")
        assert run.scheduled("pod1") is None, "pod queued for deletion with no taints"
        run.add_node(single)
        sync.handle_node_update("node1")
        assert run.scheduled("pod1") is None, "pod queued for deletion with permanently tolerated taint"
        run.add_node(double)
        sync.handle_node_update("node1")
        assert run.scheduled("pod1") is not None, (
            "pod not queued after addition of temporarily tolerated taint"
        )
        run.add_node(single)
        sync.handle_node_update("node1")
        assert run.scheduled("pod1") is None, (
            "pod queued for deletion after removal of temporarily tolerated taint"
        )
        await anyio.sleep(120)
        assert run.client.deleted() == []


# -- TestUpdateNodeWithMultiplePods -------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        pytest.param(
            add_taints_to_node(new_node("node1"), [1]),
            [(["pod1"], 0.0), (["pod2"], 1.0)],
            id="Pods with different toleration times are evicted appropriately",
        ),
        pytest.param(
            add_taints_to_node(new_node("node1"), [1, 2]),
            [(["pod1", "pod2", "pod3"], 0.0)],
            id="Evict all pods not matching all taints instantly",
        ),
    ],
)
async def test_update_node_with_multiple_pods(new: Obj, expected: list[tuple[list[str], float]]) -> None:
    """TestUpdateNodeWithMultiplePods: each group is deleted at its time, and nothing else then."""
    pods = [
        new_pod("pod1", "node1"),
        add_toleration(new_pod("pod2", "node1"), 1, 1),
        add_toleration(new_pod("pod3", "node1"), 1, -1),
    ]
    async with running(pods) as run:
        run.add_node(new)
        run.node_updated(new_node("node1"), new)
        started = anyio.current_time()
        for i, (names, at) in enumerate(expected):
            # Go's grace: halfway to the next group, or 500 ms after the last one.
            grace = (expected[i + 1][1] - at) / 2 if i + 1 < len(expected) else 0.5
            await anyio.sleep(max(0.0, at - (anyio.current_time() - started) + grace))
            assert sorted(run.client.deleted()) == sorted(names)
            run.client.actions.clear()  # ClearActions
        await anyio.sleep(200)
        assert run.client.deleted() == []  # pod3 tolerates the first taint forever


# -- TestEventualConsistency --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prev", "new", "pod2_deleted_at_once"),
    [
        pytest.param(
            new_pod("pod2", ""),
            new_pod("pod2", "node1"),
            True,
            id="existing pod2 scheduled onto tainted Node",
        ),
        pytest.param(
            add_toleration(new_pod("pod2", ""), 1, 100),
            add_toleration(new_pod("pod2", "node1"), 1, 100),
            False,
            id="existing pod2 with taint toleration scheduled onto tainted Node",
        ),
        pytest.param(None, new_pod("pod2", "node1"), True, id="new pod2 created on tainted Node"),
        pytest.param(
            None,
            add_toleration(new_pod("pod2", "node1"), 1, 100),
            False,
            id="new pod2 with tait toleration created on tainted Node",
        ),
    ],
)
async def test_eventual_consistency(prev: Obj | None, new: Obj, pod2_deleted_at_once: bool) -> None:
    """TestEventualConsistency: pod2's late update is judged against the taints the node update recorded."""
    async with running([new_pod("pod1", "node1")]) as run:
        node = add_taints_to_node(new_node("node1"), [1])
        run.add_node(node)
        if prev is not None:
            run.add_pod(prev)
            run.pod_updated(None, prev)
        # The node update deletes pod1; it does not know about pod2 on node1 yet.
        run.node_updated(new_node("node1"), node)
        await run.verify(patch=True, delete=True)
        assert run.client.deleted() == ["pod1"]
        run.client.actions.clear()
        # The delayed update of pod2 arrives.
        run.add_pod(new)
        run.pod_updated(prev, new)
        await anyio.sleep(0.02)
        if pod2_deleted_at_once:
            assert run.client.actions == [("patch", "pod2"), ("delete", "pod2")]
        else:
            assert run.client.actions == []
            assert run.scheduled("pod2") is not None


# -- TestPodDeletionEvent -----------------------------------------------------------------------


async def test_pod_deletion_events_name_the_pod_as_kcm() -> None:
    """TestPodDeletionEvent: `Marking for deletion` / `Cancelling deletion`, on a `v1` `Pod` reference."""
    reference = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": NS, "name": "pod1"}}
    pod = add_toleration(new_pod("pod1", "node1"), 1, 10)
    pod["metadata"]["uid"] = "u1"
    async with running([pod], tainted=TAINTED_NODE1) as run:
        run.pod_updated(None, pod)
        await anyio.sleep(0.01)
        run.controller.schedule.cancel_key(f"{NS}/pod1")
        untolerated = add_toleration(new_pod("pod1", "node1"), 2, 10)
        untolerated["metadata"]["uid"] = "u1"
        run.add_pod(untolerated)
        run.pod_updated(pod, untolerated)  # deleted at once
        await anyio.sleep(0.01)
    assert [(e.involved, e.type_, e.reason, e.message) for e in run.events.events] == [
        (reference, "Normal", "TaintManagerEviction", f"Cancelling deletion of Pod {NS}/pod1"),
        (reference, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {NS}/pod1"),
    ]


# -- addConditionAndDeletePod: `apipod.UpdatePodCondition` ---------------------------------------


def test_disruption_target_is_written_as_update_pod_condition() -> None:
    """Unchanged condition: no patch; otherwise the whole condition, keeping the time when already True."""
    mine = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "DeletionByTaintManager",
        "message": "Taint manager: deleting due to NoExecute taint",
        "lastTransitionTime": "2024-05-01T10:00:00Z",
    }
    assert disruption_target_update(mine) is None
    by_eviction = {**mine, "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}
    update = disruption_target_update(by_eviction)
    assert update == {**mine, "lastProbeTime": None}  # status already True: its transition time stays
    cleared = disruption_target_update({**mine, "status": "False"})
    assert cleared is not None and cleared["lastTransitionTime"] != mine["lastTransitionTime"]
    fresh = disruption_target_update(None)
    assert fresh is not None and (fresh["status"], fresh["reason"]) == ("True", "DeletionByTaintManager")
    assert disruption_target_update({**mine, "message": "other"}) is not None
