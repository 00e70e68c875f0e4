"""What the imperative evictor did, counted.

- `imperative_eviction_responder_controller_failed_evictions_total{reason}`: `/eviction` calls
  refused or failed, by the Status reason of the answer (`TooManyRequests` for a
  PodDisruptionBudget that allows no disruption; `Unknown` for a call that got no answer);
- `aiokcm_imperative_eviction_responder_actions_total{action}`: every write, by kind: `evict`
  (a call the server accepted), `evict-failed`, `status` (a progress or heartbeat write of the
  responder entry), `complete` (the write that set completionTime).
"""

from __future__ import annotations

from prometheus_client import Counter

FAILED_EVICTIONS = Counter(
    "imperative_eviction_responder_controller_failed_evictions",
    "Calls of the pods/eviction subresource by the imperative eviction responder that failed, by reason.",
    ["reason"],
)

ACTIONS = Counter(
    "aiokcm_imperative_eviction_responder_actions_total",
    "Writes of the imperative eviction responder, by kind.",
    ["action"],
)
