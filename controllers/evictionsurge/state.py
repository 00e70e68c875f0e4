"""What the admission side remembers for the writes: per pod key, the evictions seen and the
requests to make or report.

The webhook answers from memory, never from the API, and the workers act on what it saw; both
read and write this one record, which lives as long as the process (a restart starts the retry
window anew).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(slots=True)
class SurgeState:
    """Per pod key: when an eviction last reached us, requests to write, timed-out requests told."""

    started: datetime
    last_eviction: dict[str, datetime] = field(default_factory=dict)
    wanted: set[str] = field(default_factory=set)
    #: pod key -> the timed-out request already told (uid@time)
    reported: dict[str, str] = field(default_factory=dict)
    #: pod key -> when this process last created or re-asked the pod's EvictionRequest
    asked: dict[str, datetime] = field(default_factory=dict)

    def forget(self, key: str) -> None:
        """The pod is gone: nothing about it is worth keeping."""
        self.last_eviction.pop(key, None)
        self.wanted.discard(key)
        self.reported.pop(key, None)
        self.asked.pop(key, None)
