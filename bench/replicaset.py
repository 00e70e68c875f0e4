"""Benchmark: scale one ReplicaSet 0 -> N against the local API server.

Two runs:

- **throttled** (`--kube-api-qps`, default 20, burst 30): the controller should spend the whole
  client-side budget on creates. Budget used = requests sent / (qps x elapsed + burst).
- **unthrottled** (qps 0 = no client limit): pods created per second, and where the time goes
  (syncs, time inside syncs, mean create latency, requests by verb).

Prints a readable table, then, as its LAST line, one JSON object with the figures.

    python -m bench.replicaset [--replicas 200] [--kube-api-qps 20] [--kube-api-burst 30]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import anyio
import orjson

from apiclient import KubeClient
from apiclient.metrics import REQUEST_DURATION, REQUESTS_TOTAL
from apiclient.resources import REPLICASETS
from controller_manager.options import ManagerOptions
from controller_manager.registry import default_registry
from controllers import metrics as cmetrics
from controllers.common.controller_ref import get_controller_of
from controllers.context import ControllerContext
from controllers.replicaset import ReplicaSetController
from informers import ResourceEventHandler, SharedInformerFactory
from localcluster.cluster import LocalCluster

NS = "default"


def _sample_sum(metric: Any, name: str, **labels: str) -> float:
    total = 0.0
    for family in metric.collect():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def _requests_by_method() -> dict[str, float]:
    out: dict[str, float] = {}
    for family in REQUESTS_TOTAL.collect():
        for sample in family.samples:
            if sample.name == "rest_client_requests_total":
                method = sample.labels.get("method", "?")
                out[method] = out.get(method, 0.0) + sample.value
    return out


def _rs_body(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "pause"}]},
            },
        },
    }


async def _run_once(
    cluster: LocalCluster, name: str, replicas: int, qps: float, burst: int
) -> dict[str, Any]:
    client: KubeClient = await cluster.client(qps=qps, burst=burst)
    factory = SharedInformerFactory(client, gc_freeze=True)  # as the manager runs (--gc-freeze)
    controller = (
        default_registry()
        .get("replicaset")
        .build(ControllerContext(client=client, informers=factory), ManagerOptions())
    )
    assert isinstance(controller, ReplicaSetController)
    before_requests = _requests_by_method()
    before_syncs = _sample_sum(cmetrics.RECONCILE_TIME, "controller_runtime_reconcile_time_seconds_count")
    before_sync_time = _sample_sum(cmetrics.RECONCILE_TIME, "controller_runtime_reconcile_time_seconds_sum")
    before_post_n = _sample_sum(REQUEST_DURATION, "rest_client_request_duration_seconds_count", verb="POST")
    before_post_s = _sample_sum(REQUEST_DURATION, "rest_client_request_duration_seconds_sum", verb="POST")
    done = anyio.Event()
    seen: set[str] = set()

    def on_add(pod: dict[str, Any]) -> None:
        # The controller's own informer: the scale-up is over when it has seen every pod.
        if (get_controller_of(pod) or {}).get("name") == name:
            seen.add(str(pod["metadata"]["uid"]))
            if len(seen) >= replicas:
                done.set()

    controller.pod_informer.add_event_handler(ResourceEventHandler(on_add=on_add))
    try:
        async with anyio.create_task_group() as tg:
            factory.start(tg)
            tg.start_soon(controller.run)
            await factory.wait_for_cache_sync()
            # Spend the burst on nothing else before the clock starts: a fresh bucket.
            start = time.perf_counter()
            await client.create(REPLICASETS, _rs_body(name, replicas), namespace=NS)
            await done.wait()
            elapsed = time.perf_counter() - start
            tg.cancel_scope.cancel()
    finally:
        await client.close()
    after = _requests_by_method()
    requests = {m: after.get(m, 0.0) - before_requests.get(m, 0.0) for m in after}
    # The informers' LIST/WATCH before the clock started are not part of the scale-up.
    sent_during = sum(v for m, v in requests.items() if m in ("POST", "PATCH", "DELETE", "PUT"))
    budget = qps * elapsed + burst if qps > 0 else float("inf")
    syncs = (
        _sample_sum(cmetrics.RECONCILE_TIME, "controller_runtime_reconcile_time_seconds_count") - before_syncs
    )
    sync_time = (
        _sample_sum(cmetrics.RECONCILE_TIME, "controller_runtime_reconcile_time_seconds_sum")
        - before_sync_time
    )
    posts = (
        _sample_sum(REQUEST_DURATION, "rest_client_request_duration_seconds_count", verb="POST")
        - before_post_n
    )
    post_s = (
        _sample_sum(REQUEST_DURATION, "rest_client_request_duration_seconds_sum", verb="POST") - before_post_s
    )
    return {
        "replicas": replicas,
        "qps": qps,
        "elapsed_s": round(elapsed, 3),
        "pods_per_s": round(replicas / elapsed, 1),
        "writes": int(sent_during),
        "budget_used": round(sent_during / budget, 3) if budget != float("inf") else None,
        "syncs": int(syncs),
        "sync_time_s": round(sync_time, 3),
        "mean_create_ms": round(1000 * post_s / posts, 2) if posts else None,
        "requests_by_method": {m: int(v) for m, v in sorted(requests.items()) if v},
    }


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--replicas", type=int, default=200)
    parser.add_argument("--unthrottled-replicas", type=int, default=1000)
    parser.add_argument("--kube-api-qps", type=float, default=20.0)
    parser.add_argument("--kube-api-burst", type=int, default=30)
    args = parser.parse_args(argv)
    async with LocalCluster(nodes=0, scheduler=False, kubelets=False, gc=False) as cluster:
        throttled = await _run_once(
            cluster, "bench-throttled", args.replicas, args.kube_api_qps, args.kube_api_burst
        )
        unthrottled = await _run_once(cluster, "bench-free", args.unthrottled_replicas, 0.0, 0)
    rows = [("throttled", throttled), ("unthrottled", unthrottled)]
    print(
        f"{'run':<12} {'replicas':>8} {'qps':>5} {'elapsed s':>9} {'pods/s':>8} {'writes':>7} {'budget':>7} "
        f"{'syncs':>6} {'sync s':>7} {'create ms':>9}"
    )
    for label, r in rows:
        budget = f"{100 * r['budget_used']:.1f}%" if r["budget_used"] is not None else "-"
        print(
            f"{label:<12} {r['replicas']:>8} {r['qps']:>5.0f} {r['elapsed_s']:>9.2f} {r['pods_per_s']:>8.1f} "
            f"{r['writes']:>7} {budget:>7} {r['syncs']:>6} {r['sync_time_s']:>7.2f} {r['mean_create_ms'] or 0:>9.2f}"
        )
    figures = {"throttled": throttled, "unthrottled": unthrottled}
    print(orjson.dumps(figures).decode())
    return figures


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
