"""The shapes of the responder's writes: its pod condition and its entry of an Eviction's status."""

from __future__ import annotations

import pytest

from controllers.common.evacuation import EVACUATION_REQUEST, REASON_EVICTION_REQUEST
from controllers.evictionresponder import marks
from controllers.evictionresponder.registration import (
    RESPONDER_NAME,
    RESPONDER_PRIORITY,
    implicit_responder,
    serves,
)
from controllers.evictionresponder.status import entry_of, report_ops
from evictionapi import names
from kubeutil.timestamps import format_time
from tests.controllers.evictionresponder.builders import NOW, eviction, ours, pod


def test_the_request_is_added_beside_the_kubelets_conditions_and_guarded_by_the_version() -> None:
    ops = marks.request_ops(pod(), eviction_name="ev", now=NOW)
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    assert ops[1]["op"] == "add" and ops[1]["path"] == "/status/conditions/-"
    assert ops[1]["value"] == {
        "type": EVACUATION_REQUEST,
        "status": "True",
        "reason": REASON_EVICTION_REQUEST,
        "message": marks.request_message("ev"),
        "lastTransitionTime": format_time(NOW),
    }


def test_a_withdrawn_request_is_replaced_in_place() -> None:
    ops = marks.request_ops(pod(request=("False", "NodeMaintenance", 9)), eviction_name="ev", now=NOW)
    assert ops[1]["op"] == "replace" and ops[1]["path"] == "/status/conditions/1"


def test_only_our_own_request_is_ever_withdrawn() -> None:
    assert marks.withdraw_ops(pod(request=("True", "NodeMaintenance", 9))) is None
    assert marks.withdraw_ops(pod()) is None
    assert marks.withdraw_ops(pod(request=ours())) == [
        {"op": "test", "path": "/status/conditions/1/type", "value": EVACUATION_REQUEST},
        {"op": "test", "path": "/status/conditions/1/reason", "value": REASON_EVICTION_REQUEST},
        {"op": "remove", "path": "/status/conditions/1"},
    ]


def test_a_report_writes_our_entry_only_while_we_are_active() -> None:
    entry = entry_of(eviction(), RESPONDER_NAME)
    assert entry is not None and (entry.target_index, entry.status_index) == (1, 1)
    ops = report_ops(entry, RESPONDER_NAME, message="m", now=NOW, complete=True)
    stamp = format_time(NOW)
    assert ops == [
        {"op": "test", "path": "/status/responders/1/name", "value": RESPONDER_NAME},
        {"op": "test", "path": "/status/targetResponders/1/name", "value": RESPONDER_NAME},
        {"op": "test", "path": "/status/targetResponders/1/state", "value": names.STATE_ACTIVE},
        {"op": "add", "path": "/status/responders/1/heartbeatTime", "value": stamp},
        {"op": "add", "path": "/status/responders/1/message", "value": "m"},
        {"op": "add", "path": "/status/responders/1/completionTime", "value": stamp},
    ]


def test_a_final_message_is_pinned_to_the_state_it_was_read_in_and_beats_no_heart() -> None:
    entry = entry_of(eviction(state=names.STATE_CANCELED), RESPONDER_NAME)
    assert entry is not None
    ops = report_ops(entry, RESPONDER_NAME, message="x" * 5000, now=NOW, heartbeat=False)
    assert ops[2]["value"] == names.STATE_CANCELED
    assert [op["path"].rsplit("/", 1)[1] for op in ops[3:]] == ["message"]
    assert len(ops[3]["value"]) == names.MAX_MESSAGE_LENGTH


def test_an_uninitialised_entry_cannot_be_reported_in() -> None:
    entry = entry_of(eviction(initialised=False), RESPONDER_NAME)
    assert entry is not None and entry.status is None
    with pytest.raises(ValueError, match="no status entry"):
        report_ops(entry, RESPONDER_NAME, message="m", now=NOW)


@pytest.mark.parametrize(
    ("owner", "served"),
    [
        pytest.param("ReplicaSet", True, id="replicaset"),
        pytest.param("StatefulSet", False, id="statefulset"),
        pytest.param(None, False, id="no-controller"),
    ],
)
def test_it_is_registered_for_the_pods_of_replicasets(owner: str | None, served: bool) -> None:
    assert serves(pod(owner_kind=owner)) is served


def test_a_replicaset_of_another_api_group_is_not_ours() -> None:
    p = pod()
    p["metadata"]["ownerReferences"][0]["apiVersion"] = "example.io/v1"
    assert not serves(p)


def test_it_registers_as_a_managing_controller_in_its_own_domain() -> None:
    assert implicit_responder() == {"name": RESPONDER_NAME, "priority": 10000}
    assert RESPONDER_PRIORITY == names.MANAGING_CONTROLLER_PRIORITY
    domain = RESPONDER_NAME.partition("/")[0]
    assert not any(domain == d or domain.endswith("." + d) for d in names.RESERVED_DOMAINS)
