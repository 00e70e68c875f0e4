"""Settings of the evictionrequest controller."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EvictionRequestConfig:
    """`implicit_responders`: `(name, priority)` of responders aiokcm runs itself for every pod
    (its surge responder), listed on each new Eviction after the pod's own; the manager fills it
    when such a responder controller is enabled. Empty: only what pods declare, and the default
    evictor."""

    implicit_responders: tuple[tuple[str, int], ...] = ()
