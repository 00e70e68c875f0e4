"""A seeded chaos run: every fault the local cluster offers, during a scale-up, a scale-down and a rollout.

The manager (ReplicaSet and Deployment controllers, KCM's default client budget) runs in process
against a local cluster whose faults are driven by one seeded RNG: watches dropped, API server
restarts (connections cut mid-request), bursts of 500s and of 429s, a shrunk watch window (410
Gone on resume), added latency. Meanwhile the workload changes in steps, each waited for:

1. a Deployment scales 0 -> N (`web`);
2. then, round after round while faults remain: a ReplicaSet scales up (`plain`), scales down to
   a third, and the Deployment rolls out a new template.

Then the faults stop and the run checks what users care about: each ReplicaSet has exactly its
desired pods, the server created no pod beyond the minimum (each scale-up's difference, N for
each rollout), and every informer cache of the manager equals a fresh LIST. `run_chaos` returns the
figures; the test asserts them and `bench.chaos` prints them for more faults and seeds.
"""

from __future__ import annotations

import functools
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import anyio

from apiclient import ApiError, KubeClient
from apiclient.resources import DEPLOYMENTS, NAMESPACES, REPLICASETS
from controller_manager.app import Manager
from controller_manager.loopmonitor import LOOP_LAG
from informers import SharedInformerFactory
from localcluster.cluster import LocalCluster
from localcluster.requestlog import RequestLog
from localcluster.storage import DEFAULT_WINDOW
from tests.e2e.converged import replica_set_mismatches
from tests.e2e.world import manager_options
from tests.support.objects import deployment, replicaset
from tests.support.waiting import eventually

NS = "chaos"
FAULT_KINDS = ("drop_watches", "restart", "errors_500", "errors_429", "watch_window", "latency")


@dataclass
class ChaosResult:
    seed: int
    faults: Counter[str] = field(default_factory=Counter)
    injected_errors: int = 0
    pod_creates: int = 0
    minimum_creates: int = 0
    #: Pod creates and deletes a restart cut while they were served: each may have been done with
    #: its client told otherwise, and a controller faithful to KCM's expectations then does it
    #: again (one more pod, or one more deleted and so replaced). The only extra creates allowed.
    cut_pod_writes: int = 0
    stuck: dict[str, tuple[int, int]] = field(default_factory=dict)
    cache_differences: dict[str, int] = field(default_factory=dict)
    loop_lag_p99: float = 0.0
    loop_lag_max: float = 0.0
    seconds: float = 0.0
    workload_error: str = ""  #: a step of the workload that never completed

    @property
    def extra_creates(self) -> int:
        return self.pod_creates - self.minimum_creates

    @property
    def caches_equal_list(self) -> bool:
        return not self.cache_differences


async def retrying(call: Callable[[], Awaitable[Any]], *, limit: float = 60.0) -> Any:
    """The test's own writes ride out the faults as kubectl's retries would."""
    with anyio.fail_after(limit):
        while True:
            try:
                return await call()
            except ApiError as exc:
                if exc.status < 500 and not exc.too_many_requests:
                    raise
            except (aiohttp.ClientError, OSError, TimeoutError):
                pass
            await anyio.sleep(0.1)


def _rs(name: str, replicas: int) -> dict[str, Any]:
    return replicaset(name, replicas, image="nginx:1", pod_spec={"terminationGracePeriodSeconds": 0})


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    return deployment(
        name,
        replicas,
        image="nginx:1",
        pod_spec={"terminationGracePeriodSeconds": 0},
        strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 0}},
    )


class FaultInjector:
    """`count` faults at seeded random moments, every kind at least once, none overlapping."""

    def __init__(self, cluster: LocalCluster, rng: random.Random, count: int, *, spacing: float) -> None:
        self.cluster = cluster
        self.rng = rng
        kinds = list(FAULT_KINDS) * (count // len(FAULT_KINDS) + 1)
        self.plan = kinds[: max(count, len(FAULT_KINDS))]
        rng.shuffle(self.plan)
        self.spacing = spacing
        self.done: Counter[str] = Counter()
        self.finished = anyio.Event()

    async def run(self) -> None:
        faults = self.cluster.faults
        for kind in self.plan:
            await anyio.sleep(self.rng.uniform(0.2, 2 * self.spacing))
            self.done[kind] += 1
            if kind == "drop_watches":
                faults.drop_watches()
            elif kind == "restart":
                await faults.restart(downtime=self.rng.uniform(0.1, 1.0))
            elif kind in ("errors_500", "errors_429"):
                faults.fail_requests(self.rng.uniform(0.2, 0.6), code=500 if kind == "errors_500" else 429)
                await anyio.sleep(self.rng.uniform(0.2, 1.0))
                faults.clear()
            elif kind == "watch_window":
                faults.shrink_watch_window(self.rng.randint(1, 5))
                faults.drop_watches()  # every client resumes from a version the window no longer holds
                await anyio.sleep(self.rng.uniform(0.2, 1.0))
                faults.shrink_watch_window(DEFAULT_WINDOW)
            elif kind == "latency":
                faults.add_latency(self.rng.uniform(0.05, 0.3))
                await anyio.sleep(self.rng.uniform(0.2, 1.0))
                faults.clear()
        faults.clear()
        self.finished.set()


async def caches_against_list(kube: KubeClient, factory: SharedInformerFactory) -> dict[str, int]:
    """Informers whose cache differs from a fresh LIST: resource -> objects that differ."""
    out: dict[str, int] = {}
    for inf in factory.informers():
        fresh = await kube.list_all(inf.resource, namespace=inf.namespace)
        listed = {_key(o): o["metadata"]["resourceVersion"] for o in fresh}
        cached = {_key(o): o["metadata"]["resourceVersion"] for o in inf.store.list()}
        differing = set(listed.items()) ^ set(cached.items())
        if differing:
            out[inf.resource.group_resource] = len({k for k, _ in differing})
    return out


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def lag_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The q-quantile of the loop-lag samples observed between two bucket snapshots (upper bound)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return 0.0
    for bound, cumulative in zip(bounds, counts, strict=True):
        if cumulative >= q * total:
            return bound
    return bounds[-1]


def lag_buckets() -> dict[float, float]:
    buckets: dict[float, float] = {}
    for metric in LOOP_LAG.collect():
        for sample in metric.samples:
            if sample.name.endswith("_bucket"):
                buckets[float(sample.labels["le"])] = sample.value
    return buckets


async def run_chaos(
    *, seed: int, faults: int, plain: int = 10, web: int = 12, spacing: float = 0.4
) -> ChaosResult:
    result = ChaosResult(seed=seed)
    rng = random.Random(seed)
    began = time.monotonic()
    lag_before = lag_buckets()
    async with LocalCluster(
        nodes=3, speed=10, pod_start_delay=0.5, termination_cap=0.5, fault_seed=seed
    ) as cluster:
        kube = await cluster.client()
        try:
            await retrying(lambda: kube.create(NAMESPACES, {"metadata": {"name": NS}}))
            await retrying(lambda: kube.create(REPLICASETS, _rs("plain", 0), namespace=NS))
            await retrying(lambda: kube.create(DEPLOYMENTS, _deployment("web", 0), namespace=NS))
            start = time.monotonic()
            factories: list[SharedInformerFactory] = []

            def factory(client: KubeClient) -> SharedInformerFactory:
                factories.append(SharedInformerFactory(client))
                return factories[-1]

            opts = manager_options(cluster, "--controllers=replicaset,deployment")
            client = await cluster.client(qps=opts.kube_api_qps, burst=opts.kube_api_burst)
            manager = Manager(opts, client, factory=factory)
            injector = FaultInjector(cluster, rng, faults, spacing=spacing)
            needed = [0]
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(functools.partial(manager.run, handle_signals=False))
                    try:
                        async with anyio.create_task_group() as chaos:
                            chaos.start_soon(injector.run)
                            result.minimum_creates = await _workload(
                                kube, plain=plain, web=web, until=injector.finished, needed=needed
                            )
                    except* AssertionError as group:  # a step that never completed: the checks say why
                        result.minimum_creates = needed[0]
                        result.workload_error = str(group.exceptions[0])
                        cluster.faults.clear()
                        cluster.faults.shrink_watch_window(DEFAULT_WINDOW)
                    result.faults = injector.done
                    result.injected_errors = cluster.faults.injected
                    await _converge(kube)
                    result.cache_differences = await _caches_settle(kube, factories[0])
                    result.stuck = await replica_set_mismatches(kube, NS)
                    manager.stop()
            finally:
                await client.close()
            result.pod_creates = RequestLog.created(cluster.requests.since(start), "pods")
            result.cut_pod_writes = sum(
                1
                for method, path in cluster.faults.cut_writes
                if method in ("POST", "DELETE") and path.startswith(f"/api/v1/namespaces/{NS}/pods")
            )
        finally:
            await kube.close()
    after = lag_buckets()
    result.loop_lag_max = manager.loop_monitor.max_lag
    result.loop_lag_p99 = min(lag_quantile(lag_before, after, 0.99), result.loop_lag_max)
    result.seconds = time.monotonic() - began
    return result


async def _scale(kube: KubeClient, res: Any, name: str, replicas: int) -> None:
    await retrying(lambda: kube.patch(res, name, {"spec": {"replicas": replicas}}, namespace=NS))


async def _workload(kube: KubeClient, *, plain: int, web: int, until: anyio.Event, needed: list[int]) -> int:
    """Rounds of scale-up, scale-down and rollout until `until` is set (at least one round);
    returns the pods they need created (each scale-up's difference, each rollout's full count),
    kept in `needed[0]` as it goes."""
    low, round_ = 0, 0
    await _scale(kube, DEPLOYMENTS, "web", web)
    needed[0] += web
    await _until(lambda: _rolled_out(kube, web), "web scaled up")
    while True:
        round_ += 1
        await _scale(kube, REPLICASETS, "plain", plain)
        needed[0] += plain - low
        await _until(lambda: _available(kube, REPLICASETS, "plain", plain), "plain scaled up")
        low = max(1, plain // 3)
        await _scale(kube, REPLICASETS, "plain", low)
        template = {"spec": {"template": {"metadata": {"annotations": {"rollout": str(round_)}}}}}
        await retrying(functools.partial(kube.patch, DEPLOYMENTS, "web", template, namespace=NS))
        needed[0] += web
        await _until(lambda: _rolled_out(kube, web), "web rolled out")
        await _until(functools.partial(_available, kube, REPLICASETS, "plain", low), "plain scaled down")
        if until.is_set():
            return needed[0]


# client-go's reflector backs off 800 ms doubling to 30 s, stretched by up to 100 %, reset only
# after two quiet minutes: under a fault a second an informer may be a minute behind, by design.
RECOVERY_LIMIT = 2 * 2 * 30.0


async def _until(
    check: Callable[[], Awaitable[bool]], what: str, *, limit: float = 1.5 * RECOVERY_LIMIT
) -> None:
    await eventually(lambda: retrying(check), what, timeout=limit, interval=0.2)


async def _available(kube: KubeClient, res: Any, name: str, replicas: int) -> bool:
    obj = await kube.get(res, name, namespace=NS)
    return bool((obj.get("status") or {}).get("availableReplicas") == replicas)


async def _rolled_out(kube: KubeClient, replicas: int) -> bool:
    d = await kube.get(DEPLOYMENTS, "web", namespace=NS)
    status = d.get("status") or {}
    return bool(
        status.get("observedGeneration") == d["metadata"]["generation"]
        and status.get("updatedReplicas") == replicas == status.get("availableReplicas")
        and status.get("replicas") == replicas
    )


async def _converge(kube: KubeClient) -> None:
    async def none_stuck() -> bool:
        return not await replica_set_mismatches(kube, NS)

    with anyio.move_on_after(RECOVERY_LIMIT):
        while True:
            if await retrying(none_stuck):
                return
            await anyio.sleep(0.2)


async def _caches_settle(kube: KubeClient, factory: SharedInformerFactory) -> dict[str, int]:
    """Caches lag a LIST by the watch's latency (and backoff): compare until equal, or report."""
    differences: dict[str, int] = {}
    with anyio.move_on_after(RECOVERY_LIMIT):
        while True:
            differences = await caches_against_list(kube, factory)
            if not differences:
                break
            await anyio.sleep(0.5)
    return differences
