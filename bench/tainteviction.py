"""Benchmark: the taint-eviction controller's deletion rate and its taint-to-delete latency.

Two parts:

- **budget** (local API server over HTTP, `--kube-api-qps` 20 / `--kube-api-burst` 30): one node
  with `--pods` (110) untolerating pods gets a NoExecute taint. Each eviction costs two writes
  (the `DisruptionTarget` status patch, then the delete), so the client budget allows at most
  `(qps * T + burst) / 2` evictions in `T` seconds. Reported: evictions per second, that
  ceiling, and the fraction of it reached (aim >= 90%).
- **latency** (`--nodes` 500 / `--cached-pods` 15,000 by default; `--nodes 5000 --cached-pods
  150000` for the issue's figure): the informer stores are filled directly (a local server
  holding 150,000 pods is the API server's benchmark, not this controller's), the controller
  runs its real sharded workers and timed queue, and its writes go to an in-process client that
  answers at once with no rate limit. `--tainted` nodes are tainted one after another; reported
  is the time from each node's taint event to the delete request of each of its pods (p50, p99,
  max): the controller's own cost, with no rate limiter wait included.

Prints a readable table, then, as its LAST line, one JSON object with the figures.

    python -m bench.tainteviction [--pods 110] [--kube-api-qps 20] [--nodes 5000 --cached-pods 150000]
"""

from __future__ import annotations

import argparse
import copy
import time
from typing import Any, cast

import anyio
import orjson

from apiclient import KubeClient
from apiclient.resources import NODES, PODS
from controller_manager.options import ManagerOptions
from controller_manager.registry import default_registry
from controllers.context import ControllerContext
from controllers.tainteviction import TaintEvictionController
from controllers.tainteviction import metrics as tmetrics
from informers import SharedInformerFactory, meta_key
from localcluster.cluster import LocalCluster


def _build(ctx: ControllerContext) -> TaintEvictionController:
    """The controller as the manager builds it: its registry row's name and worker count."""
    controller = default_registry().get("taint-eviction-controller").build(ctx, ManagerOptions())
    assert isinstance(controller, TaintEvictionController)
    return controller


NS = "default"
TAINT = {"key": "bench.aiokcm.io/evict", "effect": "NoExecute"}
DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]


def _deletions() -> float:
    for family in tmetrics.POD_DELETIONS_TOTAL.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                return float(sample.value)
    return 0.0


def _pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "pause"}],
            "terminationGracePeriodSeconds": 0,
        },
    }


async def budget_run(pods: int, qps: float, burst: int) -> dict[str, Any]:
    async with LocalCluster(nodes=1, scheduler=False, kubelets=False, gc=False) as cluster:
        admin = await cluster.client()
        client: KubeClient = await cluster.client(qps=qps, burst=burst)
        try:
            for i in range(pods):
                await admin.create(PODS, _pod(f"p-{i}", "node-1"), namespace=NS)
            factory = SharedInformerFactory(client, gc_freeze=True)  # as the manager runs (--gc-freeze)
            controller = _build(ControllerContext(client=client, informers=factory))
            before = _deletions()
            async with anyio.create_task_group() as tg:
                factory.start(tg)
                tg.start_soon(controller.run)
                await factory.wait_for_cache_sync()
                await anyio.sleep(
                    burst / qps + 0.1
                )  # the informers' LISTs spent tokens: start with a full bucket
                start = time.perf_counter()
                await admin.patch(NODES, "node-1", {"spec": {"taints": [TAINT]}})
                # The deletions counter is the controller's own record of a finished delete; poll it.
                while _deletions() - before < pods:  # noqa: ASYNC110
                    await anyio.sleep(0.005)
                elapsed = time.perf_counter() - start
                tg.cancel_scope.cancel()
        finally:
            await client.close()
            await admin.close()
    rate = pods / elapsed
    ceiling = (qps * elapsed + burst) / 2 / elapsed
    return {
        "pods": pods,
        "qps": qps,
        "burst": burst,
        "elapsed_s": round(elapsed, 3),
        "evictions_per_s": round(rate, 2),
        "ceiling_per_s": round(ceiling, 2),
        "of_ceiling": round(rate / ceiling, 3),
    }


class _RecordingClient:
    """Answers the controller's patch and delete at once and notes when each delete was asked."""

    def __init__(self) -> None:
        self.deleted_at: dict[str, float] = {}
        self.expected = -1
        self.all_deleted = anyio.Event()

    async def patch(self, res: Any, name: str, patch: Any, **kwargs: Any) -> dict[str, Any]:
        return {}

    async def delete(
        self, res: Any, name: str, *, namespace: str | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        self.deleted_at[f"{namespace}/{name}"] = time.perf_counter()
        if len(self.deleted_at) == self.expected:
            self.all_deleted.set()
        return {}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def latency_run(nodes: int, cached_pods: int, tainted: int, spacing: float) -> dict[str, Any]:
    fake = _RecordingClient()
    client = cast(KubeClient, fake)
    factory = SharedInformerFactory(client, gc_freeze=True)  # as the manager runs (--gc-freeze)
    controller = _build(ControllerContext(client=client, informers=factory))
    node_store, pod_store = controller.node_informer.store, controller.pod_informer.store
    per_node = max(1, cached_pods // nodes)
    fill_start = time.perf_counter()
    node_objs: list[dict[str, Any]] = []
    for n in range(nodes):
        node = {"metadata": {"name": f"node-{n}", "uid": f"n{n}"}, "spec": {}}
        node_store.update(meta_key(node), node)
        node_objs.append(node)
        for i in range(per_node):
            pod = {
                "metadata": {"name": f"p-{n}-{i}", "namespace": NS, "uid": f"u{n}-{i}"},
                "spec": {"nodeName": f"node-{n}", "tolerations": DEFAULT_TOLERATIONS},
                "status": {"phase": "Running"},
            }
            pod_store.update(meta_key(pod), pod)
    fill_s = time.perf_counter() - fill_start

    async def no_wait() -> None:
        return None

    controller.wait_for_caches = no_wait  # type: ignore[method-assign]  # the stores are filled by hand
    tainted_at: dict[str, float] = {}
    step = max(1, nodes // tainted)
    victims = [node_objs[i] for i in range(0, nodes, step)][:tainted]
    fake.expected = len(victims) * per_node
    async with anyio.create_task_group() as tg:
        tg.start_soon(controller.run)
        await anyio.sleep(0.05)
        for old in victims:
            new = copy.deepcopy(old)
            new["spec"]["taints"] = [TAINT]
            node_store.update(meta_key(new), new)
            tainted_at[old["metadata"]["name"]] = time.perf_counter()
            controller._node_updated(old, new)  # what the informer's handler call would be
            await anyio.sleep(spacing)
        with anyio.move_on_after(60):
            await fake.all_deleted.wait()
        tg.cancel_scope.cancel()
    latencies = [at - tainted_at[f"node-{key.split('-')[1]}"] for key, at in fake.deleted_at.items()]
    return {
        "nodes": nodes,
        "cached_pods": per_node * nodes,
        "store_fill_s": round(fill_s, 2),
        "tainted_nodes": len(victims),
        "deletes": len(latencies),
        "expected_deletes": fake.expected,
        "p50_ms": round(1000 * _percentile(latencies, 0.50), 2),
        "p99_ms": round(1000 * _percentile(latencies, 0.99), 2),
        "max_ms": round(1000 * max(latencies, default=0.0), 2),
    }


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--pods", type=int, default=110, help="pods on the tainted node (budget part)")
    parser.add_argument("--kube-api-qps", type=float, default=20.0)
    parser.add_argument("--kube-api-burst", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=500, help="nodes cached (latency part)")
    parser.add_argument("--cached-pods", type=int, default=15_000, help="pods cached (latency part)")
    parser.add_argument(
        "--tainted", type=int, default=50, help="nodes tainted one after another (latency part)"
    )
    parser.add_argument("--spacing", type=float, default=0.02, help="seconds between two taints")
    args = parser.parse_args(argv)
    budget = await budget_run(args.pods, args.kube_api_qps, args.kube_api_burst)
    latency = await latency_run(args.nodes, args.cached_pods, args.tainted, args.spacing)
    print("budget: one tainted node, every pod untolerating, over HTTP to the local API server")
    print(
        f"{'pods':>6} {'qps':>5} {'burst':>5} {'elapsed s':>9} {'evict/s':>8} {'ceiling/s':>9} {'of ceiling':>10}"
    )
    b = budget
    print(
        f"{b['pods']:>6} {b['qps']:>5.0f} {b['burst']:>5} {b['elapsed_s']:>9.2f} {b['evictions_per_s']:>8.2f} "
        f"{b['ceiling_per_s']:>9.2f} {100 * b['of_ceiling']:>9.1f}%"
    )
    print(
        "latency: taint event -> delete request, stores filled directly, writes answered in-process, no rate limit"
    )
    print(f"{'nodes':>6} {'pods':>8} {'tainted':>7} {'deletes':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    lt = latency
    print(
        f"{lt['nodes']:>6} {lt['cached_pods']:>8} {lt['tainted_nodes']:>7} {lt['deletes']:>7} "
        f"{lt['p50_ms']:>8.2f} {lt['p99_ms']:>8.2f} {lt['max_ms']:>8.2f}"
    )
    figures = {"budget": budget, "latency": latency}
    print(orjson.dumps(figures).decode())
    return figures


if __name__ == "__main__":
    anyio.run(main)
