"""The manager's lifecycle in-process: readiness follows cache sync; a stop drains in-flight work only."""

from __future__ import annotations

import aiohttp
import anyio
from anyio.abc import TaskGroup

from apiclient import KubeClient
from controller_manager.app import Manager
from controller_manager.options import LeaderElectionOptions, ManagerOptions, ServingOptions
from controller_manager.registry import ControllerDescriptor, ControllerRegistry
from controllers.base import Controller
from controllers.context import ControllerContext
from realcluster.ports import free_port
from tests.support.waiting import eventually


class FakeInformers:
    def __init__(self) -> None:
        self.synced = anyio.Event()
        self.started = False

    def start(self, tg: TaskGroup) -> None:
        self.started = True

    async def wait_for_cache_sync(self) -> bool:
        await self.synced.wait()
        return True


class Slow(Controller):
    release: anyio.Event
    started: list[str]
    finished: list[str]

    async def sync(self, key: str) -> None:
        self.started.append(key)
        await self.release.wait()
        self.finished.append(key)


def _manager(client: KubeClient, informers: FakeInformers, built: list[Slow], grace: float) -> Manager:
    def construct(
        ctx: ControllerContext, *, name: str, workers: int, config: object | None = None
    ) -> Controller:
        controller = Slow(ctx, name=name, workers=workers)
        controller.release, controller.started, controller.finished = anyio.Event(), [], []
        built.append(controller)
        return controller

    registry = ControllerRegistry([ControllerDescriptor("slow", (), (), False, construct, default_workers=1)])
    opts = ManagerOptions(
        controllers=("*",),
        leader_election=LeaderElectionOptions(enabled=False),
        bind_address="127.0.0.1",
        secure_port=free_port(),
        shutdown_grace_period=grace,
        serving=ServingOptions(authorization_always_allow_paths=("/healthz*", "/readyz", "/livez")),
    )
    return Manager(opts, client, registry=registry, factory=lambda _: informers)  # type: ignore[arg-type,return-value]


async def _status(port: int, path: str) -> int:
    async with aiohttp.ClientSession() as s, s.get(f"https://127.0.0.1:{port}{path}", ssl=False) as r:
        return r.status


async def test_ready_after_sync_and_stop_lets_in_flight_syncs_finish(fake_client: KubeClient) -> None:
    informers = FakeInformers()
    built: list[Slow] = []
    manager = _manager(fake_client, informers, built, grace=30.0)
    code: list[int] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            code.append(await manager.run(handle_signals=False))

        tg.start_soon(run)
        await eventually(
            lambda: bool(built) and manager.bound_port is not None,
            "bool(built) and manager.bound_port is not None",
        )
        port = manager.bound_port
        assert port is not None
        assert await _status(port, "/readyz") == 500  # caches not synced yet
        informers.synced.set()
        await eventually(lambda: manager.health.ready, "manager.health.ready")
        assert await _status(port, "/readyz") == 200
        assert await _status(port, "/healthz/slow") == 200
        (slow,) = built
        for key in ("a", "b", "c"):
            slow.enqueue(key)
        await eventually(lambda: slow.started == ["a"], "slow.started == ['a']")
        manager.stop()
        slow.release.set()  # the in-flight sync may finish; b and c are never taken
    assert code == [0]
    assert slow.finished == ["a"] and slow.started == ["a"]


async def test_stop_cancels_syncs_still_running_at_the_deadline(fake_client: KubeClient) -> None:
    informers = FakeInformers()
    built: list[Slow] = []
    informers.synced.set()
    manager = _manager(fake_client, informers, built, grace=0.1)
    code: list[int] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            code.append(await manager.run(handle_signals=False))

        tg.start_soon(run)
        await eventually(lambda: bool(built) and manager.health.ready, "bool(built) and manager.health.ready")
        (slow,) = built
        slow.enqueue("stuck")
        await eventually(lambda: slow.started == ["stuck"], "slow.started == ['stuck']")
        manager.stop()  # never released: the grace period ends it
    assert code == [0]
    assert slow.finished == []
