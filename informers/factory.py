"""SharedInformerFactory: one informer per (resource, namespace, selectors), however many ask.

Controllers ask for informers while they are built; the manager starts the factory in its
task group once every controller exists (`start(tg)`), then waits for the caches. An informer
asked for after `start` starts at once in the same task group. Cancelling the task group stops
every informer and handler task.

Custom resources (NodeMaintenance) need nothing special: a `Resource` names the group,
version and plural, and the informer LISTs and WATCHes its path like any built-in kind.

Garbage collection: `gc_freeze=True` freezes the heap after each (re)list and every thousand
events (see `gcpolicy`), so full collections never rescan the cache. It is off by default:
`gc.freeze` acts on the whole process, and a library must not change its user's GC behaviour
behind their back. The process's owner turns it on: the `aiokcm` manager does (its
`--gc-freeze` flag, on by default), and so do the benchmarks. Off, a cold start is slower
(every young collection during a LIST rescans the objects just built) but nothing else changes.

Transforms: the informer for a resource has one transform, since it has one cache. By default
it is `default_transform` (or the one given in `transforms=` for that resource). If callers ask
for different transforms of the same informer, the cache must satisfy all of them, so it falls
back to `default_transform`, which keeps every field a projection could keep; once the
informer has started that is only possible if it already runs the default.
"""

from __future__ import annotations

from collections.abc import Mapping

import anyio
import anyio.abc
import structlog

from apiclient import KubeClient, Resource
from informers.gcpolicy import Freezer
from informers.reflector import ReflectorOptions
from informers.shared_informer import SharedInformer
from informers.transform import Transform, default_transform

log = structlog.get_logger(__name__)

InformerKey = tuple[Resource, str, str, str]


def _norm(value: str | None) -> str:
    return (value or "").strip()


class SharedInformerFactory:
    """Builds, shares, starts and waits for informers."""

    def __init__(
        self,
        client: KubeClient,
        *,
        resync_period: float = 0.0,
        transforms: Mapping[Resource, Transform] | None = None,
        options: ReflectorOptions | None = None,
        gc_freeze: bool = False,
    ) -> None:
        self.client = client
        self.freezer = Freezer(enabled=gc_freeze, every=1000)
        self.resync_period = resync_period
        self.transforms = dict(transforms or {})
        self.options = options
        self._informers: dict[InformerKey, SharedInformer] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    def informer(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
        read_interval: float = 0.0,
    ) -> SharedInformer:
        """The shared informer for these arguments, created (and started if the factory runs) on first ask.

        `read_interval`: how late an event may reach the cache, for a caller that reads the
        cache on a period of its own rather than acting on each event (see `KubeClient.watch`).
        The informer is shared, so it uses the shortest interval any caller asked for (0, the
        default, means at once); a shorter one asked after the start applies from the next watch.
        """
        key: InformerKey = (
            res,
            _norm(namespace) if res.namespaced else "",
            _norm(label_selector),
            _norm(field_selector),
        )
        wanted = transform or self.transforms.get(res, default_transform)
        inf = self._informers.get(key)
        if inf is None:
            inf = SharedInformer(
                self.client,
                res,
                namespace=key[1] or None,
                label_selector=key[2] or None,
                field_selector=key[3] or None,
                transform=wanted,
                resync_period=self.resync_period,
                options=self.options,
                freezer=self.freezer,
            )
            inf.reflector.read_interval = read_interval
            self._informers[key] = inf
            if self._tg is not None:
                self._start(inf, self._tg)
        else:
            inf.reflector.read_interval = min(inf.reflector.read_interval, read_interval)
            if inf.transform is not wanted:
                self._reconcile_transform(inf, wanted)
        return inf

    @staticmethod
    def _reconcile_transform(inf: SharedInformer, wanted: Transform) -> None:
        if inf.transform is default_transform:
            return
        if inf.started:
            raise ValueError(
                f"informer for {inf.resource.group_resource} already runs another transform; "
                "ask for it before the factory starts or use the same transform"
            )
        log.info(
            "informer transforms differ, caching with the default transform",
            resource=inf.resource.group_resource,
        )
        inf.transform = default_transform

    def informers(self) -> list[SharedInformer]:
        return list(self._informers.values())

    def start(self, tg: anyio.abc.TaskGroup) -> None:
        """Start every informer asked for so far in `tg`; later ones start when asked for."""
        self._tg = tg
        for inf in self._informers.values():
            if not inf.started:
                self._start(inf, tg)

    @staticmethod
    def _start(inf: SharedInformer, tg: anyio.abc.TaskGroup) -> None:
        tg.start_soon(inf.run, name=f"informer:{inf.resource.group_resource}")

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """Wait until every informer asked for so far has listed; False if `timeout` passes first."""
        with anyio.move_on_after(timeout):
            for inf in list(self._informers.values()):
                await inf.wait_synced()
            return True
        return False
