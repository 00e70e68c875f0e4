"""Every controller, the informers, events and leader election wait on rate limiters of their own.

KCM builds a client per controller (`SimpleControllerClientBuilder`) and a separate one for
leader election, each with `--kube-api-qps`/`--kube-api-burst`: one controller's burst of writes
never delays another's requests or a lease renewal. A shared bucket was how a busy leader lost
its lease under its own load.
"""

from __future__ import annotations

import anyio
from anyio.abc import TaskGroup

from apiclient import KubeClient
from apiclient.resources import CONFIGMAPS
from controller_manager.app import Manager
from controller_manager.options import LeaderElectionOptions, ManagerOptions
from controller_manager.registry import ControllerDescriptor, ControllerRegistry
from controllers.base import Controller
from controllers.context import ControllerContext
from localcluster.cluster import LocalCluster
from tests.support.waiting import eventually


class _Informers:
    def start(self, tg: TaskGroup) -> None:
        return None

    async def wait_for_cache_sync(self) -> bool:
        return True


class _Idle(Controller):
    async def sync(self, key: str) -> None:
        return None


async def test_a_derived_client_has_its_own_bucket_and_shares_the_connections(
    fake_client: KubeClient,
) -> None:
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
        def construct(
            ctx: ControllerContext, *, name: str, workers: int, config: object | None = None
        ) -> Controller:
            seen[name] = ctx.client
            return _Idle(ctx, name=name, workers=workers)

        return ControllerDescriptor(name, (), (), False, construct, default_workers=1)

    registry = ControllerRegistry([constructor("first"), constructor("second")])
    opts = ManagerOptions(
        controllers=("*",), leader_election=LeaderElectionOptions(enabled=False), secure_port=0
    )
    manager = Manager(opts, fake_client, registry=registry, factory=lambda _: _Informers())  # type: ignore[arg-type,return-value]
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: manager.run(handle_signals=False))
        await eventually(lambda: len(seen) == 2, "len(seen) == 2")
        manager.stop()
    assert {name: c.component for name, c in seen.items()} == {"first": "first", "second": "second"}
    assert seen["first"].bucket is not seen["second"].bucket
    assert fake_client.bucket not in (seen["first"].bucket, seen["second"].bucket)

    elected = Manager(
        ManagerOptions(controllers=("*",), leader_election=LeaderElectionOptions(enabled=True)),
        fake_client,
        registry=registry,
    )
    assert elected.elector is not None
    assert elected.elector.client.component == "leader-election"
    assert elected.elector.client.bucket is not fake_client.bucket


async def test_the_server_sees_the_user_agent_of_each_component(cluster: LocalCluster) -> None:
    """The API server's audit log is how an operator tells which controller wrote: the
    component's User-Agent must reach it, not the generated client's default."""
    parent = await cluster.client()
    try:
        await parent.derive("replicaset").create(
            CONFIGMAPS, {"metadata": {"name": "from-rs"}}, namespace="default"
        )
        await parent.create(CONFIGMAPS, {"metadata": {"name": "from-parent"}}, namespace="default")
    finally:
        await parent.close()
    agents = [w.user_agent for w in cluster.requests.writes if w.resource == "configmaps"]
    assert len(agents) == 2
    assert agents[0].endswith("/replicaset")
    assert not agents[1].endswith("/replicaset")
