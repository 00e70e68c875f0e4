"""The creates of a first start, paced, read off the controller's own requests on a bare local cluster.

A first start over N nodes without leases makes them one at a time at the controller's pace (a
token bucket, burst 1), through its own client (whose smaller budget bounds them too), logs its
progress every `PROGRESS_EVERY`, and still repairs an owner reference while creates are queued:
they have their own queue and worker.

The assertions hold however slow the machine is, so none of them is a race: each create's moment
is recorded at the controller's REST layer, one worker creates at a time, and with a burst of 1 the
bucket's tokens are at least 1/rate apart, so any second holds at most rate + 1 creates and N
creates span at least (N - 2) / rate; slowness only spreads them further. (On the virtual clock,
looptime, the default pace of 10 a second makes 5,000 leases in 500 s; the local cluster's watches
do not stand a clock that jumps, so the suite measures on the real one, at a faster pace.) The
cluster runs no scheduler, kubelets or controllers: only the API server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from structlog.testing import capture_logs

from apiclient.resources import LEASES
from controllers.context import ControllerContext
from controllers.maintenancelease import MaintenanceLeaseController
from controllers.maintenancelease.state import PROGRESS_EVERY
from localcluster.cluster import LocalCluster
from nodemaintenancelease import lease
from tests.controllers.harness import build, running_controllers
from tests.controllers.maintenancelease.helpers import (
    LEASE_GATES,
    ClientRequests,
    every_node_leased,
    get_lease,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local")

NODES_COUNT = 120
WINDOW = 0.999  # a second, less what float rounding of the token times could let in


@pytest.fixture
async def bare() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(
        nodes=NODES_COUNT, scheduler=False, kubelets=False, gc=False, controllers=False
    ) as cluster:
        yield cluster


def paced(rate: float) -> Callable[[ControllerContext], MaintenanceLeaseController]:
    def make(ctx: ControllerContext) -> MaintenanceLeaseController:
        return build(MaintenanceLeaseController, ctx, creates_per_second=rate)

    return make


def most_in_a_window(times: list[float]) -> int:
    return max(sum(1 for t in times if start <= t < start + WINDOW) for start in times)


async def test_a_first_start_makes_every_lease_at_its_pace_without_a_burst(bare: LocalCluster) -> None:
    rate = 40.0
    kube = await bare.client()
    own = await bare.client()  # the controller's own, with a budget that never binds here
    sent = ClientRequests(own)
    try:
        with capture_logs() as logs:
            async with running_controllers(own, paced(rate), gates=LEASE_GATES) as h:
                (controller,) = h.controllers
                assert isinstance(controller, MaintenanceLeaseController)
                await eventually(lambda: every_node_leased(kube), "a lease for every node", interval=0.5)
                await eventually(lambda: not controller.backlog, "every create settled")
    finally:
        await kube.close()
        await own.close()

    creates = sent.lease_creates
    assert len(creates) == NODES_COUNT and all(r.status == "201" for r in creates)  # each once
    times = sorted(r.at for r in creates)
    assert times[-1] - times[0] >= (NODES_COUNT - 2) / rate  # 2.95 s, however fast the server
    assert most_in_a_window(times) <= rate + 1  # no burst
    others = [(w.method, w.url.rsplit("/", 1)[-1]) for w in sent.writes if not w.lease_create]
    assert others == [("POST", "namespaces")]  # made once, before the first create needs it

    (start,) = [e for e in logs if e["event"] == "creating missing maintenance leases in the background"]
    assert (start["missing"], start["nodes"]) == (NODES_COUNT, NODES_COUNT)
    progress = [
        (e["created"], e["missing"], e["finished"]) for e in logs if str(e["event"]).startswith("created ")
    ]
    assert progress == [
        *((n, NODES_COUNT, False) for n in range(PROGRESS_EVERY, NODES_COUNT, PROGRESS_EVERY)),
        (NODES_COUNT, NODES_COUNT, True),
    ]
    assert next(e for e in logs if e.get("finished"))["event"] == (
        f"created {NODES_COUNT} of {NODES_COUNT} missing maintenance leases"
    )


async def test_an_owner_is_repaired_while_creates_are_still_queued(bare: LocalCluster) -> None:
    """At one create a second the backlog lasts two minutes; the repair does not wait behind it."""
    kube = await bare.client()
    hand_made = "node-1"
    await lease.ensure_namespace(kube)
    await kube.create(LEASES, {"metadata": {"name": hand_made}}, namespace=lease.NAMESPACE)
    try:
        async with running_controllers(kube, paced(1.0), gates=LEASE_GATES) as h:
            (controller,) = h.controllers
            assert isinstance(controller, MaintenanceLeaseController)

            async def owned() -> bool:
                obj = await get_lease(kube, hand_made)
                return bool(obj and obj["metadata"].get("ownerReferences"))

            await eventually(owned, "the hand-made lease owned")
            assert controller.started and hand_made not in controller.backlog.pending
            assert len(controller.backlog) > NODES_COUNT / 2  # most creates still to come
    finally:
        await kube.close()


async def test_the_controllers_client_budget_bounds_the_creates_too(bare: LocalCluster) -> None:
    """Every create goes through the controller's own client: a budget below the pace slows them."""
    kube = await bare.client()
    own = await bare.client(qps=40.0, burst=1)
    sent = ClientRequests(own)
    try:
        async with running_controllers(own, paced(1000.0), gates=LEASE_GATES):
            await eventually(lambda: every_node_leased(kube), "a lease for every node", interval=0.5)
    finally:
        await kube.close()
        await own.close()
    times = sorted(r.at for r in sent.lease_creates)
    assert len(times) == NODES_COUNT
    assert times[-1] - times[0] >= (NODES_COUNT - 2) / 40.0  # the client's 40 a second, not 1,000
