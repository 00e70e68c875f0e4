"""A pod's eviction responders, in the order the evictionrequest controller activates them.

Kubernetes reads them from `pod.spec.evictionResponders`; a server without that field (every one
before 1.37, or with the gate off) drops it, so aiokcm also reads the annotation
`lifecycle.aiokcm.io/eviction-responders`, a JSON list of `{"name", "priority"}`. Whoever creates
the pod can write anything there, so nothing here raises: an unreadable annotation or an invalid
entry is left out and reported in `PodResponders.errors`, for the caller to surface (an Event, a
condition message) rather than to crash-loop on.

Besides what the pod declares, aiokcm may register responders of its own for some pods (its
surge responder for pods a ReplicaSet controls): the caller passes them as `implicit`. Last comes
the default `imperative-eviction.k8s.io/evictor` at priority 100, which every pod gets.

Order: highest priority first; equal priorities by domain, read from its top label down, then by
the key (`evictionapi.validation.responder_order_key`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from evictionapi import names
from evictionapi.validation import responder_name_error, responder_order_key, responder_priority_error


@dataclass(frozen=True, slots=True)
class Responder:
    name: str
    priority: int

    def as_target_responder(self, state: str = names.STATE_INACTIVE) -> dict[str, Any]:
        """This responder as an Eviction's `status.targetResponders[]` entry."""
        return {"name": self.name, "priority": self.priority, "state": state}


DEFAULT_RESPONDER = Responder(names.IMPERATIVE_EVICTOR, names.IMPERATIVE_EVICTOR_PRIORITY)


@dataclass(frozen=True, slots=True)
class PodResponders:
    """The responders to list on a pod's Eviction, and what was left out and why."""

    responders: tuple[Responder, ...]
    errors: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.errors

    def names(self) -> list[str]:
        return [r.name for r in self.responders]

    def as_target_responders(self) -> list[dict[str, Any]]:
        return [r.as_target_responder() for r in self.responders]


def sort_responders(responders: Iterable[Responder]) -> list[Responder]:
    """Highest priority first; ties by domain order, then key (stable for exact duplicates)."""
    return sorted(responders, key=lambda r: responder_order_key(r.name, r.priority))


def declared_responders(pod: Mapping[str, Any]) -> tuple[list[Any], str | None, str | None]:
    """The pod's raw responder list, where it came from, and an error if it could not be read.

    `spec.evictionResponders` when the server kept the field; else the annotation. Returns
    `(entries, source, error)`; source is the field's or annotation's path, None when neither is set.
    """
    spec = pod.get("spec") or {}
    if spec.get("evictionResponders") is not None:
        entries = spec["evictionResponders"]
        source = "spec.evictionResponders"
        if not isinstance(entries, list):
            return [], source, f"{source}: must be a list"
        return entries, source, None
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(names.POD_RESPONDERS_ANNOTATION)
    if raw is None:
        return [], None, None
    source = f"metadata.annotations[{names.POD_RESPONDERS_ANNOTATION}]"
    try:
        entries = orjson.loads(raw)
    except (orjson.JSONDecodeError, TypeError) as exc:
        return [], source, f"{source}: invalid JSON: {exc}"
    if not isinstance(entries, list):
        return [], source, f'{source}: must be a JSON list of {{"name", "priority"}} objects'
    return entries, source, None


def _parse(entry: Any, where: str, *, allow_reserved: bool) -> tuple[Responder | None, str | None]:
    if not isinstance(entry, Mapping):
        return None, f'{where}: must be an object with "name" and "priority"'
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        return None, f"{where}.name: Required value"
    if (error := responder_name_error(name, allow_reserved=allow_reserved)) is not None:
        return None, f"{where}.name: Invalid value: {name!r}: {error}"
    priority = entry.get("priority")
    if (error := responder_priority_error(name, priority)) is not None:
        return None, f"{where}.priority: Invalid value: {priority!r}: {error}"
    assert isinstance(priority, int)
    return Responder(name, priority), None


def pod_responders(
    pod: Mapping[str, Any],
    implicit: Sequence[tuple[str, int]] = (),
    *,
    include_default: bool = True,
) -> PodResponders:
    """The ordered responders of `pod`: its own, then `implicit` ones, then the default evictor.

    A pod declares at most 10 responders; aiokcm's implicit ones count against the same 10 (an
    Eviction lists at most 11 with the default), so they are added only while there is room, and
    never twice: a responder the pod declares under the same name keeps the pod's priority.
    Invalid or surplus entries are left out and reported in `errors`.
    """
    entries, source, error = declared_responders(pod)
    errors: list[str] = [error] if error else []
    chosen: list[Responder] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        responder, problem = _parse(entry, f"{source}[{i}]", allow_reserved=False)
        if problem is not None:
            errors.append(problem)
            continue
        assert responder is not None
        if responder.name in seen:
            errors.append(f"{source}[{i}]: Duplicate value: {responder.name!r}")
            continue
        if len(chosen) >= names.MAX_POD_RESPONDERS:
            errors.append(
                f"{source}: Too many: {len(entries)}: must have at most {names.MAX_POD_RESPONDERS} items"
            )
            break
        seen.add(responder.name)
        chosen.append(responder)
    for name, priority in implicit:
        if name in seen:
            continue
        responder, problem = _parse({"name": name, "priority": priority}, name, allow_reserved=True)
        if problem is not None:
            errors.append(problem)
            continue
        assert responder is not None
        if len(chosen) >= names.MAX_POD_RESPONDERS:
            errors.append(f"{name}: not added: the pod already has {names.MAX_POD_RESPONDERS} responders")
            continue
        seen.add(name)
        chosen.append(responder)
    if include_default and DEFAULT_RESPONDER.name not in seen:
        chosen.append(DEFAULT_RESPONDER)
    return PodResponders(tuple(sort_responders(chosen)), tuple(errors))


def responders_annotation(responders: Iterable[tuple[str, int]]) -> str:
    """The annotation value that declares `responders` on a pod (for tests, the CLI, templates)."""
    return orjson.dumps([{"name": n, "priority": p} for n, p in responders]).decode()
