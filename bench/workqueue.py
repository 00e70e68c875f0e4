"""Work queue throughput: add -> get -> done cycles per second on one event loop.

Rows: the plain queue, the rate-limiting queue (with a `forget` per cycle, as a controller's
worker does after a successful sync) and the 8-shard queue (shard key hashed with FNV-32a,
node/pod priority), each with 1, 10,000 and 100,000 distinct keys held in the queue; then the
timed queue with 150,000 scheduled items (schedule, cancel half, fire the rest). Finally a
cProfile of the plain queue shows where a cycle's time goes.

Run: `python -m bench.workqueue [--cycles N]`. The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import pstats
import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

from workqueue import Queue, RateLimitingQueue, ShardedQueue, TimedWorkerQueue

KEY_COUNTS = (1, 10_000, 100_000)


def _keys(n: int) -> list[str]:
    return [f"node-{i % 500}/pod-{i}" for i in range(n)]


async def plain_cycles(keys: list[str], cycles: int) -> float:
    q: Queue[str] = Queue()
    for k in keys:
        q.add(k)
    get, done, add = q.get, q.done, q.add
    start = time.perf_counter()
    for _ in range(cycles):
        item = await get()
        done(item)
        add(item)
    return cycles / (time.perf_counter() - start)


async def rate_limited_cycles(keys: list[str], cycles: int) -> float:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    for k in keys:
        q.add(k)
    get, done, add, forget = q.get, q.done, q.add, q.forget
    start = time.perf_counter()
    for _ in range(cycles):
        item = await get()
        forget(item)
        done(item)
        add(item)
    return cycles / (time.perf_counter() - start)


async def sharded_cycles(keys: list[str], cycles: int) -> float:
    q: ShardedQueue[str] = ShardedQueue(
        8, shard_key=lambda k: k.partition("/")[0], priority=lambda k: 0 if "/" not in k else 1
    )
    for k in keys:
        q.add(k)
    nonempty = [s for s in range(q.shards) if len(q.shard(s))]
    get, done, add = q.get, q.done, q.add
    start = time.perf_counter()
    for i in range(cycles):
        item = await get(nonempty[i % len(nonempty)])
        done(item)
        add(item)
    return cycles / (time.perf_counter() - start)


async def waking_cycles(cycles: int) -> float:
    """Two tasks hand one key back and forth through two queues, so every `get` suspends and is woken."""
    ping: Queue[str] = Queue()
    pong: Queue[str] = Queue()

    async def relay(src: Queue[str], dst: Queue[str], n: int) -> None:
        for _ in range(n):
            item = await src.get()
            src.done(item)
            dst.add(item)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(relay, ping, pong, cycles // 2)
        tg.start_soon(relay, pong, ping, cycles // 2)
        ping.add("k")
    return (cycles // 2 * 2) / (time.perf_counter() - start)


async def timed_queue(items: int) -> dict[str, float]:
    fired = 0
    all_fired = asyncio.Event()

    async def handler(key: str) -> None:
        nonlocal fired
        fired += 1
        if fired == items // 2:
            all_fired.set()

    q: TimedWorkerQueue[str] = TimedWorkerQueue(handler, name="")
    loop = asyncio.get_running_loop()
    keys = [f"ns/pod-{i}" for i in range(items)]
    async with anyio.create_task_group() as tg:
        tg.start_soon(q.run)
        await asyncio.sleep(0)
        tasks_before = len(asyncio.all_tasks())
        now = loop.time()
        start = time.perf_counter()
        for k in keys:
            q.add_work(k, created_at=now, fire_at=now + 0.5)
        add_s = time.perf_counter() - start
        tasks_scheduled = len(asyncio.all_tasks()) - tasks_before
        start = time.perf_counter()
        for k in keys[::2]:
            q.cancel_work(k)
        cancel_s = time.perf_counter() - start
        await asyncio.sleep(max(0.0, now + 0.5 - loop.time()))
        start = time.perf_counter()
        await all_fired.wait()
        fire_s = time.perf_counter() - start
        tg.cancel_scope.cancel()
    return {
        "add_work_per_s": items / add_s,
        "cancel_work_per_s": (items // 2) / cancel_s,
        "fired_per_s": (items // 2) / fire_s,
        "extra_tasks_while_scheduled": float(tasks_scheduled),
    }


def where_time_goes(
    fn: Callable[[list[str], int], Coroutine[Any, Any, float]], cycles: int
) -> list[tuple[str, float]]:
    """cProfile `fn` with 10,000 keys; the share of total time spent in each function itself."""
    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(fn(_keys(10_000), cycles))
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    rows = sorted(
        ((f"{fn[2]} ({fn[0].rsplit('/', 1)[-1]}:{fn[1]})", v[2] / total) for fn, v in raw.items()),
        key=lambda r: -r[1],
    )
    return rows[:8]


def run_case(fn: Callable[[list[str], int], Coroutine[Any, Any, float]], n: int, cycles: int) -> float:
    keys = _keys(n)
    gc.collect()
    return asyncio.run(fn(keys, cycles))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cycles", type=int, default=200_000)
    parser.add_argument("--timed-items", type=int, default=150_000)
    args = parser.parse_args()

    figures: dict[str, Any] = {}
    print(f"{'queue':<14}{'keys':>9}{'cycles/s':>14}{'µs/cycle':>11}")
    for label, fn in (
        ("plain", plain_cycles),
        ("rate-limited", rate_limited_cycles),
        ("sharded x8", sharded_cycles),
    ):
        for n in KEY_COUNTS:
            rate = run_case(fn, n, args.cycles)
            figures[f"{label.split()[0].replace('-', '_')}_{n}_keys_cycles_per_s"] = round(rate)
            print(f"{label:<14}{n:>9,}{rate:>14,.0f}{1e6 / rate:>11.2f}")

    rate = asyncio.run(waking_cycles(args.cycles))
    figures["plain_waking_cycles_per_s"] = round(rate)
    print(f"{'plain, waking':<14}{1:>9,}{rate:>14,.0f}{1e6 / rate:>11.2f}   (get suspends, add wakes it)")

    timed = asyncio.run(timed_queue(args.timed_items))
    print(f"\ntimed queue, {args.timed_items:,} items (half cancelled, half fired):")
    for key, value in timed.items():
        print(f"  {key:<30}{value:>14,.0f}")
        figures[f"timed_{key}"] = round(value)

    for label, fn in (("plain", plain_cycles), ("sharded x8", sharded_cycles)):
        print(f"\nwhere a {label} cycle's time goes (cProfile self time, 10,000 keys):")
        for name, share in where_time_goes(fn, min(args.cycles, 100_000)):
            print(f"  {share:>6.1%}  {name}")

    print(json.dumps(figures))


if __name__ == "__main__":
    main()
