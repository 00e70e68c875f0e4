"""Node maintenance leases on both backends: the controller, holders competing, the CLI, NodeMaintenance.

The controller makes every node's lease (free, owned by the node, as `acquire` makes it for a first
holder), makes a deleted one again, never undoes a holder that got there first, and after a restart
over settled leases sends nothing but its lists and watches (its requests recorded at its own
client's REST layer). Its pace is `test_pacing.py`'s.

Expiry is shown with injected clocks (a holder "in the future"), so the 3 s skew is tested to the
millisecond without waiting for it. The CRD is the one users install.
"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any, cast

import anyio
import pytest
from prometheus_client import REGISTRY

from apiclient import KubeClient
from apiclient.resources import LEASES, NAMESPACES, NODEMAINTENANCES, NODES
from controller_manager.lease_cli import build_parser, run
from controllers import features
from controllers.maintenancelease import MaintenanceLeaseController
from controllers.maintenancelease.metrics import ABANDONED, COLLECTOR, CREATES_TOTAL, HELD, MISSING
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.api import PHASE_ANNOTATION
from kubeutil.timestamps import format_micro_time, utcnow
from nodemaintenancelease import lease
from tests.controllers.harness import running_controllers
from tests.controllers.maintenancelease.helpers import (
    LEASE_GATES,
    ClientRequests,
    delete_lease,
    every_node_leased,
    get_lease,
    node_names,
)
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")

QUIET = 2.0  # seconds a settled controller is watched for a request it should not send


async def hand_made_lease(kube: KubeClient, node: str) -> dict[str, Any]:
    """A lease made with kubectl by a holder: no owner reference (the namespace is deploy/namespace.yaml's).

    Made before the controller runs: a delete while it runs is made good again at once."""
    await lease.ensure_namespace(kube)
    await delete_lease(kube, node)
    spec = {
        "holderIdentity": "hand-made",
        "leaseDurationSeconds": 600,
        "renewTime": format_micro_time(utcnow()),
    }
    return await kube.create(LEASES, {"metadata": {"name": node}, "spec": spec}, namespace=lease.NAMESPACE)


async def drop_owner(kube: KubeClient, node: str) -> dict[str, Any]:
    """What a client-go LeaseLock's update, or kubectl replace, leaves: the lease without its owner."""
    return await kube.patch(
        LEASES,
        node,
        [{"op": "remove", "path": "/metadata/ownerReferences"}],
        namespace=lease.NAMESPACE,
        patch_type="json",
    )


async def owned_lease(kube: KubeClient, node: str) -> dict[str, Any] | None:
    obj = await get_lease(kube, node)
    return obj if obj and obj["metadata"].get("ownerReferences") else None


def node_ref(node: dict[str, Any]) -> list[dict[str, str]]:
    """The owner reference `lease.acquire` writes (`lease.lease_body`'s): the node, by name and uid."""
    return [
        {"apiVersion": "v1", "kind": "Node", "name": node["metadata"]["name"], "uid": node["metadata"]["uid"]}
    ]


def creates(result: str) -> float:
    return REGISTRY.get_sample_value(CREATES_TOTAL, {"result": result}) or 0.0


async def test_every_node_gets_a_free_lease_owned_by_it(kube: KubeClient) -> None:
    first, *names, marker = await node_names(kube)
    for name in names:  # what earlier tests left
        await delete_lease(kube, name)
    held = await lease.acquire(kube, first, holder="ops/alice", duration_seconds=60)  # a first holder's
    made = await hand_made_lease(kube, marker)
    async with running_controllers(kube, MaintenanceLeaseController, gates=LEASE_GATES) as h:
        leases = await eventually(lambda: every_node_leased(kube), "a lease for every node")
        acquired = leases[first]
        for name in names:
            obj, node = leases[name], await kube.get(NODES, name)
            # What `acquire` made for the first holder, minus the holder fields.
            assert obj["metadata"]["ownerReferences"] == node_ref(node)
            assert (
                obj["metadata"]["ownerReferences"][0].keys()
                == acquired["metadata"]["ownerReferences"][0].keys()
            )
            assert obj["spec"] == {}
            assert {k: v for k, v in obj.items() if k not in ("metadata", "spec")} == {
                k: v for k, v in acquired.items() if k not in ("metadata", "spec")
            }
            assert not obj["metadata"].get("labels") and not obj["metadata"].get("annotations")
            assert not lease.LeaseState.from_obj(obj).held(utcnow())
        # The holders' leases were left as they were, the hand-made one given its owner.
        assert lease.LeaseState.from_obj(acquired) == held
        owned = await eventually(
            lambda: owned_lease(kube, marker), "the owner reference on a hand-made lease"
        )
        assert owned["metadata"]["ownerReferences"] == node_ref(await kube.get(NODES, marker))
        assert owned["spec"] == made["spec"]
        assert h.events.reasons() == []

        # A lease made free is taken by its first holder as one it made itself.
        state = await lease.acquire(kube, names[0], holder="ops/bob", duration_seconds=60)
        assert state.holder == "ops/bob" and state.transitions == 0
        await kube.get(NAMESPACES, lease.NAMESPACE)


async def test_a_deleted_lease_is_made_again_and_a_new_node_gets_one(kube: KubeClient) -> None:
    first, second = (await node_names(kube))[:2]
    async with running_controllers(kube, MaintenanceLeaseController, gates=LEASE_GATES):
        leases = await eventually(lambda: every_node_leased(kube), "a lease for every node")
        await lease.acquire(kube, second, holder="ops/alice", duration_seconds=60)
        for name in (first, second):  # a free lease, and a held one (its holder lost it with the delete)
            await kube.delete(LEASES, name, namespace=lease.NAMESPACE)

            async def made_again(name: str = name) -> dict[str, Any] | None:
                obj = await get_lease(kube, name)
                return obj if obj and obj["metadata"]["uid"] != leases[name]["metadata"]["uid"] else None

            obj = await eventually(made_again, f"{name}'s lease made again")
            assert obj["spec"] == {}
            assert obj["metadata"]["ownerReferences"] == node_ref(await kube.get(NODES, name))

        late = await kube.create(
            NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-late"}}
        )
        obj = await eventually(lambda: get_lease(kube, "node-late"), "the new node's lease")
        assert obj["spec"] == {} and obj["metadata"]["ownerReferences"] == node_ref(late)

        # The owner is put back on a lease that lost it, the claim kept.
        dropped = await drop_owner(kube, first)
        assert "ownerReferences" not in dropped["metadata"]
        obj = await eventually(lambda: owned_lease(kube, first), "the owner reference back")
        assert obj["metadata"]["ownerReferences"] == node_ref(await kube.get(NODES, first))
        assert obj["spec"] == dropped["spec"]


async def test_a_restart_over_settled_leases_sends_only_its_lists_and_watches(
    cluster: Any, kube: KubeClient
) -> None:
    async with running_controllers(kube, MaintenanceLeaseController, gates=LEASE_GATES):
        await eventually(lambda: every_node_leased(kube), "a lease for every node")
    await lease.acquire(kube, (await node_names(kube))[0], holder="ops/alice", duration_seconds=600)
    before = creates("created")
    own = await cluster.client()  # the restarted controller's own client: only its requests recorded
    try:
        sent = ClientRequests(own)
        async with running_controllers(own, MaintenanceLeaseController, gates=LEASE_GATES) as h:
            (controller,) = h.controllers
            assert isinstance(controller, MaintenanceLeaseController)

            def idle() -> bool:  # started (each node looked at), nothing queued
                queues = (controller.queue, controller.create_queue)
                return controller.started and not any(len(q) or q.waiting for q in queues)

            await eventually(idle, "the restarted controller through its start")
            await anyio.sleep(QUIET)  # anything it would send late
            assert len(controller.backlog) == 0
    finally:
        await own.close()
    assert sent.writes == [], sent.writes
    assert [r for r in sent.requests if not r.list_or_watch] == []  # not even the namespace read
    assert {r.url.rsplit("/", 1)[-1] for r in sent.requests} == {"nodes", "leases"}
    assert creates("created") == before


class AcquiredFirst:
    """The controller's client, but a holder acquires `node`'s lease just before the controller's
    create of it reaches the server: the create's cache read said missing, the server says 409."""

    def __init__(self, inner: KubeClient, holder_client: KubeClient, node: str) -> None:
        self._inner = inner
        self._holder_client = holder_client
        self._node = node
        self.acquired: lease.LeaseState | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def create(self, res: Any, body: dict[str, Any], **kwargs: Any) -> Any:
        if res == LEASES and body["metadata"]["name"] == self._node and self.acquired is None:
            self.acquired = await lease.acquire(
                self._holder_client, self._node, holder="firmware-agent", duration_seconds=600
            )
        return await self._inner.create(res, body, **kwargs)


async def test_a_holder_that_acquires_first_keeps_the_lease_and_the_409_is_success(
    cluster: Any, kube: KubeClient
) -> None:
    names = await node_names(kube)
    for name in names:
        await delete_lease(kube, name)
    racer = names[1]
    own = await cluster.client()
    racing = AcquiredFirst(own, kube, racer)
    existed, failed = creates("already_exists"), failures()
    try:
        async with running_controllers(
            cast(KubeClient, racing), MaintenanceLeaseController, gates=LEASE_GATES, informer_client=own
        ) as h:
            (controller,) = h.controllers
            assert isinstance(controller, MaintenanceLeaseController)
            leases = await eventually(lambda: every_node_leased(kube), "a lease for every node")
            await eventually(lambda: len(controller.backlog) == 0, "every create settled")
            assert racing.acquired is not None and racing.acquired.holder == "firmware-agent"
            obj = leases[racer]
            assert lease.LeaseState.from_obj(obj) == racing.acquired  # the holder's write, not undone
            assert obj["metadata"]["ownerReferences"] == node_ref(await kube.get(NODES, racer))
            assert creates("already_exists") == existed + 1
            assert failures() == failed  # a success: no error, no retry
            await anyio.sleep(QUIET)  # nothing more written to it (no update, no patch)
            assert (await get_lease(kube, racer) or {})["metadata"]["resourceVersion"] == obj["metadata"][
                "resourceVersion"
            ]
    finally:
        await own.close()


def failures() -> float:
    return sum(
        REGISTRY.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": "maintenance-lease", "result": result}
        )
        or 0.0
        for result in ("error", "conflict")
    )


async def test_lease_goes_with_its_node(kube: KubeClient) -> None:
    victim = (await node_names(kube))[-1]
    await lease.acquire(kube, victim, holder="ops/alice", duration_seconds=60)
    async with running_controllers(kube, MaintenanceLeaseController, gates=LEASE_GATES):
        await eventually(lambda: every_node_leased(kube), "a lease for every node")
        await kube.delete(NODES, victim)

        async def collected() -> bool:
            return await get_lease(kube, victim) is None

        await eventually(collected, "the garbage collector to remove the node's lease")


async def test_two_competing_holders_exactly_one_wins(kube: KubeClient) -> None:
    node = (await node_names(kube))[0]
    holders = [f"agent-{i}" for i in range(5)]
    winners: list[str] = []
    losers: dict[str, str | None] = {}

    async def compete(holder: str) -> None:
        try:
            await lease.acquire(kube, node, holder=holder, duration_seconds=60)
        except lease.LeaseHeldError as exc:
            losers[holder] = exc.state.holder
        else:
            winners.append(holder)

    async with anyio.create_task_group() as tg:  # no controller: the holders create the lease too
        for holder in holders:
            tg.start_soon(compete, holder)
    assert len(winners) == 1, (winners, losers)
    assert set(losers.values()) == {winners[0]}
    obj = await get_lease(kube, node)
    assert obj is not None and obj["spec"]["holderIdentity"] == winners[0]
    assert obj["metadata"]["ownerReferences"][0]["name"] == node


async def test_expiry_allows_three_seconds_of_skew(kube: KubeClient) -> None:
    node = (await node_names(kube))[0]
    start = utcnow()
    first = await lease.acquire(kube, node, holder="first", duration_seconds=1, clock=lambda: start)
    assert first.renew_time is not None
    almost = first.renew_time + timedelta(seconds=1 + 2.99)
    with pytest.raises(lease.LeaseHeldError, match="held by 'first'"):
        await lease.acquire(kube, node, holder="second", duration_seconds=60, clock=lambda: almost)
    later = first.renew_time + timedelta(seconds=1 + 3)
    second = await lease.acquire(kube, node, holder="second", duration_seconds=60, clock=lambda: later)
    assert second.holder == "second"
    assert second.transitions == first.transitions + 1
    with pytest.raises(lease.LeaseLostError):
        await lease.renew(kube, node, holder="first")


async def test_kubeadm_holder_always_holds_and_clients_cannot_take_the_prefix(kube: KubeClient) -> None:
    node = (await node_names(kube))[0]
    await lease.acquire(kube, node, holder="agent", duration_seconds=5)
    # An administrator with kubectl: just the holder, no times to compute.
    await kube.patch(
        LEASES,
        node,
        {"spec": {"holderIdentity": "kubeadm-alice", "leaseDurationSeconds": None, "renewTime": None}},
        namespace=lease.NAMESPACE,
    )
    far = utcnow() + timedelta(days=30)
    with pytest.raises(lease.LeaseHeldError, match="kubeadm-alice"):
        await lease.acquire(kube, node, holder="agent", clock=lambda: far)
    with pytest.raises(lease.ReservedHolderError):
        await lease.acquire(kube, node, holder="kubeadm-bob")

    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["lease", "acquire", node, "--holder", "kubeadm-bob"])
    assert await run(args, kube, out=out, err=err) == 2
    assert "reserved for administrators" in err.getvalue()
    obj = await get_lease(kube, node)
    assert obj is not None and obj["spec"]["holderIdentity"] == "kubeadm-alice"

    # The administrator gives it back; then clients may take it.
    assert await lease.release(kube, node, holder="kubeadm-alice")
    assert (await lease.acquire(kube, node, holder="agent")).holder == "agent"


async def test_cli_acquire_status_renew_release(kube: KubeClient) -> None:
    node, other = (await node_names(kube))[:2]

    async def cli(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = await run(build_parser().parse_args(["lease", *argv]), kube, out=out, err=err)
        return code, out.getvalue(), err.getvalue()

    code, out, _ = await cli("acquire", node, "--holder", "ops/alice", "--duration", "10m")
    assert code == 0 and "acquired by ops/alice" in out
    code, _, err = await cli("acquire", node, "--holder", "ops/bob")
    assert code == 1 and "held by 'ops/alice'" in err
    code, _, err = await cli("renew", node, "--holder", "ops/bob")
    assert code == 1 and "ops/alice" in err
    code, out, _ = await cli("renew", node, "--holder", "ops/alice", "--duration", "20m")
    assert code == 0
    assert (await get_lease(kube, node) or {})["spec"]["leaseDurationSeconds"] == 1200
    await lease.acquire(
        kube,
        other,
        holder="gone-agent",
        duration_seconds=1,
        clock=lambda: utcnow() - timedelta(hours=1),
    )

    code, out, _ = await cli("status")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert out.splitlines()[0].split() == ["NODE", "HOLDER", "AGE", "EXPIRES", "IN", "ABANDONED"]
    assert rows[node][1] == "ops/alice" and rows[node][-1] == "no"
    assert rows[other][1] == "gone-agent" and rows[other][-1] == "yes"

    code, out, _ = await cli("release", node, "--holder", "ops/alice")
    assert code == 0 and "released" in out
    obj = await get_lease(kube, node)
    assert obj is not None
    assert "holderIdentity" not in obj["spec"] and "leaseDurationSeconds" not in obj["spec"]
    code, out, _ = await cli("acquire", node, "--holder", "ops/bob")
    assert code == 0


async def test_cli_status_shows_a_never_leased_node_free_and_an_unknown_node_missing(
    kube: KubeClient,
) -> None:
    node = (await node_names(kube))[-1]
    await delete_lease(kube, node)
    out, err = io.StringIO(), io.StringIO()
    code = await run(
        build_parser().parse_args(["lease", "status", node, "no-such-node"]), kube, out=out, err=err
    )
    assert code == 1
    assert out.getvalue().splitlines()[1].split() == [node, "<none>", "-", "-", "no"]
    assert "no-such-node not found" in err.getvalue()
    assert await get_lease(kube, node) is None  # looking creates nothing


async def test_context_manager_renews_in_the_background_and_releases(kube: KubeClient) -> None:
    node = (await node_names(kube))[0]
    async with lease.maintenance_lease(
        kube, node, holder="reboot/node", duration_seconds=30, renew_every=0.05
    ) as held:
        first = held.state.renew_time
        assert first is not None

        async def renewed() -> bool:
            obj = await get_lease(kube, node)
            return bool(obj and lease.LeaseState.from_obj(obj).renew_time != first)

        await eventually(renewed, "a background renewal")
        with pytest.raises(lease.LeaseHeldError):
            await lease.acquire(kube, node, holder="someone-else")
    obj = await get_lease(kube, node)
    assert obj is not None and not obj["spec"].get("holderIdentity")


async def test_context_manager_cancels_the_body_when_the_lease_is_lost(kube: KubeClient) -> None:
    node = (await node_names(kube))[0]
    reached_end = False
    with pytest.raises(lease.LeaseLostError):
        async with lease.maintenance_lease(
            kube, node, holder="reboot/node", duration_seconds=30, renew_every=0.05
        ):
            await kube.patch(
                LEASES, node, {"spec": {"holderIdentity": "kubeadm-admin"}}, namespace=lease.NAMESPACE
            )
            await anyio.sleep(30)
            reached_end = True
    assert not reached_end
    obj = await get_lease(kube, node)
    assert obj is not None and obj["spec"]["holderIdentity"] == "kubeadm-admin"  # not released by the loser


async def test_context_manager_body_errors_pass_through_unwrapped(kube: KubeClient) -> None:
    node = (await node_names(kube))[0]
    with pytest.raises(ValueError, match="boom"):
        async with lease.maintenance_lease(kube, node, holder="reboot/node", duration_seconds=30):
            raise ValueError("boom")
    obj = await get_lease(kube, node)
    assert obj is not None and not obj["spec"].get("holderIdentity")


async def test_metrics_count_leases_from_the_controller_cache(kube: KubeClient) -> None:
    names = await node_names(kube)
    async with running_controllers(kube, MaintenanceLeaseController, gates=LEASE_GATES) as h:
        (controller,) = h.controllers
        assert isinstance(controller, MaintenanceLeaseController)
        await eventually(lambda: controller.started and not controller.backlog, "every lease made")
        await lease.acquire(kube, names[0], holder="aiokcm/nodemaintenance/m1", duration_seconds=600)
        await lease.acquire(
            kube,
            names[1],
            holder="ops/bob",
            duration_seconds=1,
            clock=lambda: utcnow() - timedelta(hours=1),
        )

        def samples() -> dict[tuple[str, str], float]:
            return {
                (s.name, s.labels.get("holder_prefix", "")): s.value
                for family in COLLECTOR.collect()
                for s in family.samples
            }

        def counted() -> dict[tuple[str, str], float]:
            got = samples()
            return got if (HELD, "aiokcm/nodemaintenance") in got and (ABANDONED, "ops") in got else {}

        got = await eventually(counted, "the leases in the metrics")
        assert got == {(HELD, "aiokcm/nodemaintenance"): 1, (ABANDONED, "ops"): 1, (MISSING, ""): 0}


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


@pytest.mark.usefixtures("crd")
async def test_node_maintenance_waits_for_a_lease_held_by_someone_else(kube: KubeClient) -> None:
    target = (await node_names(kube))[0]
    holder = "aiokcm/nodemaintenance/m1"
    await lease.acquire(kube, target, holder="firmware-agent", duration_seconds=600)
    gates = {features.DECLARATIVE_NODE_MAINTENANCE: True, **LEASE_GATES}
    async with running_controllers(
        kube, NodeMaintenanceController, MaintenanceLeaseController, gates=gates
    ) as h:
        await kube.create(NODEMAINTENANCES, node_maintenance("m1", [target], timeout=None, reason="bios"))

        async def waiting() -> dict[str, Any] | None:
            c = condition(await kube.get(NODEMAINTENANCES, "m1"), "Cordoned")
            return c if c and c.get("reason") == "WaitingForLease" else None

        cond = await eventually(waiting, "the maintenance to report the held lease")
        assert cond["status"] == "False" and target in cond["message"]
        assert "WaitingForLease" in h.events.reasons("m1")
        node = await kube.get(NODES, target)
        assert not node["spec"].get("unschedulable")
        assert (node["metadata"].get("annotations") or {}).get(PHASE_ANNOTATION) == "WaitingForLease"

        assert await lease.release(kube, target, holder="firmware-agent")

        async def cordoned() -> bool:
            c = condition(await kube.get(NODEMAINTENANCES, "m1"), "Cordoned")
            return bool(c and c["status"] == "True")

        await eventually(cordoned, "the node to be cordoned once the lease is free")
        assert (await kube.get(NODES, target))["spec"]["unschedulable"] is True
        obj = await get_lease(kube, target)
        assert obj is not None and obj["spec"]["holderIdentity"] == holder
        with pytest.raises(lease.LeaseHeldError):
            await lease.acquire(kube, target, holder="firmware-agent")

        await kube.delete(NODEMAINTENANCES, "m1")

        async def released() -> bool:
            current = await get_lease(kube, target)
            return current is not None and not current["spec"].get("holderIdentity")

        await eventually(released, "the lease to be released with the maintenance")
        assert not (await kube.get(NODES, target))["spec"].get("unschedulable")
