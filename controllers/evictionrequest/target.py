"""The target of an Eviction or EvictionRequest, resolved against the pod cache.

Callers ask what they need to decide ("is the target gone?", "is it terminal?", "which responders
does it declare?") instead of reaching into pod fields, so a target kind other than a pod needs
only this module to change. The caller looks the pod up by name beforehand; `pod=None` with a pod
target means the pod was not found.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubeutil.timestamps import parse_time

Obj = Mapping[str, Any]
# A pod's responders, in its declared order: `(name, priority)` each.
Responder = tuple[str, int | None]
RespondersOf = Callable[[Obj, bool], Sequence[Responder]]

NO_TARGET = "unknown"
POD_TARGET = "pod"


def _meta(obj: Obj | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def target_ref_of(obj: Obj | None) -> Mapping[str, Any]:
    """`spec.target` of an Eviction or EvictionRequest (both kinds spell it the same way)."""
    target = ((obj or {}).get("spec") or {}).get("target")
    return target if isinstance(target, Mapping) else {}


def is_pod_terminal(pod: Obj) -> bool:
    """`podutil.IsPodTerminal`: the pod's phase is Succeeded or Failed."""
    return ((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class TargetInfo:
    """`spec.target` with the pod found under its name (None when there is none)."""

    target: Mapping[str, Any]
    pod: Obj | None
    responders_of: RespondersOf | None = None
    # When the target was deleted, if it was and has left the cache since (see terminaltimes).
    deleted_at: datetime | None = None

    def _pod_ref(self) -> Mapping[str, Any] | None:
        ref = self.target.get("pod")
        return ref if isinstance(ref, Mapping) else None

    def target_type(self) -> str:
        return POD_TARGET if self._pod_ref() is not None else NO_TARGET

    def target_name(self) -> str:
        ref = self._pod_ref()
        return str(ref.get("name") or "") if ref is not None else ""

    def target_uid(self) -> str:
        ref = self._pod_ref()
        return str(ref.get("uid") or "") if ref is not None else ""

    def target_found_by_name(self) -> bool:
        return self._pod_ref() is not None and self.pod is not None

    def object_meta(self) -> Mapping[str, Any] | None:
        """The found object's metadata; None when the target is unavailable."""
        if self._pod_ref() is not None and self.pod is not None:
            return _meta(self.pod)
        return None

    def object_uid(self) -> str:
        meta = self.object_meta()
        return str(meta.get("uid") or "") if meta is not None else ""

    def deletion_timestamp(self) -> datetime | None:
        """When the target's deletion counts from: its deletionTimestamp, or the later moment this
        controller saw the deletion (see terminaltimes); for a pod already gone, when it went."""
        meta = self.object_meta()
        if meta is not None:
            stamp = parse_time(meta.get("deletionTimestamp"))
            if stamp is None or self.deleted_at is None:
                return stamp
            return max(stamp, self.deleted_at)
        return self.deleted_at if self.pod is None else None

    def is_gone(self) -> bool:
        """The original target no longer exists: not found, or found under another UID (the
        original was deleted and a new pod of the same name created)."""
        ref = self._pod_ref()
        if ref is None:
            return False
        if self.pod is None:
            return True
        return str(_meta(self.pod).get("uid") or "") != str(ref.get("uid") or "")

    def has_scheduling_group(self) -> bool:
        """The pod belongs to a PodGroup (`spec.schedulingGroup`): eviction is not supported yet."""
        if self.pod is None:
            return False
        return (self.pod.get("spec") or {}).get("schedulingGroup") is not None

    def is_terminal(self) -> bool:
        return self.pod is not None and is_pod_terminal(self.pod)

    def eviction_responders(self, include_default: bool) -> list[Responder]:
        """The responders the target declares (with the default evictor last when asked); none
        when the target is unavailable."""
        if self.pod is None or self.responders_of is None:
            return []
        return list(self.responders_of(self.pod, include_default))

    def to_eviction_target(self) -> dict[str, Any] | None:
        """`spec.target` of an Eviction for this target."""
        ref = self._pod_ref()
        if ref is None:
            return None
        return {"pod": {"name": self.target_name(), "uid": self.target_uid()}}


def target_index_value(namespace: str, obj: Obj | None) -> str:
    """`<namespace>/pod/<uid>`: the index value of an Eviction or EvictionRequest by target."""
    ref = target_ref_of(obj).get("pod")
    if isinstance(ref, Mapping):
        return f"{namespace}/pod/{ref.get('uid') or ''}"
    return ""


def target_index_value_for_pod(pod: Obj | None) -> str:
    if pod is None:
        return ""
    meta = _meta(pod)
    return f"{meta.get('namespace') or ''}/pod/{meta.get('uid') or ''}"
