"""Objects for the evictionrequest tables, shaped as upstream's test helpers shape them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from controllers.evictionrequest.target import TargetInfo
from evictionapi import names
from evictionapi.responders import pod_responders
from kubeutil.timestamps import format_time

Obj = dict[str, Any]
Tweak = Callable[[Obj], None]

NOW = datetime(2026, 5, 1, 10, 0, 0, tzinfo=UTC)
EVICTOR = names.IMPERATIVE_EVICTOR


def ts(at: datetime = NOW, *, seconds: float = 0) -> str:
    return format_time(at + timedelta(seconds=seconds))


def responders_of(pod: Mapping[str, Any], include_default: bool) -> list[tuple[str, int | None]]:
    return [(r.name, r.priority) for r in pod_responders(pod, include_default=include_default).responders]


def target(name: str | None, uid: str, pod: Obj | None) -> TargetInfo:
    ref: dict[str, Any] = {"pod": {"name": name, "uid": uid}} if name is not None else {}
    return TargetInfo(ref, pod, responders_of)


def pod(name: str, uid: str, *tweaks: Tweak) -> Obj:
    obj: Obj = {"metadata": {"name": name, "namespace": "ns", "uid": uid}, "spec": {}, "status": {}}
    for tweak in tweaks:
        tweak(obj)
    return obj


def pod_deleted_at(at: str) -> Tweak:
    return lambda obj: obj["metadata"].__setitem__("deletionTimestamp", at)


def pod_phase(phase: str) -> Tweak:
    return lambda obj: obj["status"].__setitem__("phase", phase)


def eviction_responders(*responders: tuple[str, int]) -> Tweak:
    return lambda obj: obj["spec"].__setitem__(
        "evictionResponders", [{"name": n, "priority": p} for n, p in responders]
    )


def eviction(name: str, pod_name: str, pod_uid: str, *tweaks: Tweak) -> Obj:
    obj: Obj = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"target": {"pod": {"name": pod_name, "uid": pod_uid}}},
        "status": {},
    }
    for tweak in tweaks:
        tweak(obj)
    return obj


def created_at(at: str) -> Tweak:
    return lambda obj: obj["metadata"].__setitem__("creationTimestamp", at)


def condition(type_: str, status: str, reason: str, at: str = ts(), message: str = "msg") -> Tweak:
    def tweak(obj: Obj) -> None:
        obj.setdefault("status", {}).setdefault("conditions", []).append(
            {"type": type_, "status": status, "reason": reason, "lastTransitionTime": at, "message": message}
        )

    return tweak


def condition_true(type_: str, reason: str, at: str = ts()) -> Tweak:
    return condition(type_, "True", reason, at)


def target_responders(*responder_names: str) -> Tweak:
    """Priorities 5000, 4999, ...: upstream's `addTargetResponders`."""

    def tweak(obj: Obj) -> None:
        listed = obj["status"].setdefault("targetResponders", [])
        start = len(listed)
        for i, name in enumerate(responder_names):
            listed.append({"name": name, "priority": 5000 - (start + i), "state": names.STATE_INACTIVE})

    return tweak


def state_for(state: str, idx: int) -> Tweak:
    return lambda obj: obj["status"]["targetResponders"][idx].__setitem__("state", state)


def labels(values: dict[str, str]) -> Tweak:
    return lambda obj: obj["metadata"].__setitem__("labels", dict(values))


def request(pod_name: str, pod_uid: str, *tweaks: Tweak, name: str = "foo") -> Obj:
    obj: Obj = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": ts()},
        "spec": {
            "target": {"pod": {"name": pod_name, "uid": pod_uid}},
            "requester": "foo.example.com/bar",
            "intent": names.INTENT_EVICTION,
        },
        "status": {},
    }
    for tweak in tweaks:
        tweak(obj)
    return obj


def requester(name: str) -> Tweak:
    return lambda obj: obj["spec"].__setitem__("requester", name)


def intent(value: str) -> Tweak:
    return lambda obj: obj["spec"].__setitem__("intent", value)


def request_created(at: str | None) -> Tweak:
    def tweak(obj: Obj) -> None:
        if at is None:
            obj["metadata"].pop("creationTimestamp", None)
        else:
            obj["metadata"]["creationTimestamp"] = at

    return tweak


def request_deleted(at: str = ts()) -> Tweak:
    return lambda obj: obj["metadata"].__setitem__("deletionTimestamp", at)


def cond(type_: str, status: str, reason: str, message: str, at: str = ts()) -> Obj:
    """An expected condition, as upstream's `conditionApplyConf`."""
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}


def tr(name: str, priority: int, state: str) -> Obj:
    return {"name": name, "priority": priority, "state": state}


def names_of(objs: Sequence[Obj]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]
