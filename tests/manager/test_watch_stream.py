"""A watch stream as the API server writes it: one JSON document per line, split into HTTP chunks
wherever the network splits them, and objects as large as etcd stores."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
import orjson
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from apiclient import KubeClient
from apiclient.resources import CONFIGMAPS


def _event(name: str, rv: int, data: str = "") -> bytes:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)},
        "data": {"blob": data},
    }
    return orjson.dumps({"type": "ADDED", "object": obj})


@asynccontextmanager
async def _streaming_server(chunks: Sequence[bytes], gap: float = 0.01) -> AsyncIterator[KubeClient]:
    """A server answering any WATCH with `chunks`, each written on its own `gap` seconds after
    the one before (so each reaches the client as its own HTTP chunk), then ending the response."""

    async def watch(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for chunk in chunks:
            await resp.write(chunk)
            await anyio.sleep(gap)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/configmaps", watch)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    config = k8s_client.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    kube = KubeClient(k8s_client.ApiClient(configuration=config), qps=1000, burst=1000)
    try:
        yield kube
    finally:
        await kube.close()
        await runner.cleanup()


async def _names(chunks: Sequence[bytes]) -> list[tuple[str, int]]:
    async with _streaming_server(chunks) as kube:
        async with kube.watch(CONFIGMAPS, resource_version="0") as events:
            return [(e.object["metadata"]["name"], len(e.object["data"]["blob"])) async for e in events]


async def test_events_are_whole_wherever_the_stream_is_split() -> None:
    a, b, c, d = (_event(n, i) for i, n in enumerate("abcd"))
    chunks = [
        a[:10],  # one event over three chunks
        a[10:40],
        a[40:] + b"\n" + b + b"\n" + c[:5],  # the end of one, a whole one and the start of the next
        c[5:] + b"\n",
        b"\n",  # an empty line is not an event
        d,  # the last event, its newline never sent
    ]
    assert await _names(chunks) == [("a", 0), ("b", 0), ("c", 0), ("d", 0)]


async def test_an_object_as_large_as_etcd_allows_arrives() -> None:
    """A 1.4 MiB ConfigMap, in 16 KiB pieces, is one event."""
    big = _event("big", 1, "x" * 1_400_000)
    chunks = [big[i : i + 16_384] for i in range(0, len(big), 16_384)] + [b"\n", _event("after", 2) + b"\n"]
    assert await _names(chunks) == [("big", 1_400_000), ("after", 0)]


async def test_a_read_interval_takes_what_arrived_meanwhile_in_one_read() -> None:
    """Node lifecycle's Lease watch: events 2 ms apart, read every 100 ms, arrive in order and
    in a handful of batches (one read each), where each would otherwise wake the reader."""
    chunks = [_event(f"lease-{i:03d}", i) + b"\n" for i in range(150)]
    async with _streaming_server(chunks, gap=0.002) as kube:
        async with kube.watch(CONFIGMAPS, resource_version="0", read_interval=0.1) as events:
            seen: list[tuple[str, float]] = [
                (e.object["metadata"]["name"], anyio.current_time()) async for e in events
            ]
    assert [name for name, _ in seen] == [f"lease-{i:03d}" for i in range(150)]
    # events taken in one read are handed over back to back, with no wait between them
    batches = 1 + sum(1 for (_, a), (_, b) in itertools.pairwise(seen) if b - a > 0.001)
    assert 2 <= batches <= 20, batches


async def test_a_watch_held_between_reads_closes_when_cancelled() -> None:
    chunks = [_event(f"e{i}", i) + b"\n" for i in range(3)]
    async with _streaming_server(chunks, gap=0.001) as kube:
        names: list[str] = []
        with anyio.move_on_after(0.3):
            async with kube.watch(CONFIGMAPS, resource_version="0", read_interval=30) as events:
                async for e in events:
                    names.append(e.object["metadata"]["name"])
        assert names  # the first read's events came through; then it waited, and was cancelled


async def test_a_long_read_lets_the_loop_run_between_slices() -> None:
    """Thousands of events taken in one read (the loop was busy while they came) are handed
    over in slices, with the other tasks running in between."""
    import anyio.lowlevel

    body = b"".join(_event(f"e{i}", i) + b"\n" for i in range(2_000))
    ticks: list[int] = []
    async with _streaming_server([body]) as kube:
        async with anyio.create_task_group() as tg:

            async def ticker() -> None:
                while True:
                    ticks.append(1)
                    await anyio.lowlevel.checkpoint()

            tg.start_soon(ticker)
            async with kube.watch(CONFIGMAPS, resource_version="0", read_interval=0.2) as events:
                count, ticked = 0, set()
                async for _ in events:
                    count += 1
                    ticked.add(len(ticks))
            tg.cancel_scope.cancel()
    assert count == 2_000
    assert len(ticked) >= 10  # the ticker ran between slices of 200
