"""Local API server throughput and memory: pod creates per second over HTTP with watchers attached.

    python -m bench.apiserver                      # 20,000 pods, 64 concurrent creates, 10 watchers
    python -m bench.apiserver --pods 150000        # the full-size memory figure

One aiohttp client session creates pods concurrently (raw JSON, as the product's KubeClient
sends it); 10 watchers of all pods stream events over HTTP at the same time and must end up
having seen every create. Memory is the process RSS growth while holding the pods (server,
client and watchers share the process, so the figure is an upper bound for the server).
The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import time
from typing import Any

import aiohttp
import orjson

from localcluster.cluster import LocalCluster


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _pod(i: int) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"pod-{i:07d}", "labels": {"app": f"app-{i % 50}", "bench": "true"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9", "resources": {"requests": {"cpu": "10m"}}}]},
        }
    )


async def _watcher(session: aiohttp.ClientSession, url: str, rv: int, want: int, seen: list[int], ready: asyncio.Event) -> None:
    count = 0
    async with session.get(f"{url}/api/v1/pods", params={"watch": "true", "resourceVersion": str(rv)}, timeout=aiohttp.ClientTimeout(total=None)) as resp:
        ready.set()
        buffer = b""
        async for chunk in resp.content.iter_any():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            count += sum(1 for line in lines if line.startswith(b'{"type":"ADDED"'))
            if count >= want:
                break
    seen.append(count)


async def _creator(session: aiohttp.ClientSession, url: str, queue: asyncio.Queue[int], errors: list[int]) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    while True:
        try:
            i = queue.get_nowait()
        except asyncio.QueueEmpty:
            return
        async with session.post(f"{url}/api/v1/namespaces/default/pods", data=_pod(i), headers=headers) as resp:
            await resp.read()
            if resp.status != 201:
                errors.append(resp.status)


async def run(pods: int, concurrency: int, watchers: int) -> dict[str, Any]:
    gc.collect()
    base_rss = _rss_mib()
    async with LocalCluster(nodes=0, scheduler=False, kubelets=False, gc=False) as cluster:
        connector = aiohttp.TCPConnector(limit=concurrency + watchers + 4)
        async with aiohttp.ClientSession(connector=connector) as session:
            seen: list[int] = []
            start_rv = cluster.storage.rv
            readies = [asyncio.Event() for _ in range(watchers)]
            watch_tasks = [asyncio.create_task(_watcher(session, cluster.url, start_rv, pods, seen, r)) for r in readies]
            for r in readies:
                await r.wait()
            queue: asyncio.Queue[int] = asyncio.Queue()
            for i in range(pods):
                queue.put_nowait(i)
            errors: list[int] = []
            t0 = time.perf_counter()
            await asyncio.gather(*(_creator(session, cluster.url, queue, errors) for _ in range(concurrency)))
            create_s = time.perf_counter() - t0
            await asyncio.wait_for(asyncio.gather(*watch_tasks), timeout=600)
            caught_up_s = time.perf_counter() - t0
            gc.collect()
            rss = _rss_mib()
            t1 = time.perf_counter()
            async with session.get(f"{cluster.url}/api/v1/pods", params={"limit": "500"}) as resp:
                await resp.read()
            page_ms = (time.perf_counter() - t1) * 1000
            t1 = time.perf_counter()
            async with session.get(f"{cluster.url}/api/v1/pods") as resp:
                full = await resp.read()
            list_all_s = time.perf_counter() - t1
    return {
        "pods": pods,
        "concurrency": concurrency,
        "watchers": watchers,
        "creates_per_s": round(pods / create_s, 1),
        "create_errors": len(errors),
        "watchers_caught_up_s": round(caught_up_s, 2),
        "watchers_saw_all": all(n >= pods for n in seen) and len(seen) == watchers,
        "rss_growth_mib": round(rss - base_rss, 1),
        "kib_per_pod": round((rss - base_rss) * 1024 / pods, 2),
        "list_page_500_ms": round(page_ms, 1),
        "list_all_s": round(list_all_s, 2),
        "list_all_mib": round(len(full) / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--watchers", type=int, default=10)
    args = parser.parse_args()
    result = asyncio.run(run(args.pods, args.concurrency, args.watchers))
    width = max(len(k) for k in result)
    print("local API server benchmark")
    for key, value in result.items():
        print(f"  {key:<{width}}  {value}")
    print(orjson.dumps(result).decode())


if __name__ == "__main__":
    main()
