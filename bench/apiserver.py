"""Local API server throughput and memory: pod creates per second over HTTP with watchers attached.

    python -m bench.apiserver                      # 20,000 pods, 64 concurrent creates, 10 watchers
    python -m bench.apiserver --pods 150000        # the full-size memory figure
    python -m bench.apiserver --server-process     # server in a child process (client cost apart)
    python -m bench.apiserver --server-process --profile /tmp/server.prof   # cProfile the server

One aiohttp client session creates pods concurrently (raw JSON, as the product's KubeClient
sends it); 10 watchers of all pods stream events over HTTP at the same time and must end up
having seen every create. In-process, memory is the process RSS growth while holding the pods
(server, client and watchers share the process and its CPU, so both figures are pessimistic for
the server). With `--server-process` the server runs alone in a child process: creates/s then
measures the server, not the client's share of the CPU, and RSS is the server's own.
Watcher lag is how long after the last create returned the slowest watcher saw its last event.
The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import resource
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson

from localcluster.cluster import LocalCluster


def _cpu_s() -> float:
    """User + system CPU seconds of this process (the figure load from other processes disturbs least)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": "10m"}},
                    }
                ]
            },
        }
    )


async def _watcher(
    session: aiohttp.ClientSession,
    url: str,
    rv: int,
    want: int,
    seen: list[int],
    ready: asyncio.Event,
    progress: list[tuple[float, int]],
) -> None:
    """Count ADDED events; `progress` gets (time, count so far) per chunk read, for the lag."""
    count = 0
    async with session.get(
        f"{url}/api/v1/pods",
        params={"watch": "true", "resourceVersion": str(rv)},
        timeout=aiohttp.ClientTimeout(total=None),
    ) as resp:
        ready.set()
        buffer = b""
        async for chunk in resp.content.iter_any():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            count += sum(1 for line in lines if line.startswith(b'{"type":"ADDED"'))
            progress.append((time.perf_counter(), count))
            if count >= want:
                break
    seen.append(count)


async def _creator(
    session: aiohttp.ClientSession,
    url: str,
    queue: asyncio.Queue[int],
    errors: list[int],
    done_at: list[float],
) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    while True:
        try:
            i = queue.get_nowait()
        except asyncio.QueueEmpty:
            return
        async with session.post(
            f"{url}/api/v1/namespaces/default/pods", data=_pod(i), headers=headers
        ) as resp:
            await resp.read()
            if resp.status != 201:
                errors.append(resp.status)
            else:
                done_at.append(time.perf_counter())


def _lags_ms(done_at: list[float], progress: list[tuple[float, int]]) -> list[float]:
    """For each chunk a watcher read: how long after the create of its newest event returned
    (the n-th ADDED a watcher sees is the n-th create to complete, give or take the few in flight:
    events are in RV order and a create returns right after its RV is taken). Negative is 0."""
    return [max(0.0, (t - done_at[n - 1]) * 1000) for t, n in progress if 0 < n <= len(done_at)]


@contextlib.asynccontextmanager
async def _in_process() -> AsyncIterator[tuple[str, Any]]:
    """The server on this loop; yields its URL and an `rss()` coroutine (this process's RSS)."""
    async with LocalCluster(nodes=0, scheduler=False, kubelets=False, gc=False) as cluster:

        async def stats() -> tuple[float, float]:
            cpu = _cpu_s()
            gc.collect()
            return _rss_mib(), cpu

        yield cluster.url, stats


@contextlib.asynccontextmanager
async def _child_process(profile: str | None) -> AsyncIterator[tuple[str, Any]]:
    """The server alone in a child process (`--serve`): it prints its URL, answers `stats` on stdin
    with its RSS growth in MiB and CPU seconds, and exits on EOF (writing the profile first when asked)."""
    argv = [sys.executable, "-m", "bench.apiserver", "--serve"]
    if profile:
        argv += ["--profile", profile]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    try:
        url = (await stdout.readline()).decode().strip()

        async def stats() -> tuple[float, float]:
            stdin.write(b"stats\n")
            await stdin.drain()
            rss, cpu = (await stdout.readline()).split()
            return float(rss), float(cpu)

        yield url, stats
    finally:
        stdin.close()
        await proc.wait()


async def _serve(profile: str | None) -> None:
    """Child side of `--server-process`."""
    gc.collect()
    base = _rss_mib()
    profiler = cProfile.Profile() if profile else None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with LocalCluster(nodes=0, scheduler=False, kubelets=False, gc=False) as cluster:
        print(cluster.url, flush=True)
        if profiler is not None:
            profiler.enable()
        while line := await reader.readline():
            if line.strip() == b"stats":
                cpu = _cpu_s()
                gc.collect()
                print(_rss_mib() - base, cpu, flush=True)
        if profiler is not None and profile:
            profiler.disable()
            profiler.dump_stats(profile)


async def run(
    pods: int, concurrency: int, watchers: int, *, server_process: bool = False, profile: str | None = None
) -> dict[str, Any]:
    gc.collect()
    base_rss = _rss_mib()
    server = _child_process(profile) if server_process else _in_process()
    async with server as (url, stats):
        if server_process:
            base_rss = 0.0  # the child reports growth since it started, before the cluster
        connector = aiohttp.TCPConnector(limit=concurrency + watchers + 4)
        async with aiohttp.ClientSession(connector=connector) as session:
            seen: list[int] = []
            async with session.get(f"{url}/api/v1/pods", params={"limit": "1"}) as resp:
                start_rv = int(orjson.loads(await resp.read())["metadata"]["resourceVersion"])
            readies = [asyncio.Event() for _ in range(watchers)]
            progress: list[list[tuple[float, int]]] = [[] for _ in range(watchers)]
            watch_tasks = [
                asyncio.create_task(_watcher(session, url, start_rv, pods, seen, r, progress[w]))
                for w, r in enumerate(readies)
            ]
            for r in readies:
                await r.wait()
            queue: asyncio.Queue[int] = asyncio.Queue()
            for i in range(pods):
                queue.put_nowait(i)
            errors: list[int] = []
            done_at: list[float] = []
            t0 = time.perf_counter()
            _, cpu0 = await stats()
            await asyncio.gather(
                *(_creator(session, url, queue, errors, done_at) for _ in range(concurrency))
            )
            create_s = time.perf_counter() - t0
            await asyncio.wait_for(asyncio.gather(*watch_tasks), timeout=600)
            caught_up_s = time.perf_counter() - t0
            rss, cpu1 = await stats()
            lags = sorted(lag for w in progress for lag in _lags_ms(done_at, w))
            pages = []
            for _ in range(5):
                t1 = time.perf_counter()
                async with session.get(f"{url}/api/v1/pods", params={"limit": "500"}) as resp:
                    page = orjson.loads(await resp.read())
                pages.append((time.perf_counter() - t1) * 1000)
            remaining = page["metadata"].get("remainingItemCount")
            t1 = time.perf_counter()
            async with session.get(f"{url}/api/v1/pods") as resp:
                full = await resp.read()
            list_all_s = time.perf_counter() - t1
    return {
        "pods": pods,
        "concurrency": concurrency,
        "watchers": watchers,
        "server_process": server_process,
        "creates_per_s": round(pods / create_s, 1),
        "create_errors": len(errors),
        # CPU of the server process (of the whole process in-process) from the first create until
        # every watcher caught up, per pod: creates plus the fan-out to the watchers
        "cpu_us_per_pod": round((cpu1 - cpu0) * 1e6 / pods, 1),
        "watchers_caught_up_s": round(caught_up_s, 2),
        "watcher_lag_after_last_create_s": round(caught_up_s - create_s, 2),
        "watcher_lag_p50_ms": round(lags[len(lags) // 2], 1) if lags else None,
        "watcher_lag_p99_ms": round(lags[int(len(lags) * 0.99)], 1) if lags else None,
        "watcher_lag_max_ms": round(lags[-1], 1) if lags else None,
        "watchers_saw_all": all(n >= pods for n in seen) and len(seen) == watchers,
        "rss_growth_mib": round(rss - base_rss, 1),
        "kib_per_pod": round((rss - base_rss) * 1024 / pods, 2),
        "list_page_500_ms": round(min(pages), 1),
        "list_page_500_remaining": remaining,
        "list_all_s": round(list_all_s, 2),
        "list_all_mib": round(len(full) / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--watchers", type=int, default=10)
    parser.add_argument("--server-process", action="store_true", help="run the server in a child process")
    parser.add_argument(
        "--profile", metavar="PATH", help="with --server-process: cProfile the server into PATH"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.profile))
        return
    result = asyncio.run(
        run(
            args.pods,
            args.concurrency,
            args.watchers,
            server_process=args.server_process,
            profile=args.profile,
        )
    )
    width = max(len(k) for k in result)
    print("local API server benchmark")
    for key, value in result.items():
        print(f"  {key:<{width}}  {value}")
    print(orjson.dumps(result).decode())


if __name__ == "__main__":
    main()
