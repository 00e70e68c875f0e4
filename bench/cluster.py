"""Benchmark: how many simulated nodes and pods the local cluster sustains on this machine.

Heartbeats run at the real intervals (speed 1: node Lease renewed every 10 s, status every
5 min); pods are owned by ReplicaSets (so the garbage collector tracks them), created
in-process, bound by the scheduler and started by the kubelets. Then, for `--measure` seconds,
it records how late lease renewals run (the figure that says the cluster keeps up: a node
whose lease is 40 s stale is declared dead by the node lifecycle controller) and how long an
HTTP GET and a one-page LIST take meanwhile, and reports the process RSS.

Prints a readable table, then, as its LAST line, one JSON object with the figures.

    python -m bench.cluster [--nodes 500] [--pods 15000] [--measure 25]
    python -m bench.cluster --nodes 5000 --pods 150000 --measure 30     # the issue's target
"""

from __future__ import annotations

import argparse
import gc
import math
import resource
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import orjson

from apiclient.resources import NODES, PODS
from localcluster.cluster import LocalCluster

NS = "default"
PODS_PER_RS = 100


def rss_mib() -> tuple[float, float]:
    """(current, peak) resident set size in MiB."""
    current = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            current = int(line.split()[1]) / 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return current, peak


def _count_phase(cluster: LocalCluster) -> tuple[int, int]:
    bound = running = 0
    for entry in cluster.storage.iter_entries("pods", NS):
        if entry.fields.get("spec.nodeName"):
            bound += 1
        if entry.fields.get("status.phase") == "Running":
            running += 1
    return bound, running


async def _create_pods(cluster: LocalCluster, total: int) -> None:
    rs_rt = cluster.registry.get("apps", "v1", "replicasets")
    pod_rt = cluster.registry.get("", "v1", "pods")
    assert rs_rt is not None and pod_rt is not None
    created = 0
    for r in range(math.ceil(total / PODS_PER_RS)):
        labels = {"app": f"rs-{r}"}
        spec = {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ]
        }
        count = min(PODS_PER_RS, total - created)
        rs = cluster.objects.create(
            rs_rt,
            NS,
            {
                "metadata": {"name": f"rs-{r}"},
                "spec": {
                    "replicas": count,
                    "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": spec},
                },
            },
        ).load()
        owner = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"rs-{r}",
                "uid": rs["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        for i in range(count):
            cluster.objects.create(
                pod_rt,
                NS,
                {
                    "metadata": {"name": f"rs-{r}-{i}", "labels": labels, "ownerReferences": owner},
                    "spec": spec,
                },
            )
        created += count
        await anyio.lowlevel.checkpoint()  # let the scheduler, kubelets and GC keep up


async def bench(nodes: int, pods: int, measure: float, freeze: bool) -> dict[str, Any]:
    figures: dict[str, Any] = {"nodes": nodes, "pods": pods, "measure_s": measure, "gc_freeze": freeze}
    t0 = time.perf_counter()
    async with LocalCluster(
        nodes=nodes, pod_events=False
    ) as cluster:  # pods created in bulk: no per-pod Events
        figures["register_nodes_s"] = round(time.perf_counter() - t0, 2)
        t1 = time.perf_counter()
        await _create_pods(cluster, pods)
        figures["create_pods_s"] = round(time.perf_counter() - t1, 2)
        while True:
            _, running = _count_phase(cluster)
            if running >= pods:
                break
            await anyio.sleep(0.5)
        figures["all_running_s"] = round(time.perf_counter() - t1, 2)
        figures["pods_per_s"] = round(pods / max(figures["all_running_s"], 1e-9), 1)
        if freeze:
            gc.freeze()  # long-lived objects out of the cyclic collector's generations
        kubelets = cluster.kubelets
        kubelets.lag.reset()
        renewals = kubelets.renewals
        kube = await cluster.client()
        get_ms: list[float] = []
        list_ms: list[float] = []
        try:
            end = time.perf_counter() + measure
            while time.perf_counter() < end:
                s = time.perf_counter()
                await kube.get(NODES, f"node-{1 + len(get_ms) % nodes}")
                get_ms.append((time.perf_counter() - s) * 1000)
                s = time.perf_counter()
                await kube.list(PODS, namespace=NS, limit=500)
                list_ms.append((time.perf_counter() - s) * 1000)
                await anyio.sleep(0.5)
        finally:
            await kube.close()
        lag = kubelets.lag
        figures["lease_renewals_per_s"] = round((kubelets.renewals - renewals) / measure, 1)
        figures["expected_renewals_per_s"] = round(nodes / kubelets.config.lease_renew_interval, 1)
        figures["heartbeat_lag_p50_ms"] = round(lag.percentile(0.5) * 1000, 1)
        figures["heartbeat_lag_p99_ms"] = round(lag.percentile(0.99) * 1000, 1)
        figures["heartbeat_lag_max_ms"] = round(lag.max * 1000, 1)
        figures["http_get_p50_ms"] = round(sorted(get_ms)[len(get_ms) // 2], 1) if get_ms else None
        figures["http_list500_p50_ms"] = round(sorted(list_ms)[len(list_ms) // 2], 1) if list_ms else None
        figures["rss_mib"], figures["peak_rss_mib"] = (round(x) for x in rss_mib())
        figures["sustained"] = (
            lag.max < 10.0 and figures["lease_renewals_per_s"] >= 0.9 * figures["expected_renewals_per_s"]
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=15_000)
    parser.add_argument(
        "--measure", type=float, default=25.0, help="seconds of heartbeat measurement (> 10 s lease interval)"
    )
    parser.add_argument(
        "--no-gc-freeze", action="store_true", help="leave the cyclic GC scanning the whole cluster state"
    )
    args = parser.parse_args()
    f = anyio.run(bench, args.nodes, args.pods, args.measure, not args.no_gc_freeze)
    rows = [
        ("nodes / pods", f"{f['nodes']} / {f['pods']}"),
        ("register nodes", f"{f['register_nodes_s']} s"),
        ("create pods (in-process)", f"{f['create_pods_s']} s"),
        ("all pods Running", f"{f['all_running_s']} s ({f['pods_per_s']} pods/s created+bound+started)"),
        ("lease renewals", f"{f['lease_renewals_per_s']}/s (expected {f['expected_renewals_per_s']}/s)"),
        (
            "heartbeat lag p50 / p99 / max",
            f"{f['heartbeat_lag_p50_ms']} / {f['heartbeat_lag_p99_ms']} / {f['heartbeat_lag_max_ms']} ms",
        ),
        ("HTTP GET node p50", f"{f['http_get_p50_ms']} ms"),
        ("HTTP LIST 500 pods p50", f"{f['http_list500_p50_ms']} ms"),
        ("RSS (peak)", f"{f['rss_mib']} MiB ({f['peak_rss_mib']} MiB)"),
        ("sustained", "yes" if f["sustained"] else "NO"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print(orjson.dumps(f).decode())


if __name__ == "__main__":
    main()
