"""Run controllers against a real API server in tests: a factory, the controllers, one task group.

    async with running_controllers(kube, ReplicaSetController, gates={DECLARATIVE_NODE_MAINTENANCE: True}) as h:
        await eventually(lambda: ..., "three pods")  # eventually: tests.support.waiting

A controller class is built as the manager builds it, under the name and worker count of its row
in `controller_manager.registry` and with its typed config at its defaults unless the test gives
one (`build`); a test that needs other constructor arguments passes a function of the context that
calls `build` itself.

Everything started here is cancelled on exit, so the leak guard in `tests/conftest.py` stays quiet.
`HeldWatches` wraps a client so that watch events of chosen resources are held back until
released: the way to show a controller coping with an informer that lags behind its writes.
`RecordingEvents` keeps every event a controller emits for assertions.

The informers cache what `aiokcm run` caches (`informers.PROJECTIONS`); `make_factory` is the
seam `conftest.py` uses to guard those caches (see `projectionguard`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from apiclient import KubeClient
from apiclient.resources import Resource
from controller_manager.options import ManagerOptions
from controller_manager.registry import ControllerDescriptor, default_descriptors, import_controller_class
from controllers.base import Controller
from controllers.context import ControllerContext, EventRecorder, StaticGates
from informers import PROJECTIONS, SharedInformer, SharedInformerFactory, Transform

TransformFor = Callable[[Resource], Transform]
C = TypeVar("C", bound=Controller)


class _PerResourceFactory(SharedInformerFactory):
    """A factory whose default transform for each resource comes from `transform_for`."""

    def __init__(self, client: Any, transform_for: TransformFor) -> None:
        super().__init__(client)
        self._transform_for = transform_for

    def informer(self, res: Resource, **kwargs: Any) -> SharedInformer:
        kwargs["transform"] = kwargs.get("transform") or self._transform_for(res)
        return super().informer(res, **kwargs)


transform_for: TransformFor | None = None  # set by the projection guard fixture


def make_factory(client: Any) -> SharedInformerFactory:
    """The informer factory the controllers under test read from: the manager's projections."""
    if transform_for is not None:
        return _PerResourceFactory(client, transform_for)
    return SharedInformerFactory(client, transforms=PROJECTIONS)


@dataclass(frozen=True)
class RecordedEvent:
    component: str
    object_name: str
    type_: str
    reason: str
    message: str


@dataclass
class RecordingEvents:
    """An `EventRecorderFactory` that remembers events instead of posting them."""

    events: list[RecordedEvent] = field(default_factory=list)

    def recorder(self, component: str) -> EventRecorder:
        events = self.events

        class _Recorder:
            def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
                name = str((obj.get("metadata") or {}).get("name", ""))
                events.append(RecordedEvent(component, name, type_, reason, message))

        return _Recorder()

    def reasons(self, object_name: str | None = None) -> list[str]:
        return [e.reason for e in self.events if object_name is None or e.object_name == object_name]


class HeldWatches:
    """A client proxy whose watches of `held` resources deliver nothing until `release()`.

    Only the informers' view lags; writes go through the real client at once.
    """

    def __init__(self, inner: KubeClient, held: Sequence[Resource]) -> None:
        self._inner = inner
        self._held = set(held)
        self._released = anyio.Event()

    def release(self) -> None:
        self._released.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @asynccontextmanager
    async def watch(self, res: Resource, **kwargs: Any) -> AsyncIterator[AsyncIterator[Any]]:
        async with self._inner.watch(res, **kwargs) as events:
            if res not in self._held:
                yield events
                return

            async def held() -> AsyncIterator[Any]:
                await self._released.wait()
                async for ev in events:
                    yield ev

            yield held()


def descriptor_of(cls: type[Controller]) -> ControllerDescriptor:
    """The registry row of a controller class: the only source of its name and worker count."""
    for descriptor in default_descriptors():
        if import_controller_class(descriptor.import_path) is cls:
            return descriptor
    raise LookupError(f"{cls.__qualname__} has no row in controller_manager.registry")


def default_config(descriptor: ControllerDescriptor) -> object | None:
    """The config the manager would give the controller with no flags set; None if it takes none."""
    return None if descriptor.config is None else descriptor.config(ManagerOptions())


def build(cls: type[C], ctx: ControllerContext, *, workers: int | None = None, **kwargs: Any) -> C:
    """`cls` under its row's name and worker count (or `workers`), as the manager builds it; its
    config is the default one unless `config=` is given."""
    descriptor = descriptor_of(cls)
    count = descriptor.default_workers if workers is None else workers
    config = default_config(descriptor)
    if config is not None:
        kwargs.setdefault("config", config)
    return cls(ctx, name=descriptor.name, workers=count, **kwargs)


def _build_with(
    cls: type[Controller], ctx: ControllerContext, workers: int | None, configs: Sequence[object]
) -> Controller:
    """`build`, with the config among `configs` of the type the controller takes, if there is one."""
    default = default_config(descriptor_of(cls))
    given = [c for c in configs if default is not None and type(c) is type(default)]
    return build(cls, ctx, workers=workers, **({"config": given[0]} if given else {}))


ControllerFactory = type[Controller] | Callable[[ControllerContext], Controller]


@dataclass
class Harness:
    factory: SharedInformerFactory
    ctx: ControllerContext
    controllers: list[Controller]
    events: RecordingEvents


@asynccontextmanager
async def running_controllers(
    client: KubeClient,
    *controller_types: ControllerFactory,
    gates: Mapping[str, bool] | None = None,
    workers: int | None = None,
    informer_client: Any = None,
    configs: Sequence[object] = (),
) -> AsyncIterator[Harness]:
    """Build the controllers, start the informers, run the controllers; cancel all on exit.

    `informer_client` (e.g. a `HeldWatches`) feeds the informers while the controllers write
    through `client`. A class is built with `build` (`workers` overrides its row's count, and a
    config in `configs` of the type it takes replaces its default config); any other factory is
    called with the context.
    """
    factory = make_factory(informer_client or client)
    events = RecordingEvents()
    ctx = ControllerContext(
        client=client,
        informers=factory,
        events=events,
        gates=StaticGates(dict(gates or {})),
    )
    controllers = [
        _build_with(make, ctx, workers, configs) if isinstance(make, type) else make(ctx)
        for make in controller_types
    ]
    async with anyio.create_task_group() as tg:
        factory.start(tg)
        for controller in controllers:
            tg.start_soon(controller.run)
        try:
            yield Harness(factory, ctx, controllers, events)
        finally:
            tg.cancel_scope.cancel()
