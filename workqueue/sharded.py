"""The sharded queue: the taint manager's fan-out of work by node onto N single-worker shards.

NoExecuteTaintManager hashes each node name with FNV-32a and sends node and pod updates for that
node to one of 8 channels, each drained by one worker; that worker always handles a pending
node update before pod updates (pkg/controller/tainteviction/taint_eviction.go). So all work
for one node is serialized, work for different nodes runs in parallel, and a node's taint
change is seen before the pods on it are judged.

Here each shard is a full `RateLimitingQueue` (dirty/processing semantics, `add_after`,
backoff) whose order is `priority(item)` ascending, FIFO among equals. The shards share one
rate limiter (so the overall token bucket stays overall) and one metrics recorder under `name`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic

from workqueue.metrics import queue_metrics
from workqueue.queue import T
from workqueue.rate_limiters import RateLimiter, default_controller_rate_limiter
from workqueue.rate_limiting import RateLimitingQueue

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def fnv32a(data: str) -> int:
    """Go's `hash/fnv` New32a over the UTF-8 bytes of `data`."""
    h = _FNV32_OFFSET
    for byte in data.encode():
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


class ShardedQueue(Generic[T]):
    """N rate-limited shards chosen by `fnv32a(shard_key(item)) % shards`; see the module docstring."""

    def __init__(
        self,
        shards: int = 8,
        *,
        shard_key: Callable[[T], str],
        priority: Callable[[T], int] | None = None,
        name: str = "",
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        if shards < 1:
            raise ValueError("a sharded queue needs at least one shard")
        self.name = name
        self._shard_key = shard_key
        self.rate_limiter: RateLimiter = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter()
        )
        metrics = queue_metrics(name)
        self._shards: list[RateLimitingQueue[T]] = [
            RateLimitingQueue(self.rate_limiter, priority=priority, metrics=metrics) for _ in range(shards)
        ]
        self._hash_cache: dict[str, int] = {}

    @property
    def shards(self) -> int:
        return len(self._shards)

    def shard(self, index: int) -> RateLimitingQueue[T]:
        """The queue behind shard `index` (for its length or a drain)."""
        return self._shards[index]

    def shard_for(self, item: T) -> int:
        key = self._shard_key(item)
        h = self._hash_cache.get(key)
        if h is None:
            if len(self._hash_cache) >= 65536:
                self._hash_cache.clear()
            h = self._hash_cache[key] = fnv32a(key) % len(self._shards)
        return h

    def add(self, item: T) -> None:
        self._shards[self.shard_for(item)].add(item)

    def add_after(self, item: T, seconds: float) -> None:
        self._shards[self.shard_for(item)].add_after(item, seconds)

    def add_rate_limited(self, item: T) -> None:
        self._shards[self.shard_for(item)].add_rate_limited(item)

    def forget(self, item: Hashable) -> None:
        self.rate_limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.rate_limiter.num_requeues(item)

    async def get(self, shard: int) -> T:
        """The next item of shard `shard`; raises `ShutDown` once shut down and empty."""
        return await self._shards[shard].get()

    def done(self, item: T) -> None:
        self._shards[self.shard_for(item)].done(item)

    def __len__(self) -> int:
        return sum(len(s) for s in self._shards)

    def shutdown(self) -> None:
        for s in self._shards:
            s.shutdown()

    async def shutdown_with_drain(self) -> None:
        """Shut every shard first (none accepts new work), then wait for each one's in-flight items."""
        for s in self._shards:
            s._begin_shutdown(drain=True)
        for s in self._shards:
            await s._wait_drained()

    @property
    def shutting_down(self) -> bool:
        return self._shards[0].shutting_down
