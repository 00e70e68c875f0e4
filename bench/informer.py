"""Informer benchmark: cold start, watch throughput, bytes per cached pod, dicts vs models.

    python -m bench.informer [--pods 10000] [--events 20000]

The pods (realistic, ~4.7 KB of JSON each) are served by the fake API server of the informer
tests, run in its own process with its pages pre-serialised, so the figures are the client's:
HTTP, orjson, transform, store, indexes and one handler. Every scenario runs in a fresh
process so peak RSS and tracemalloc figures do not bleed into each other.

Scenarios:
- cold start (default transform, pod projection): LIST to a synced cache and one handler
  having seen every add: seconds, pods/s, peak RSS. The projection decodes with msgspec
  (`informers.rawdecode`, only the kept fields parsed); measured on a loaded 2-core machine,
  before/after at 10,000 pods: 13,367 -> 40,326 pods/s (15,127 -> 54,010 per CPU second),
  peak RSS 105.6 MB after, bytes per pod unchanged (1,488); at 150,000 pods 10,830 -> 22,015
  pods/s (12,940 -> 38,734 per CPU second), 312 MB peak RSS, 1,412 bytes per pod;
- watch: MODIFIED events/s through the reflector, store and one handler;
- bytes per cached pod (tracemalloc, store and indexes included) with no transform, the
  default transform and the pod projection;
- the same LIST decoded into kubernetes_asyncio's generated models instead of dicts.

Prints a table, then as its last line one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from typing import Any

import orjson

Obj = dict[str, Any]


# -- server process -----------------------------------------------------------------------


async def _serve(pods: int, events: int) -> None:
    from aiohttp import web

    from apiclient.resources import PODS
    from tests.informers.fakeserver import FakeApiServer
    from tests.informers.podgen import realistic_pod

    class BenchServer(FakeApiServer):
        async def _get(self, request: web.Request) -> web.StreamResponse:
            if request.path == "/bench/emit":
                self.emit_prepared()
                return web.json_response({"emitted": len(self.prepared)})
            return await super()._get(request)

        def prepare(self, count: int, pods: int) -> None:
            self.prepared: list[bytes] = []
            for n in range(count):
                obj = realistic_pod(n % pods)
                rv = self.rv + 1 + n
                changed = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}
                self.prepared.append(orjson.dumps({"type": "MODIFIED", "object": changed}) + b"\n")

        def preload_lean(self, res: Any, objs: Any) -> None:
            """Keep only the serialised pods (and names): 150,000 full dicts would take GBs."""
            table = self.objects.setdefault(res.path(None), {})
            for obj in objs:
                self.rv += 1
                meta = obj["metadata"]
                meta["resourceVersion"] = str(self.rv)
                table[f"{meta['namespace']}/{meta['name']}"] = (
                    {"metadata": {"namespace": meta["namespace"]}},
                    orjson.dumps(obj),
                )

        def emit_prepared(self) -> None:
            self.rv += len(self.prepared)
            for w in self.watches:
                for line in self.prepared:
                    w.queue.put_nowait(line)

    async with BenchServer() as server:
        for start in range(0, pods, 10_000):
            server.preload_lean(PODS, (realistic_pod(i) for i in range(start, min(pods, start + 10_000))))
        server.prepare(events, pods)
        print(server.url, flush=True)
        await asyncio.Event().wait()


# -- client scenarios -----------------------------------------------------------------------


def _identity(obj: Obj) -> Obj:
    return obj


def _transform(name: str) -> Any:
    from informers import default_transform, pod_projection

    return {"none": _identity, "default": default_transform, "projection": pod_projection}[name]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class _Counter:
    """The handler: counts adds and updates, wakes the benchmark when a target is reached."""

    def __init__(self) -> None:
        self.adds = 0
        self.updates = 0
        self.target = (-1, -1)
        self.reached = asyncio.Event()

    def expect(self, adds: int, updates: int) -> asyncio.Event:
        self.target = (adds, updates)
        self.reached = asyncio.Event()
        self._check()
        return self.reached

    def _check(self) -> None:
        if self.adds >= self.target[0] and self.updates >= self.target[1]:
            self.reached.set()

    def on_add(self, obj: Obj) -> None:
        self.adds += 1
        if self.adds == self.target[0]:
            self._check()

    def on_update(self, old: Obj, new: Obj) -> None:
        self.updates += 1
        if self.updates == self.target[1]:
            self._check()


class _Run:
    """One pods informer with a counting handler, in a task group of its own."""

    def __init__(self, url: str, transform: str) -> None:
        import anyio

        from apiclient.resources import PODS
        from informers import ResourceEventHandler, SharedInformerFactory
        from tests.informers.fakeserver import FakeApiServer

        fake = FakeApiServer()
        fake.url = url
        self.client = fake.client(request_timeout=300)
        # The benchmark owns its process, so it sets the GC policy as the manager does.
        self.factory = SharedInformerFactory(
            self.client, transforms={PODS: _transform(transform)}, gc_freeze=True
        )
        self.counter = _Counter()
        self.informer = self.factory.informer(PODS)
        self.informer.add_event_handler(
            ResourceEventHandler(on_add=self.counter.on_add, on_update=self.counter.on_update)
        )
        self.tg = anyio.create_task_group()

    async def sync(self, pods: int) -> float:
        """Seconds from start until the handler has seen every pod."""
        await self.tg.__aenter__()
        reached = self.counter.expect(pods, 0)
        start, cpu = time.perf_counter(), time.process_time()
        self.factory.start(self.tg)
        await reached.wait()
        self.cpu = time.process_time() - cpu
        return time.perf_counter() - start

    async def stop(self) -> None:
        self.tg.cancel_scope.cancel()
        await self.tg.__aexit__(None, None, None)
        await self.client.close()


async def _cold(url: str, pods: int, transform: str) -> Obj:
    run = _Run(url, transform)
    elapsed = await run.sync(pods)
    await run.stop()
    return {
        "seconds": round(elapsed, 3),
        "pods_per_s": round(pods / elapsed),
        "cpu_seconds": round(run.cpu, 3),
        "pods_per_cpu_s": round(pods / run.cpu),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
    }


async def _memory(url: str, pods: int, transform: str) -> Obj:
    """Bytes the cache holds per pod: traced memory with the cache full minus with it emptied."""
    run = _Run(url, transform)
    tracemalloc.start()
    await run.sync(pods)
    gc.collect()
    full = tracemalloc.get_traced_memory()[0]
    run.informer.store.replace([])
    gc.collect()
    empty = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    await run.stop()
    return {"bytes_per_pod": round((full - empty) / pods)}


async def _watch(url: str, pods: int, events: int) -> Obj:
    import aiohttp

    run = _Run(url, "default")
    await run.sync(pods)
    await asyncio.sleep(0.3)  # let the watch open
    reached = run.counter.expect(pods, events)
    start, cpu = time.perf_counter(), time.process_time()
    async with aiohttp.ClientSession() as session, session.get(f"{url}/bench/emit") as resp:
        await resp.read()
    await reached.wait()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    await run.stop()
    return {
        "events": events,
        "seconds": round(elapsed, 3),
        "events_per_s": round(events / elapsed),
        "events_per_cpu_s": round(events / cpu),
    }


async def _models(url: str, pods: int) -> Obj:
    """The same paginated LIST decoded into kubernetes_asyncio's V1Pod models."""
    from apiclient.resources import PODS
    from tests.informers.fakeserver import FakeApiServer

    fake = FakeApiServer()
    fake.url = url
    client = fake.client(request_timeout=120)
    # the generated client's private model decoder (the public one wants a whole response)
    api_client: Any = client.api_client
    deserialize = api_client._ApiClient__deserialize
    kept: list[Any] = []
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    decode = 0.0
    start = time.perf_counter()
    token: str | None = None
    while True:
        raw = await client.request_raw("GET", PODS.path(None), query={"limit": 500, "continue": token})
        t0 = time.perf_counter()
        page = orjson.loads(raw)
        kept.extend(deserialize(page, "V1PodList").items)
        decode += time.perf_counter() - t0
        token = page["metadata"].get("continue")
        if not token:
            break
    elapsed = time.perf_counter() - start
    # Bytes per model: decode a slice again under tracemalloc (it slows decoding ~3x).
    sample_raw = await client.request_raw("GET", PODS.path(None), query={"limit": 1000})
    sample = orjson.loads(sample_raw)
    del kept
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    models = deserialize(sample, "V1PodList").items
    del sample
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    await client.close()
    return {
        "seconds": round(elapsed, 3),
        "pods_per_s": round(pods / elapsed),
        "decode_us_per_pod": round(decode / pods * 1e6, 1),
        "bytes_per_pod": round(used / len(models)),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
    }


async def _client(args: argparse.Namespace) -> Obj:
    kind, _, variant = args.client.partition(":")
    if kind == "cold":
        return await _cold(args.url, args.pods, variant)
    if kind == "mem":
        return await _memory(args.url, args.pods, variant)
    if kind == "watch":
        return await _watch(args.url, args.pods, args.events)
    if kind == "models":
        return await _models(args.url, args.pods)
    raise SystemExit(f"unknown scenario {args.client}")


# -- orchestration ------------------------------------------------------------------------


def _run_client(scenario: str, url: str, pods: int, events: int) -> Obj:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.informer",
            "--client",
            scenario,
            "--url",
            url,
            "--pods",
            str(pods),
            "--events",
            str(events),
        ],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    last: Obj = orjson.loads(out.stdout.strip().splitlines()[-1])
    return last


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument(
        "--scenarios",
        default="cold:default,cold:projection,watch,mem:none,mem:default,mem:projection,models",
        help="comma-separated; at 150,000 pods use cold:projection,mem:projection (default needs ~2.5 GB)",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.pods, args.events))
        return
    if args.client:
        print(orjson.dumps(asyncio.run(_client(args))).decode(), flush=True)
        return

    results: Obj = {"pods": args.pods, "pod_json_bytes": 0}
    from tests.informers.podgen import realistic_pod

    results["pod_json_bytes"] = len(orjson.dumps(realistic_pod(1)))
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.informer",
            "--serve",
            "--pods",
            str(args.pods),
            "--events",
            str(args.events),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        for scenario in args.scenarios.split(","):
            results[scenario.replace(":", "_")] = _run_client(scenario, url, args.pods, args.events)
    finally:
        server.terminate()
        server.wait()
    _print_table(results)
    print(orjson.dumps(results).decode())


def _print_table(r: Obj) -> None:
    print(f"informer benchmark: {r['pods']} pods of {r['pod_json_bytes']} JSON bytes each")
    print(f"{'scenario':<38}{'seconds':>10}{'pods/s':>12}{'per CPU s':>12}{'peak RSS MB':>14}")
    for key, label in (
        ("cold_default", "cold start, default transform"),
        ("cold_projection", "cold start, pod projection"),
        ("models", "LIST into kubernetes_asyncio models"),
    ):
        if key in r:
            v = r[key]
            print(
                f"{label:<38}{v['seconds']:>10}{v['pods_per_s']:>12}{v.get('pods_per_cpu_s', '-'):>12}{v['peak_rss_mb']:>14}"
            )
    if "watch" in r:
        w = r["watch"]
        print(
            f"{'watch MODIFIED events (events/s)':<38}{w['seconds']:>10}{w['events_per_s']:>12}{w['events_per_cpu_s']:>12}"
        )
    print(f"{'bytes per cached pod':<38}{'none':>10}{'default':>12}{'projection':>14}{'models':>10}")
    models = r.get("models", {}).get("bytes_per_pod", "-")
    mem = {k: r.get(f"mem_{k}", {}).get("bytes_per_pod", "-") for k in ("none", "default", "projection")}
    print(f"{'':<38}{mem['none']:>10}{mem['default']:>12}{mem['projection']:>14}{models:>10}")


if __name__ == "__main__":
    main()
