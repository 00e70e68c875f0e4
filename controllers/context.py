"""What every controller gets from the manager: its client, the informers, events and gates.

A plain object rather than globals so that tests build one per test and two managers can run
in one process (the leader hand-off tests do).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from apiclient import KubeClient
from controllers import features
from evictionapi.served import AIOKCM, EvictionAPI
from informers import SharedInformerFactory


class EventRecorder(Protocol):
    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None: ...


class EventRecorderFactory(Protocol):
    def recorder(self, component: str) -> EventRecorder: ...


class FeatureGates(Protocol):
    def enabled(self, name: str) -> bool: ...


@dataclass(frozen=True)
class StaticGates:
    """Gates from a plain mapping; unnamed gates read as disabled, except Kubernetes' own beta
    gates in `features.ON_UNLESS_SET`, which read as on as they do in the manager."""

    values: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, name: str) -> bool:
        return bool(self.values.get(name, name in features.ON_UNLESS_SET))


class _DiscardRecorder:
    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        return None


class DiscardEvents:
    """An event sink for tests that do not look at events."""

    def recorder(self, component: str) -> EventRecorder:
        return _DiscardRecorder()


@dataclass
class ControllerContext:
    client: KubeClient
    informers: SharedInformerFactory
    events: EventRecorderFactory = field(default_factory=DiscardEvents)
    gates: FeatureGates = field(default_factory=StaticGates)
    # Where the EvictionRequest API is served on this cluster (the manager discovers it at start).
    eviction_api: EvictionAPI = AIOKCM
