"""Leader election on a Lease: one leader at a time, hand-off on release, take-over after expiry."""

from __future__ import annotations

from datetime import datetime

import anyio

from apiclient import KubeClient
from controller_manager.leaderelection import LeaderElector, LeadershipLost
from tests.manager.conftest import make_client
from tests.manager.fakeapi import FakeApi
from tests.support.waiting import eventually

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/aiokcm"


def _elector(client: KubeClient, identity: str) -> LeaderElector:
    return LeaderElector(
        client,
        namespace="kube-system",
        name="aiokcm",
        identity=identity,
        lease_duration=1.0,
        renew_deadline=0.6,
        retry_period=0.1,
    )


def _spec(api: FakeApi) -> dict[str, object]:
    return dict((api.get(LEASE) or {}).get("spec") or {})


async def test_hand_off_between_two_managers(fake_api: FakeApi, fake_client: KubeClient) -> None:
    a, b = _elector(fake_client, "a"), _elector(fake_client, "b")
    a_stop, a_leading, b_leading = anyio.Event(), anyio.Event(), anyio.Event()
    order: list[str] = []

    async def lead_a() -> None:
        order.append("a")
        a_leading.set()
        await a_stop.wait()

    async def lead_b() -> None:
        order.append("b")
        b_leading.set()
        await anyio.sleep_forever()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.run, lead_a)
            await a_leading.wait()
            tg.start_soon(b.run, lead_b)
            # b has tried and been refused a few times
            await eventually(
                lambda: fake_api.requests.count(("GET", LEASE)) >= 6,
                "fake_api.requests.count(('GET', LEASE)) >= 6",
            )
            assert not b.is_leader and order == ["a"]
            spec = _spec(fake_api)
            assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0
            assert str(spec["renewTime"]).endswith("Z")
            datetime.strptime(str(spec["renewTime"]), "%Y-%m-%dT%H:%M:%S.%fZ")
            a_stop.set()  # a clean stop: a releases, b takes over at its next retry
            await b_leading.wait()
            assert order == ["a", "b"] and not a.is_leader and b.is_leader
            spec = _spec(fake_api)
            assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
            tg.cancel_scope.cancel()
    assert _spec(fake_api)["holderIdentity"] in (None, "")  # b released on cancellation too


async def test_a_crashed_leader_is_replaced_after_the_lease_expires(fake_api: FakeApi) -> None:
    client_a, client_b = make_client(fake_api), make_client(fake_api)
    try:
        a, b = _elector(client_a, "a"), _elector(client_b, "b")
        await a.acquire()  # a leads, then "crashes": it never renews nor releases
        with anyio.fail_after(20):
            await b.acquire()
        assert b.is_leader and _spec(fake_api)["holderIdentity"] == "b"
        assert not await a.try_acquire_or_renew()  # the old leader cannot take it back
    finally:
        await client_a.close()
        await client_b.close()


async def test_failing_renewals_cancel_the_work_and_raise(fake_api: FakeApi, fake_client: KubeClient) -> None:
    elector = _elector(fake_client, "a")
    cancelled = False

    async def lead() -> None:
        nonlocal cancelled
        fake_api.fail_writes = True
        try:
            await anyio.sleep_forever()
        finally:
            cancelled = True

    raised = None
    with anyio.fail_after(20):
        try:
            await elector.run(lead)
        except LeadershipLost as exc:
            raised = exc
    assert raised is not None and cancelled and not elector.is_leader
    assert _spec(fake_api)["holderIdentity"] == "a"  # no release of a lease we no longer hold


async def test_a_standby_retries_when_the_dead_leaders_lease_expires_not_at_its_next_jittered_poll(
    fake_api: FakeApi,
) -> None:
    """With a retry period longer than the lease, client-go's jittered poll alone would sleep
    past the expiry; the standby wakes when the lease it observed expires: two GETs in all."""
    client_a, client_b = make_client(fake_api), make_client(fake_api)
    try:
        a = _elector(client_a, "a")
        b = LeaderElector(
            client_b,
            namespace="kube-system",
            name="aiokcm",
            identity="b",
            lease_duration=1.0,
            renew_deadline=0.6,
            retry_period=30.0,
        )
        await a.acquire()  # a leads, then dies: it never renews nor releases
        with anyio.fail_after(20):
            await b.acquire()
        assert b.is_leader and _spec(fake_api)["holderIdentity"] == "b"
        assert fake_api.requests.count(("GET", LEASE)) == 1 + 2  # a's own, then b's two
    finally:
        await client_a.close()
        await client_b.close()


LEASES = LEASE.rsplit("/", 1)[0]


async def test_a_standby_observes_the_last_renewal_through_its_watch_not_a_later_poll(
    fake_api: FakeApi,
) -> None:
    """The standby's only polls are its first and its take-over (its retry period is far longer than
    the lease): the holder's renewals reach it through the watch, so it takes over one lease
    duration after the last renewal, not one lease duration after it last polled."""
    client_a, client_b = make_client(fake_api), make_client(fake_api)
    try:
        a = _elector(client_a, "a")
        b = LeaderElector(
            client_b,
            namespace="kube-system",
            name="aiokcm",
            identity="b",
            lease_duration=1.0,
            renew_deadline=0.6,
            retry_period=30.0,
        )
        await a.acquire()
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(b.acquire)
                await eventually(
                    lambda: fake_api.watches >= 1 and bool(fake_api._watchers.get(LEASE)),
                    "fake_api.watches >= 1 and bool(fake_api._watchers.get(LEASE))",
                )
                for _ in range(4):  # a renews past b's first observed expiry, then dies
                    await anyio.sleep(0.4)
                    assert await a.try_acquire_or_renew()
                last_renewal = anyio.current_time()
                await eventually(lambda: b.is_leader, "b.is_leader")
                took_over = anyio.current_time() - last_renewal
                await eventually(
                    lambda: not fake_api._watchers.get(LEASE), "not fake_api._watchers.get(LEASE)"
                )  # the leader no longer watches
        assert _spec(fake_api)["holderIdentity"] == "b" and _spec(fake_api)["leaseTransitions"] == 1
        a_gets = 1 + 4  # a's acquire, then its renewals
        assert fake_api.requests.count(("GET", LEASE)) == a_gets + 2  # b: its first poll and its take-over
        assert 1.0 <= took_over < 1.0 + 0.9  # never before the lease expired; not a poll later
    finally:
        await client_a.close()
        await client_b.close()


async def test_a_dropped_watch_falls_back_to_polling_and_is_opened_again(fake_api: FakeApi) -> None:
    client_a, client_b = make_client(fake_api), make_client(fake_api)
    try:
        a, b = _elector(client_a, "a"), _elector(client_b, "b")
        await a.acquire()
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(b.acquire)
                await eventually(
                    lambda: bool(fake_api._watchers.get(LEASE)), "bool(fake_api._watchers.get(LEASE))"
                )
                fake_api.refuse_watches = True
                fake_api.drop_watches()
                await eventually(
                    lambda: fake_api.watches >= 3, "fake_api.watches >= 3"
                )  # refused, retried with backoff
                assert not b.is_leader  # a's lease has not expired: b waits, it does not fail
                await eventually(
                    lambda: b.is_leader, "b.is_leader"
                )  # a never renewed: b's polls see it expire
        assert _spec(fake_api)["holderIdentity"] == "b"
        fake_api.refuse_watches = False
    finally:
        await client_a.close()
        await client_b.close()
