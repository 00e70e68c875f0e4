"""client-go's work queues in asyncio, plus the taint manager's sharded and timed queues.

Layers, each wrapping the one below as in client-go's util/workqueue: `Queue` (dirty /
processing semantics), `DelayingQueue` (`add_after`), `RateLimitingQueue` (`add_rate_limited`,
`forget`, `num_requeues`). `ShardedQueue` fans work out by a stable hash of a shard key;
`TimedWorkerQueue` fires work per key at a time. Metrics keep client-go's names.
"""

from workqueue.delaying import DelayingQueue
from workqueue.metrics import MetricsProvider, QueueMetrics, set_provider
from workqueue.queue import Queue, ShutDown
from workqueue.rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)
from workqueue.rate_limiting import RateLimitingQueue
from workqueue.sharded import ShardedQueue, fnv32a
from workqueue.timed import TimedWork, TimedWorkerQueue

__all__ = [
    "BucketRateLimiter",
    "DelayingQueue",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "MetricsProvider",
    "Queue",
    "QueueMetrics",
    "RateLimiter",
    "RateLimitingQueue",
    "ShardedQueue",
    "ShutDown",
    "TimedWork",
    "TimedWorkerQueue",
    "WithMaxWaitRateLimiter",
    "default_controller_rate_limiter",
    "fnv32a",
    "set_provider",
]
