"""Worker engine overhead: reconciles per second through `controllers.worker.Worker` on one loop.

A reconcile that returns at once, so the figure is the engine's own cost per item: get, the
structlog context, the reconcile metrics, the policy, the yield to the loop, done. Rows: success
on a rate-limiting queue with 1 and 8 workers, success on an 8-shard queue, and an error path
(each item fails once, is requeued rate-limited, then succeeds). A bare get/forget/done loop on
the same queue is the baseline.

Run: `python -m bench.worker [--items N]`. The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import time
from typing import Any

import anyio
import structlog

from apiclient import ApiError
from controllers.worker import Worker
from workqueue import ItemExponentialFailureRateLimiter, RateLimitingQueue, ShardedQueue, ShutDown


def _keys(n: int) -> list[str]:
    return [f"ns/obj-{i}" for i in range(n)]


async def bare(items: int) -> float:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    for k in _keys(items):
        q.add(k)
    q.shutdown()
    start = time.perf_counter()
    while True:
        try:
            item = await q.get()
        except ShutDown:
            break
        q.forget(item)
        q.done(item)
        await anyio.lowlevel.checkpoint()
    return items / (time.perf_counter() - start)


class Counting:
    """A reconcile that returns at once (after failing once per key if asked) and says when all are done."""

    def __init__(self, items: int, *, fail_first: bool = False) -> None:
        self.left = items
        self.fail_first = fail_first
        self.failed: set[str] = set()
        self.all_done = anyio.Event()
        self.error = ApiError(500)

    async def __call__(self, key: str) -> None:
        if self.fail_first and key not in self.failed:
            self.failed.add(key)
            raise self.error
        self.left -= 1
        if not self.left:
            self.all_done.set()


async def engine(items: int, workers: int, *, fail_first: bool = False) -> float:
    reconcile = Counting(items, fail_first=fail_first)
    limiter = ItemExponentialFailureRateLimiter(0.0, 0.0)  # retries at once: measure the engine, not the wait
    q: RateLimitingQueue[str] = RateLimitingQueue(limiter)
    for k in _keys(items):
        q.add(k)
    worker: Worker[str] = Worker("bench", reconcile)
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run, q, workers)
        await reconcile.all_done.wait()
        q.shutdown()
    return (2 if fail_first else 1) * items / (time.perf_counter() - start)


async def sharded(items: int) -> float:
    reconcile = Counting(items)
    q: ShardedQueue[str] = ShardedQueue(8, shard_key=lambda key: key)
    for k in _keys(items):
        q.add(k)
    worker: Worker[str] = Worker("bench", reconcile)
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run_shards, q)
        await reconcile.all_done.wait()
        q.shutdown()
    return items / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=100_000)
    args = parser.parse_args()
    # The error path logs one warning per failure: measure the engine, not a terminal.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    cases: list[tuple[str, Any]] = [
        ("bare get/forget/done", lambda: bare(args.items)),
        ("engine, 1 worker", lambda: engine(args.items, 1)),
        ("engine, 8 workers", lambda: engine(args.items, 8)),
        ("engine, 8 shards", lambda: sharded(args.items)),
        ("engine, fail once", lambda: engine(args.items, 1, fail_first=True)),
    ]
    figures: dict[str, float] = {}
    print(f"{'case':<24}{'items/s':>12}{'µs/item':>10}")
    for label, case in cases:
        gc.collect()
        rate = asyncio.run(case())
        figures[label.replace(",", "").replace(" ", "_").replace("/", "_") + "_per_s"] = round(rate)
        print(f"{label:<24}{rate:>12,.0f}{1e6 / rate:>10.2f}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
