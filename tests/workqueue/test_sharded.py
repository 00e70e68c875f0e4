"""Sharded queue: FNV-32a routing like the taint manager, priority inside a shard."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from workqueue import ShardedQueue, ShutDown, fnv32a

pytestmark = pytest.mark.looptime

# (kind, node, name): node items sort before pod items inside a shard.
Item = tuple[str, str, str]


def _queue(shards: int = 8) -> ShardedQueue[Item]:
    return ShardedQueue(shards, shard_key=lambda it: it[1], priority=lambda it: 0 if it[0] == "node" else 1)


def test_fnv32a_matches_go_hash_fnv() -> None:
    # Reference values of Go's fnv.New32a().
    assert fnv32a("") == 0x811C9DC5
    assert fnv32a("a") == 0xE40C292C
    assert fnv32a("foobar") == 0xBF9CF968


def test_shard_is_fnv32a_of_the_shard_key_modulo_shards() -> None:
    q = _queue()
    for node in ["node-1", "node-2", "worker-a", "ünïcode"]:
        assert q.shard_for(("pod", node, "p")) == fnv32a(node) % 8
        assert q.shard_for(("node", node, "")) == q.shard_for(("pod", node, "other"))


async def test_node_items_before_pod_items_fifo_otherwise() -> None:
    q = _queue(1)
    q.add(("pod", "n1", "p1"))
    q.add(("pod", "n1", "p2"))
    q.add(("node", "n1", ""))
    q.add(("pod", "n1", "p3"))
    q.add(("node", "n2", ""))
    got = [await q.get(0) for _ in range(5)]
    assert got == [
        ("node", "n1", ""),
        ("node", "n2", ""),
        ("pod", "n1", "p1"),
        ("pod", "n1", "p2"),
        ("pod", "n1", "p3"),
    ]


async def test_each_shard_only_sees_its_own_items_with_queue_semantics() -> None:
    q = _queue(4)
    items = [("pod", f"node-{i}", "p") for i in range(20)]
    for it in items:
        q.add(it)
        q.add(it)
    assert len(q) == 20
    for shard in range(4):
        mine = [it for it in items if q.shard_for(it) == shard]
        first = [await q.get(shard) for _ in range(len(mine))]
        assert first == mine  # FIFO within the shard, nothing from other shards, no duplicates
        for it in first:
            q.add(it)  # added while processing: not handed out again yet
        assert len(q.shard(shard)) == 0
        for it in first:
            q.done(it)
        assert [await q.get(shard) for _ in range(len(mine))] == mine
        for it in mine:
            q.done(it)
    assert len(q) == 0


async def test_rate_limit_and_delay_route_to_the_item_shard() -> None:
    q = _queue()
    it = ("pod", "n", "p")
    shard = q.shard_for(it)
    start = asyncio.get_running_loop().time()
    q.add_after(it, 3)
    assert await q.get(shard) == it
    assert asyncio.get_running_loop().time() - start == pytest.approx(3)
    q.done(it)
    q.add_rate_limited(it)
    q.add_rate_limited(it)
    assert q.num_requeues(it) == 2
    q.forget(it)
    assert q.num_requeues(it) == 0


async def test_one_worker_per_shard_until_shutdown() -> None:
    q = _queue(3)
    handled: list[Item] = []

    async def worker(shard: int) -> None:
        while True:
            try:
                it = await q.get(shard)
            except ShutDown:
                return
            handled.append(it)
            await asyncio.sleep(0.5)
            q.done(it)

    async with anyio.create_task_group() as tg:
        for shard in range(q.shards):
            tg.start_soon(worker, shard)
        for i in range(30):
            q.add(("pod", f"n{i % 7}", f"p{i}"))
        await asyncio.sleep(0.1)
        await q.shutdown_with_drain()
        assert q.shutting_down
    assert len(handled) == 30
