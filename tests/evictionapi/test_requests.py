"""Reading requests and Evictions: both spellings of the requester, half-written objects."""

from __future__ import annotations

from typing import Any

from evictionapi import names
from evictionapi.requests import (
    active_responder_of,
    condition,
    failed,
    intent_of,
    requester_of,
    responder_status,
    target_evicted,
    target_key_of,
    target_pod_of,
    wants_eviction,
)

UID = "bd23f542-ac79-4b44-a628-9735e18b8037"


def request(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {"target": {"pod": {"name": "web-0", "uid": UID}}, "intent": names.INTENT_EVICTION, **spec},
    }


def test_either_spelling_of_the_requester() -> None:
    assert requester_of(request(requester="acme.io/a")) == "acme.io/a"
    assert requester_of(request(requesterName="acme.io/b")) == "acme.io/b"
    assert requester_of(request()) == ""
    assert requester_of(None) == ""


def test_target_and_intent() -> None:
    er = request(requester="acme.io/a")
    assert target_pod_of(er) == ("web-0", UID)
    assert target_key_of(er) == "ns/web-0"
    assert intent_of(er) == names.INTENT_EVICTION and wants_eviction(er)
    assert not wants_eviction(request(intent=names.INTENT_WITHDRAWN))
    assert target_pod_of({"spec": {"target": {}}}) is None
    assert target_pod_of({"spec": {"target": {"pod": {"name": "p"}}}}) == ("p", "")
    assert target_pod_of({}) is None and target_key_of({}) is None


def test_conditions_and_responders() -> None:
    eviction: dict[str, Any] = {
        "status": {
            "conditions": [
                {
                    "type": names.CONDITION_TARGET_EVICTED,
                    "status": "True",
                    "reason": names.REASON_POD_DELETED,
                },
                {"type": names.CONDITION_FAILED, "status": "False", "reason": names.REASON_SUCCEEDED},
            ],
            "targetResponders": [
                {"name": "a.example.com/x", "priority": 10000, "state": names.STATE_COMPLETED},
                {"name": names.IMPERATIVE_EVICTOR, "priority": 100, "state": names.STATE_ACTIVE},
            ],
            "responders": [{"name": "a.example.com/x", "message": "done"}],
        }
    }
    assert target_evicted(eviction) and not failed(eviction)
    assert condition(eviction, names.CONDITION_FAILED) == eviction["status"]["conditions"][1]
    assert condition(eviction, "Other") is None
    assert active_responder_of(eviction) == names.IMPERATIVE_EVICTOR
    assert responder_status(eviction, "a.example.com/x") == {"name": "a.example.com/x", "message": "done"}
    assert responder_status(eviction, names.IMPERATIVE_EVICTOR) is None
    assert active_responder_of({"status": {"targetResponders": None}}) is None
    assert not target_evicted({"status": None})
