"""Every controller, the informers, events and leader election wait on rate limiters of their own.

KCM builds a client per controller (`SimpleControllerClientBuilder`) and a separate one for
leader election, each with `--kube-api-qps`/`--kube-api-burst`: one controller's burst of writes
never delays another's requests or a lease renewal. A shared bucket was how a busy leader lost
its lease under its own load.
"""

from __future__ import annotations

from typing import Any

import anyio
from aiohttp import web
from anyio.abc import TaskGroup

from apiclient import KubeClient
from apiclient.resources import NODES
from controller_manager.app import Manager
from controller_manager.options import LeaderElectionOptions, ManagerOptions
from controller_manager.registry import ControllerDescriptor, ControllerRegistry
from controllers.base import Controller
from controllers.context import ControllerContext
from localcluster.cluster import LocalCluster
from tests.manager.waiting import eventually


class _Informers:
    def start(self, tg: TaskGroup) -> None:
        return None

    async def wait_for_cache_sync(self) -> bool:
        return True


class _Idle(Controller):
    default_workers = 1

    async def sync(self, key: str) -> None:
        return None


async def test_a_derived_client_has_its_own_bucket_and_shares_the_connections(fake_client: KubeClient) -> None:
    parent = KubeClient(fake_client.api_client, qps=1, burst=1, _owns_api_client=False)
    child = parent.derive("replicaset")
    for _ in range(10):
        parent.bucket.reserve()  # the parent's budget is spent for the next ten seconds
    assert child.bucket.reserve() == 0.0
    assert (child.bucket.qps, child.bucket.burst) == (1, 1)
    assert child.api_client is parent.api_client
    await child.close()  # a derived client leaves the shared connections open
    assert not parent.api_client.rest_client.pool_manager.closed


async def test_each_controller_and_leader_election_get_their_own_client(fake_client: KubeClient) -> None:
    seen: dict[str, KubeClient] = {}

    def constructor(name: str) -> ControllerDescriptor:
        def construct(ctx: ControllerContext) -> Controller:
            seen[name] = ctx.client
            return type(name, (_Idle,), {"name": name})(ctx)

        return ControllerDescriptor(name, (), (), False, construct, default_workers=1)

    registry = ControllerRegistry([constructor("first"), constructor("second")])
    opts = ManagerOptions(controllers=("*",), leader_election=LeaderElectionOptions(enabled=False), secure_port=0)
    manager = Manager(opts, fake_client, registry=registry, factory=lambda _: _Informers())  # type: ignore[arg-type,return-value]
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: manager.run(handle_signals=False))
        await eventually(lambda: len(seen) == 2)
        manager.stop()
    assert {name: c.component for name, c in seen.items()} == {"first": "first", "second": "second"}
    assert seen["first"].bucket is not seen["second"].bucket
    assert fake_client.bucket not in (seen["first"].bucket, seen["second"].bucket)

    elected = Manager(ManagerOptions(controllers=("*",), leader_election=LeaderElectionOptions(enabled=True)),
                      fake_client, registry=registry)
    assert elected.elector is not None
    assert elected.elector.client.component == "leader-election"
    assert elected.elector.client.bucket is not fake_client.bucket


async def test_each_client_reaches_the_server_with_its_component_in_the_user_agent(
    cluster_factory: type[LocalCluster],
) -> None:
    """As KCM's `kube-controller-manager/v1.x (...)/<controller>`: an API server's audit log and
    request metrics tell the controllers apart."""
    seen: list[str] = []

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        seen.append(request.headers.get("User-Agent", ""))
        return await handler(request)

    cluster = cluster_factory(nodes=0)
    cluster.app.middlewares.append(record)
    async with cluster:
        base = await cluster.client()
        try:
            await base.list(NODES)
            await base.derive("replicaset").list(NODES)
            await base.derive("events").list(NODES)
        finally:
            await base.close()
    agent = seen[0]
    assert agent and not agent.endswith("/replicaset")
    assert seen == [agent, f"{agent}/replicaset", f"{agent}/events"]
