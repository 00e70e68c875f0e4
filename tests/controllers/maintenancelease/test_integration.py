"""Node maintenance leases on the local cluster: the controller, holders competing, the CLI, NodeMaintenance.

Expiry is shown with injected clocks (a holder "in the future"), so the 3 s skew is tested to the
millisecond without waiting for it. The CRD is the one users install.
"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import anyio
import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import LEASES, NAMESPACES, NODEMAINTENANCES, NODES
from controller_manager.lease_cli import build_parser, run
from controllers import features
from controllers.maintenancelease import MaintenanceLeaseController
from controllers.maintenancelease.metrics import ABANDONED, COLLECTOR, HELD
from controllers.nodemaintenance import NodeMaintenanceController
from controllers.nodemaintenance.api import PHASE_ANNOTATION
from kubeutil.timestamps import format_micro_time, utcnow
from nodemaintenancelease import lease
from tests.controllers.harness import running_controllers
from tests.support.objects import node_maintenance
from tests.support.waiting import eventually

pytestmark = pytest.mark.backends("local", "real")

LEASE_GATES = {features.NODE_MAINTENANCE_LEASE: True}


async def get_lease(kube: KubeClient, node: str) -> dict[str, Any] | None:
    return await kube.get_or_none(LEASES, node, namespace=lease.NAMESPACE)


async def node_names(kube: KubeClient) -> list[str]:
    return sorted(n["metadata"]["name"] for n in await kube.list_all(NODES))


async def delete_lease(kube: KubeClient, node: str) -> None:
    try:
        await kube.delete(LEASES, node, namespace=lease.NAMESPACE)
    except ApiError as exc:
        if not exc.not_found:
            raise


async def hand_made_lease(kube: KubeClient, node: str) -> dict[str, Any]:
    """A lease made with kubectl by a holder: no owner reference (the namespace is deploy/namespace.yaml's)."""
    await lease.ensure_namespace(kube)
    await delete_lease(kube, node)
    spec = {
        "holderIdentity": "hand-made",
        "leaseDurationSeconds": 600,
        "renewTime": format_micro_time(utcnow()),
    }
    return await kube.create(LEASES, {"metadata": {"name": node}, "spec": spec}, namespace=lease.NAMESPACE)


async def owned_lease(kube: KubeClient, node: str) -> dict[str, Any] | None:
    obj = await get_lease(kube, node)
    return obj if obj and obj["metadata"].get("ownerReferences") else None


async def test_no_lease_until_a_holder_needs_one_then_owned_by_its_node(kube: KubeClient) -> None:
    *names, marker = await node_names(kube)
    for name in names:  # what earlier tests left: the controller must not bring it back
        await delete_lease(kube, name)
    await hand_made_lease(kube, marker)
    async with running_controllers(kube, MaintenanceLeaseController, gates=LEASE_GATES) as h:
        # Once the controller has owned the hand-made lease it has seen every node: it made none.
        await eventually(lambda: owned_lease(kube, marker), "the owner reference on a hand-made lease")
        assert [n for n in names if await get_lease(kube, n) is not None] == []
        assert h.events.reasons() == []

        state = await lease.acquire(kube, names[0], holder="ops/alice", duration_seconds=60)
        assert state.holder == "ops/alice"
        obj = await get_lease(kube, names[0])
        assert obj is not None
        node = await kube.get(NODES, names[0])
        assert obj["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": names[0], "uid": node["metadata"]["uid"]}
        ]
        await kube.get(NAMESPACES, lease.NAMESPACE)
        assert [n for n in names[1:] if await get_lease(kube, n) is not None] == []
        assert h.events.reasons() == []


async def test_deleted_lease_stays_deleted_and_a_hand_made_lease_gets_its_owner(kube: KubeClient) -> None:
    first, second, marker = (await node_names(kube))[:3]
    await lease.acquire(kube, first, holder="ops/alice", duration_seconds=60)
    async with running_controllers(kube, MaintenanceLeaseController, gates=LEASE_GATES):
        await kube.delete(LEASES, first, namespace=lease.NAMESPACE)
        await hand_made_lease(kube, marker)  # after the delete: owned once the delete was seen
        await eventually(lambda: owned_lease(kube, marker), "the owner reference on a hand-made lease")
        assert await get_lease(kube, first) is None  # the next holder makes it again
        assert (await lease.acquire(kube, first, holder="ops/bob", duration_seconds=60)).holder == "ops/bob"

        # The owner is added, the claim kept.
        made = await hand_made_lease(kube, second)
        obj = await eventually(lambda: owned_lease(kube, second), "the owner reference on a hand-made lease")
        node = await kube.get(NODES, second)
        assert obj["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": second, "uid": node["metadata"]["uid"]}
        ]
        assert obj["spec"] == {**made["spec"]}


async def test_lease_goes_with_its_node(kube: KubeClient) -> None:
    victim = (await node_names(kube))[-1]
    await lease.acquire(kube, victim, holder="ops/alice", duration_seconds=60)
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
    async with running_controllers(kube, MaintenanceLeaseController, gates=LEASE_GATES):
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
                (s.name, s.labels["holder_prefix"]): s.value
                for family in COLLECTOR.collect()
                for s in family.samples
            }

        def counted() -> dict[tuple[str, str], float]:
            got = samples()
            return got if (HELD, "aiokcm/nodemaintenance") in got and (ABANDONED, "ops") in got else {}

        got = await eventually(counted, "the leases in the metrics")
        assert got == {(HELD, "aiokcm/nodemaintenance"): 1, (ABANDONED, "ops"): 1}


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
