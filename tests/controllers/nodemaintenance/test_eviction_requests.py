"""A NodeMaintenance draining through EvictionRequests, with the evictionrequest controller and the
imperative evictor, on the local cluster (`spec.evictionAPI: EvictionRequest`).

The pods' owners are hand-made (no controller of their kind runs): the pods go because the
imperative evictor evicts them once the maintenance has asked. A responder of the test's own
(`hold.example.com/migrate`) holds a pod so the withdrawal can be seen.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apiclient import KubeClient
from apiclient.resources import NODEMAINTENANCES
from controllers import features
from controllers.evictionrequest import EvictionRequestController
from controllers.imperativeeviction import ImperativeEvictionResponderController
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.drain import BLOCK_NO_CONTROLLER
from controllers.nodemaintenance.evictionrequests import GATE_OFF, REQUESTER, name_for
from evictionapi import names, requests
from tests.controllers.harness import running_controllers
from tests.controllers.nodemaintenance.helpers import NS, condition, make_pod, nm_gone, node, pod
from tests.support.evictionrequests import IMPERATIVE, REQUESTS, install_eviction_api, wait_for_states
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

pytestmark = pytest.mark.usefixtures("cluster", "crd", "eviction")

GATES = {features.DECLARATIVE_NODE_MAINTENANCE: True, features.EVICTION_REQUEST_API: True}
CONTROLLERS = (NodeMaintenanceController, EvictionRequestController, ImperativeEvictionResponderController)
HOLD = "hold.example.com/migrate"


@pytest.fixture(autouse=True)
async def api(kube: KubeClient) -> None:
    await install_eviction_api(kube, namespace=NS)


async def request_of(kube: KubeClient, the_pod: dict[str, Any]) -> dict[str, Any] | None:
    return await kube.get_or_none(REQUESTS, name_for(the_pod), namespace=NS)


async def status_condition(kube: KubeClient, name: str, type_: str) -> dict[str, Any] | None:
    return condition(await kube.get(NODEMAINTENANCES, name), type_)


async def test_drains_through_eviction_requests_and_reports_pods_it_may_not_ask_for(
    kube: KubeClient, node_names: list[str]
) -> None:
    target, other = node_names[0], node_names[1]
    web = await make_pod(kube, "web", target)
    bare = await make_pod(kube, "bare", target, owner=None)
    await make_pod(kube, "agent", target, owner="DaemonSet")
    elsewhere = await make_pod(kube, "elsewhere", other)
    async with running_controllers(kube, *CONTROLLERS, gates=GATES):
        nm = await kube.create(
            NODEMAINTENANCES, node_maintenance("er", [target], drain=True, evictionAPI="EvictionRequest")
        )

        created = await eventually(lambda: request_of(kube, web), "an EvictionRequest for the app pod")
        assert requests.requester_of(created) == REQUESTER
        assert requests.target_pod_of(created) == ("web", web["metadata"]["uid"])
        assert requests.wants_eviction(created)
        assert [(o["kind"], o["name"], o["uid"]) for o in created["metadata"]["ownerReferences"]] == [
            ("NodeMaintenance", "er", nm["metadata"]["uid"])
        ]
        assert condition(await pod(kube, "web"), "EvacuationRequest") is None  # not the pod condition

        async def web_gone() -> bool:
            return await pod(kube, "web") is None

        await eventually(web_gone, "the imperative evictor to evict the app pod", timeout=30)

        async def blocked_by_bare() -> bool:
            c = await status_condition(kube, "er", "Blocked")
            entry = (await kube.get(NODEMAINTENANCES, "er"))["status"]["nodes"][target]
            blocking = [(b["name"], b["reason"]) for b in entry["blockingPods"]]
            return bool(c and c["status"] == "True" and blocking == [("bare", BLOCK_NO_CONTROLLER)])

        await eventually(blocked_by_bare, "Blocked=True for the pod without a controller, and only it")
        for untouched in (bare, elsewhere):
            assert await request_of(kube, untouched) is None
        assert await pod(kube, "agent") is not None

        await kube.patch(NODEMAINTENANCES, "er", {"spec": {"force": True}})

        async def drained() -> bool:
            c = await status_condition(kube, "er", "Drained")
            return bool(c and c["status"] == "True")

        await eventually(drained, "Drained=True once the bare pod is asked for and evicted", timeout=30)
        assert await pod(kube, "bare") is None
        settled = await request_of(kube, bare)
        assert settled is not None and requests.target_evicted(settled)
        assert (await node(kube, target))["spec"]["unschedulable"] is True


async def test_withdraws_when_the_drain_ends_and_leaves_the_request_to_its_owner(
    kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    held = await make_pod(
        kube,
        "held",
        target,
        annotations={names.POD_RESPONDERS_ANNOTATION: json.dumps([{"name": HOLD, "priority": 20000}])},
    )
    async with running_controllers(kube, *CONTROLLERS, gates=GATES):
        await kube.create(
            NODEMAINTENANCES, node_maintenance("hold", [target], drain=True, evictionAPI="EvictionRequest")
        )
        await eventually(lambda: request_of(kube, held), "the request")
        await wait_for_states(
            kube, NS, "held", [(HOLD, 20000, names.STATE_ACTIVE), (IMPERATIVE, 100, names.STATE_INACTIVE)]
        )

        async def evacuating() -> bool:
            obj = await kube.get(NODEMAINTENANCES, "hold")
            return bool(
                ((obj.get("status") or {}).get("nodes") or {}).get(target, {}).get("podsEvacuating") == 1
            )

        await eventually(evacuating, "podsEvacuating=1 while the responder works")

        await kube.patch(NODEMAINTENANCES, "hold", {"spec": {"drain": False}})

        async def withdrawn() -> bool:
            r = await request_of(kube, held)
            return r is not None and requests.intent_of(r) == names.INTENT_WITHDRAWN

        await eventually(withdrawn, "the request withdrawn once the maintenance stops draining")

        async def canceled() -> bool:
            r = await request_of(kube, held)
            return requests.failed(r)

        await eventually(canceled, "the eviction cancelled (no requester wants it)")
        assert await pod(kube, "held") is not None

        await kube.delete(NODEMAINTENANCES, "hold")
        await eventually(lambda: nm_gone(kube, "hold"), "the finalizer released")
        left = await request_of(kube, held)
        # This cluster runs no garbage collector; on a real one the owner reference removes it.
        assert left is not None and left["metadata"]["ownerReferences"][0]["name"] == "hold"


async def test_without_the_gate_the_maintenance_says_why_and_starts_nothing(
    kube: KubeClient, node_names: list[str]
) -> None:
    target = node_names[0]
    web = await make_pod(kube, "web", target)
    gates = {features.DECLARATIVE_NODE_MAINTENANCE: True}
    async with running_controllers(kube, NodeMaintenanceController, gates=gates):
        await kube.create(
            NODEMAINTENANCES, node_maintenance("gated", [target], drain=True, evictionAPI="EvictionRequest")
        )

        async def invalid() -> dict[str, Any] | None:
            c = await status_condition(kube, "gated", "SpecValid")
            return c if c and c["status"] == "False" else None

        c = await eventually(invalid, "SpecValid=False")
        assert c["message"] == GATE_OFF
        drained = await status_condition(kube, "gated", "Drained")
        assert drained is not None and drained["status"] == "False" and drained["reason"] == "InvalidSpec"
        assert not (await node(kube, target))["spec"].get("unschedulable")
        assert await request_of(kube, web) is None
