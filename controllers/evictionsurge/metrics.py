"""What the eviction webhook decided and what it wrote, counted.

- `aiokcm_eviction_surge_decisions_total{decision, why}`: every reviewed eviction, allowed or
  denied, by the rule that decided (`decision.Why`);
- `aiokcm_eviction_surge_requests_total{action}`: evacuation requests written (`request`),
  withdrawn (`withdraw`) and surges reported as out of time (`timed-out`); in the EvictionRequest
  mode `request` and `withdraw` count the webhook's EvictionRequests asked (created or re-asked)
  and withdrawn.

The HTTP side is counted by the server with controller-runtime's webhook metric names.
"""

from __future__ import annotations

from prometheus_client import Counter

DECISIONS = Counter(
    "aiokcm_eviction_surge_decisions_total",
    "Evictions reviewed by the eviction-surge webhook.",
    ["decision", "why"],
)
REQUESTS = Counter(
    "aiokcm_eviction_surge_requests_total",
    "Evacuation requests the eviction-surge webhook wrote, withdrew or gave up on.",
    ["action"],
)
