"""What the three syncs read from the caches the same way: targets, and objects by target."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controllers.evictionrequest.target import (
    Responder,
    TargetInfo,
    target_index_value,
    target_ref_of,
)
from controllers.evictionrequest.terminaltimes import TerminalTimes
from evictionapi.responders import pod_responders
from informers import Lister

Obj = Mapping[str, Any]

# Evictions and EvictionRequests by `<namespace>/pod/<uid>` of their target.
TARGET_INDEX = "evictionTargetUID"


def target_index(obj: Obj) -> list[str]:
    value = target_index_value(str((obj.get("metadata") or {}).get("namespace") or ""), obj)
    return [value] if value else []


@dataclass(frozen=True)
class Reader:
    pods: Lister
    requests: Lister
    evictions: Lister
    implicit_responders: Sequence[tuple[str, int]] = ()
    terminal_times: TerminalTimes = field(default_factory=TerminalTimes)

    def _responders_of(self, pod: Obj, include_default: bool) -> list[Responder]:
        found = pod_responders(pod, self.implicit_responders, include_default=include_default)
        return [(r.name, r.priority) for r in found.responders]

    def responder_problem(self, target: TargetInfo) -> str | None:
        """Why the pod's responder list cannot be used as declared; None when it can."""
        if target.pod is None:
            return None
        errors = pod_responders(target.pod, self.implicit_responders).errors
        if not errors:
            return None
        return f"Target {target.target_type()} has invalid eviction responders: {'; '.join(errors)}."

    def target_of(self, obj: Obj) -> TargetInfo:
        """The target of an Eviction or EvictionRequest with the pod of that name, if cached."""
        ref = target_ref_of(obj)
        pod: Obj | None = None
        pod_ref = ref.get("pod")
        if isinstance(pod_ref, Mapping) and pod_ref.get("name"):
            namespace = str((obj.get("metadata") or {}).get("namespace") or "")
            pod = self.pods.get(str(pod_ref["name"]), namespace)
        deleted_at = None
        if isinstance(pod_ref, Mapping):
            deleted_at = self.terminal_times.get(str(pod_ref.get("uid") or ""))
        return TargetInfo(ref, pod, self._responders_of, deleted_at)

    def evictions_for(self, index_value: str) -> list[Obj]:
        return list(self.evictions.by_index(TARGET_INDEX, index_value)) if index_value else []

    def requests_for(self, index_value: str) -> list[Obj]:
        return list(self.requests.by_index(TARGET_INDEX, index_value)) if index_value else []
