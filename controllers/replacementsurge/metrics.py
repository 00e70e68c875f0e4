"""What the replacement surge wrote, counted.

`aiokcm_replacement_surge_actions_total{action}`: every write, by its step (`mark`, `answer`,
`create`, `adopt`, `give-up`, `delete-copy`, `restore`): a drain of N surging pods counts N of
each of the first four when all goes well (a pod's first `mark` travels in its `answer`'s
request, so those two are N requests, not 2N), and `give-up` counts the pods handed back to the
eviction fallback.
"""

from __future__ import annotations

from prometheus_client import Counter

ACTIONS = Counter(
    "aiokcm_replacement_surge_actions_total",
    "Writes of the replacement surge (through the public API, beside KCM's own controllers), by step.",
    ["action"],
)
