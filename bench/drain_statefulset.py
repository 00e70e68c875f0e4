"""Benchmark: how long a StatefulSet's pod waits before a NodeMaintenance evicts it.

Nobody answers an EvacuationRequest for a StatefulSet pod, so waiting for an answer only delays the
drain. Two modes on the same layout (three nodes; StatefulSet `db` with its pod `db-0`, made by the
local cluster's StatefulSet controller, on the node to drain; the NodeMaintenance controller running, with `evacuationTimeoutSeconds` from the flag):

- `wait`: the StatefulSet is annotated `maintenance.aiokcm.io/wait-for-evacuation: "true"`, which
  is what every pod whose owner cannot answer used to get: the full timeout, then eviction;
- `prompt`: no annotation, the default now: evicted as soon as the node drains.

Figure per mode: seconds from the NodeMaintenance's creation to the pod being evicted (its
deletionTimestamp set). Prints a table, then as its LAST line one JSON object with the figures.

    python -m bench.drain_statefulset [--evacuation-timeout 30] [--repeat 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from typing import Any

import anyio
import orjson
import structlog

from apiclient import ApiError, KubeClient
from apiclient.resources import NODEMAINTENANCES, PODS, STATEFULSETS
from controller_manager.options import ManagerOptions
from controller_manager.registry import default_registry
from controllers import features
from controllers.context import ControllerContext, StaticGates
from controllers.nodemaintenance.nodeselector import names_selector
from controllers.nodemaintenance.workload import WAIT_ANNOTATION
from informers import SharedInformerFactory
from localcluster.cluster import LocalCluster
from localcluster.demo import ensure_crd

NS = "default"
GATES = {features.DECLARATIVE_NODE_MAINTENANCE: True}


def statefulset(*, wait: bool) -> dict[str, Any]:
    labels = {"app": "db"}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": NS, "annotations": {WAIT_ANNOTATION: "true"} if wait else {}},
        "spec": {
            "replicas": 1,
            "serviceName": "db",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "db", "image": "pause"}]},
            },
        },
    }


async def placed(client: KubeClient) -> dict[str, Any]:
    """`db-0` once the cluster's StatefulSet controller made it and the scheduler bound it."""
    with anyio.fail_after(60):
        while True:
            try:
                got = await client.get(PODS, "db-0", namespace=NS)
            except ApiError as exc:
                if not exc.not_found:
                    raise
            else:
                if got["spec"].get("nodeName"):
                    return got
            await anyio.sleep(0.05)


async def evicted(client: KubeClient, resource_version: str) -> None:
    """Return when `db-0` gets its deletionTimestamp (or goes), as a WATCH sees it: no polling lag."""
    async with client.watch(
        PODS, namespace=NS, resource_version=resource_version, field_selector="metadata.name=db-0"
    ) as events:
        async for ev in events:
            if ev.type == "DELETED" or (
                ev.type != "BOOKMARK" and ev.object["metadata"].get("deletionTimestamp")
            ):
                return
    raise RuntimeError("the pod watch ended before db-0 was evicted")


async def one_run(*, wait: bool, timeout: int) -> float:
    async with LocalCluster(nodes=3, pod_start_delay=0.2, termination_cap=0.5) as cluster:
        client = await cluster.client(qps=100, burst=200)
        try:
            await ensure_crd(client)
            await client.create(STATEFULSETS, statefulset(wait=wait), namespace=NS)
            created = await placed(client)
            target = created["spec"]["nodeName"]
            factory = SharedInformerFactory(client)
            ctx = ControllerContext(client=client, informers=factory, gates=StaticGates(GATES))
            controller = default_registry().get("nodemaintenance").build(ctx, ManagerOptions())
            async with anyio.create_task_group() as tg:
                factory.start(tg)
                tg.start_soon(controller.run)
                await controller.wait_for_caches()
                start = time.monotonic()
                await client.create(
                    NODEMAINTENANCES,
                    {
                        "apiVersion": NODEMAINTENANCES.api_version,
                        "kind": NODEMAINTENANCES.kind,
                        "metadata": {"name": "bench"},
                        "spec": {
                            "nodeSelector": names_selector([target]),
                            "cordon": True,
                            "drain": True,
                            "evacuationTimeoutSeconds": timeout,
                        },
                    },
                )
                with anyio.fail_after(timeout + 60):
                    await evicted(client, created["metadata"]["resourceVersion"])
                seconds = time.monotonic() - start
                controller.stop()
                tg.cancel_scope.cancel()
            return seconds
        finally:
            await client.close()


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.drain_statefulset", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--evacuation-timeout", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    # The controller logs each eviction at info; the bench's output is its table and JSON line.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    figures: dict[str, Any] = {"evacuation_timeout_seconds": args.evacuation_timeout}
    print(f"{'mode':<8} {'seconds to evicted (median of ' + str(args.repeat) + ')':>36}")
    for mode, wait in (("wait", True), ("prompt", False)):
        runs = [await one_run(wait=wait, timeout=args.evacuation_timeout) for _ in range(args.repeat)]
        figures[f"{mode}_seconds"] = round(statistics.median(runs), 3)
        print(f"{mode:<8} {statistics.median(runs):>36.2f}")
    print(orjson.dumps({"bench": "drain_statefulset", **figures}).decode())
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
