"""The rate-limiting queue: a delaying queue that asks a rate limiter how long to wait.

`add_rate_limited(item)` is `add_after(item, limiter.when(item))`; a worker calls it when a
sync fails and `forget(item)` when one succeeds, so the per-item backoff resets
(client-go util/workqueue/rate_limiting_queue.go).
"""

from __future__ import annotations

from typing import Unpack

from workqueue.delaying import DelayingQueue
from workqueue.queue import QueueOptions, T
from workqueue.rate_limiters import RateLimiter, default_controller_rate_limiter


class RateLimitingQueue(DelayingQueue[T]):
    """A `DelayingQueue` with `add_rate_limited`, `forget` and `num_requeues`."""

    def __init__(self, rate_limiter: RateLimiter | None = None, **options: Unpack[QueueOptions[T]]) -> None:
        super().__init__(**options)
        self.rate_limiter: RateLimiter = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter()
        )

    def add_rate_limited(self, item: T) -> None:
        """Add `item` after the delay the rate limiter decides (one more failure for it)."""
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """The item succeeded: reset its backoff (it is not removed from the queue)."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)
