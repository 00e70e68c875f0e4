"""Many producers and workers on one queue, ported from client-go's `util/workqueue/queue_test.go`."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Awaitable, Callable

import anyio
import pytest

from workqueue import Queue, ShutDown

pytestmark = pytest.mark.looptime

Shutdown = Callable[[Queue[object]], Awaitable[None]]


async def plain_shutdown(q: Queue[object]) -> None:
    q.shutdown()


async def drain_shutdown(q: Queue[object]) -> None:
    await q.shutdown_with_drain()


SHUTDOWNS = pytest.mark.parametrize("shut", [plain_shutdown, drain_shutdown], ids=["shutdown", "drain"])


@SHUTDOWNS
async def test_basic(shut: Shutdown) -> None:  # TestBasic
    q: Queue[object] = Queue()
    late: list[object] = []

    async def producer(i: int) -> None:
        for _ in range(50):
            q.add(i)
            await asyncio.sleep(0.001)

    async def consumer() -> None:
        while True:
            try:
                item = await q.get()
            except ShutDown:
                return
            if item == "added after shutdown!":
                late.append(item)
            await asyncio.sleep(0.003)
            q.done(item)

    async with anyio.create_task_group() as consumers:
        for _ in range(10):
            consumers.start_soon(consumer)
        async with anyio.create_task_group() as producers:
            for i in range(50):
                producers.start_soon(producer, i)
        await shut(q)
        q.add("added after shutdown!")
    assert late == []
    assert len(q) == 0


@SHUTDOWNS
async def test_add_while_processing(shut: Shutdown) -> None:  # TestAddWhileProcessing
    q: Queue[object] = Queue()
    got: list[object] = []

    async def consumer() -> None:
        counters: dict[object, int] = {}  # every worker re-adds every item up to two times
        while True:
            try:
                item = await q.get()
            except ShutDown:
                return
            got.append(item)
            counters[item] = counters.get(item, 0) + 1
            if counters[item] < 2:
                q.add(item)
            await asyncio.sleep(0)
            q.done(item)

    async with anyio.create_task_group() as consumers:
        for _ in range(10):
            consumers.start_soon(consumer)
        for i in range(50):
            q.add(i)
        await asyncio.sleep(1)
        await shut(q)
    assert len(q) == 0
    assert set(got) == set(range(50))


async def test_len() -> None:  # TestLen
    q: Queue[str] = Queue()
    q.add("foo")
    assert len(q) == 1
    q.add("bar")
    assert len(q) == 2
    q.add("foo")  # should not increase the queue length
    assert len(q) == 2


async def test_reinsert() -> None:  # TestReinsert
    q: Queue[str] = Queue()
    q.add("foo")
    item = await q.get()
    assert item == "foo"
    q.add(item)  # added back while processing
    q.done(item)
    item = await q.get()  # it is back on the queue
    assert item == "foo"
    q.done(item)
    assert len(q) == 0


async def test_collapse() -> None:  # TestCollapse (its Touch hook aside: the queue has none)
    q: Queue[str] = Queue()
    q.add("bar")
    q.add("bar")
    item = await q.get()
    assert item == "bar"
    q.done(item)
    assert len(q) == 0


async def test_collapse_while_processing() -> None:  # TestCollapseWhileProcessing
    q: Queue[str] = Queue()
    q.add("foo")
    item = await q.get()
    assert item == "foo"
    q.add("foo")
    q.add("foo")
    second: list[str] = []

    async def other_worker() -> None:
        got = await q.get()
        second.append(got)
        q.done(got)

    async with anyio.create_task_group() as tg:
        tg.start_soon(other_worker)
        await asyncio.sleep(0.1)
        assert second == []  # blocked until the first worker is done
        q.done("foo")
    assert second == ["foo"]
    assert len(q) == 0


class Big:
    def __init__(self) -> None:
        self.data = b"hello"


async def test_garbage_collection() -> None:  # TestGarbageCollection
    q: Queue[Big] = Queue()
    item = Big()
    ref = weakref.ref(item)
    q.add(item)
    got = await q.get()
    q.done(got)
    del item, got
    gc.collect()
    assert ref() is None  # the queue keeps nothing once an item is done
