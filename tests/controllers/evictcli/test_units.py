"""`aiokcm evict`'s pure parts: request names, requester names, progress lines and exit codes, flags."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager import cli, evict_view
from controller_manager.evict_cli import DEFAULT_REQUESTER, build_parser
from controller_manager.evict_view import PodProgress, Printer, Target, eviction_for, progress
from controller_manager.options import UsageError
from evictionapi import names
from evictionapi.requester import MAX_NAME_LENGTH, new_request, request_name, requester_problem
from evictionapi.served import AIOKCM, BUILTIN
from tests.manager.logcapture import restore_logging  # noqa: F401 - autouse: cli.main() configures logging

UID = "0b9c3a56-1f3e-4c1e-9d0a-6a7f7e0e2c11"
TARGET = Target("default", "web-0", UID, request_name("web-0", UID, DEFAULT_REQUESTER))


def cond(type_: str, status: str = "True", reason: str = "R", message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def request(intent: str = names.INTENT_EVICTION, *conditions: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": TARGET.request, "namespace": "default"},
        "spec": {
            "target": {"pod": {"name": "web-0", "uid": UID}},
            "requester": DEFAULT_REQUESTER,
            "intent": intent,
        },
        "status": {"conditions": list(conditions)},
    }


def eviction(
    responders: list[tuple[str, str]],
    statuses: dict[str, dict[str, Any]] | None = None,
    *conditions: dict[str, Any],
) -> dict[str, Any]:
    return {
        "metadata": {"name": "whatever", "namespace": "default"},
        "spec": {"target": {"pod": {"name": "web-0", "uid": UID}}},
        "status": {
            "targetResponders": [{"name": n, "priority": 1, "state": s} for n, s in responders],
            "responders": [{"name": n, **v} for n, v in (statuses or {}).items()],
            "conditions": list(conditions),
        },
    }


# -- names -------------------------------------------------------------------------------------------


def test_request_name_is_stable_and_separates_requesters_and_pods() -> None:
    a = request_name("web-0", UID, "cli.aiokcm.io/evict")
    assert a == request_name("web-0", UID, "cli.aiokcm.io/evict")
    assert a.startswith("web-0-") and len(a) == len("web-0-") + 10
    assert a != request_name("web-0", UID, "nodemaintenance.aiokcm.io/drain")
    assert a != request_name("web-0", "another-uid", "cli.aiokcm.io/evict")  # a new pod under the old name


def test_request_name_of_a_longest_pod_name_is_a_valid_name() -> None:
    name = request_name("a" * 253, UID, DEFAULT_REQUESTER)
    assert len(name) <= MAX_NAME_LENGTH
    assert name.startswith("a")


@pytest.mark.parametrize(
    ("requester", "problem"),
    [
        ("cli.aiokcm.io/evict", None),
        ("acme.io/foo", None),
        ("nodemaintenance.aiokcm.io/drain", None),
        ("acme.io", "domain-prefixed"),
        ("/foo", "domain-prefixed"),
        ("acme.io/", "domain-prefixed"),
        ("acme/foo", "not a domain"),
        ("Acme.io/foo", "DNS subdomain"),
        ("acme.io/-foo", "not a valid name"),
        ("acme.io/" + "x" * 64, "not a valid name"),
        ("k8s.io/foo", "reserved"),
        ("imperative-eviction.k8s.io/evictor", "reserved"),
        ("x.kubernetes.io/foo", "reserved"),
    ],
)
def test_requester_names(requester: str, problem: str | None) -> None:
    found = requester_problem(requester)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


@pytest.mark.parametrize("api", [AIOKCM, BUILTIN], ids=["crds", "builtin"])
def test_new_request_targets_the_pod_by_name_and_uid(api: Any) -> None:
    pod = {"metadata": {"name": "web-0", "namespace": "shop", "uid": UID}}
    owner = {
        "apiVersion": "maintenance.aiokcm.io/v1alpha1",
        "kind": "NodeMaintenance",
        "name": "m",
        "uid": "u",
    }
    body = new_request(api, pod, "acme.io/x", labels={"a": "b"}, owner=owner)
    assert body["apiVersion"] == f"{api.group}/v1alpha1"
    assert body["kind"] == "EvictionRequest"
    assert body["metadata"] == {
        "name": request_name("web-0", UID, "acme.io/x"),
        "namespace": "shop",
        "labels": {"a": "b"},
        "ownerReferences": [owner],
    }
    assert body["spec"] == {
        "target": {"pod": {"name": "web-0", "uid": UID}},
        "requester": "acme.io/x",
        "intent": "Eviction",
    }


# -- progress ----------------------------------------------------------------------------------------


def test_a_request_not_yet_seen_is_requested_and_one_gone_after_being_seen_is_deleted() -> None:
    assert progress(TARGET, None, None, seen=False).phase == evict_view.PHASE_REQUESTED
    gone = progress(TARGET, None, None, seen=True)
    assert gone.phase == evict_view.PHASE_DELETED and gone.final and not gone.evicted


def test_before_the_eviction_exists_the_pod_is_requested() -> None:
    p = progress(TARGET, request(), None)
    assert (p.phase, p.responder, p.final) == (evict_view.PHASE_REQUESTED, "", False)
    assert p.line() == "default/web-0: Requested"


def test_the_active_responder_its_state_message_and_expected_completion() -> None:
    ev = eviction(
        [("acme.io/migrator", names.STATE_ACTIVE), (names.IMPERATIVE_EVICTOR, names.STATE_INACTIVE)],
        {
            "acme.io/migrator": {
                "message": "copying 3/10 GiB",
                "expectedCompletionTime": "2030-01-01T00:10:00Z",
            },
            names.IMPERATIVE_EVICTOR: {},
        },
    )
    p = progress(TARGET, request(), ev)
    assert (p.phase, p.responder, p.state) == (evict_view.PHASE_EVICTING, "acme.io/migrator", "Active")
    assert p.line() == (
        "default/web-0: Evicting, acme.io/migrator Active (expected by 2030-01-01T00:10:00Z): copying 3/10 GiB"
    )


def test_target_evicted_settles_the_pod_evicted() -> None:
    ev = eviction(
        [(names.IMPERATIVE_EVICTOR, names.STATE_COMPLETED)],
        {names.IMPERATIVE_EVICTOR: {"message": "evicted"}},
    )
    p = progress(
        TARGET, request(names.INTENT_EVICTION, cond("TargetEvicted", message="the pod was deleted")), ev
    )
    assert p.evicted and p.final
    assert p.line() == f"default/web-0: Evicted, {names.IMPERATIVE_EVICTOR} Completed: the pod was deleted"


def test_the_evictions_condition_counts_before_it_is_copied_to_the_request() -> None:
    ev = eviction(
        [(names.IMPERATIVE_EVICTOR, names.STATE_COMPLETED)], None, cond("TargetEvicted", reason="PodDeleted")
    )
    awaiting = request(names.INTENT_EVICTION, cond("TargetEvicted", "False", "AwaitingEviction"))
    p = progress(TARGET, awaiting, ev)
    assert p.evicted
    assert p.message == "PodDeleted"  # the True condition's, not the request's stale False one


def test_failed_carries_the_conditions_message_and_the_last_responders() -> None:
    ev = eviction(
        [(names.IMPERATIVE_EVICTOR, names.STATE_INTERRUPTED)],
        {
            names.IMPERATIVE_EVICTOR: {
                "message": "Cannot evict pod as it would violate the pod's disruption budget."
            }
        },
    )
    er = request(
        names.INTENT_EVICTION, cond("Failed", reason="NoFurtherResponder", message="no responder left")
    )
    p = progress(TARGET, er, ev)
    assert p.phase == evict_view.PHASE_FAILED and p.final and not p.evicted
    assert "no responder left" in p.message and "disruption budget" in p.message


def test_a_request_withdrawn_by_someone_else_is_shown_until_it_settles() -> None:
    p = progress(TARGET, request(names.INTENT_WITHDRAWN), None)
    assert (p.phase, p.final) == (evict_view.PHASE_WITHDRAWN, False)
    failed = progress(
        TARGET, request(names.INTENT_WITHDRAWN, cond("Failed", reason="CanceledDueToNoRequesters")), None
    )
    assert failed.phase == evict_view.PHASE_FAILED
    assert failed.message == "CanceledDueToNoRequesters"


def test_the_eviction_is_found_by_namespace_and_pod_uid() -> None:
    ev = eviction([])
    other_uid = {**ev, "spec": {"target": {"pod": {"name": "web-0", "uid": "other"}}}}
    other_ns = {**ev, "metadata": {"name": "x", "namespace": "elsewhere"}}
    assert eviction_for([other_uid, other_ns, ev], TARGET) is ev
    assert eviction_for([other_uid, other_ns], TARGET) is None


@pytest.mark.parametrize(
    ("phases", "code"),
    [
        ([evict_view.PHASE_EVICTED], 0),
        ([evict_view.PHASE_EVICTED, evict_view.PHASE_EVICTED], 0),
        ([evict_view.PHASE_EVICTED, evict_view.PHASE_FAILED], 1),
        ([evict_view.PHASE_DELETED], 1),
        ([evict_view.PHASE_EVICTING], 1),  # a timeout
        ([], 1),
    ],
)
def test_exit_codes(phases: list[str], code: int) -> None:
    assert evict_view.exit_code([PodProgress(f"ns/p{i}", ph) for i, ph in enumerate(phases)]) == code


def test_the_printer_prints_a_pod_again_only_when_its_line_changes() -> None:
    printer = Printer()
    a = PodProgress("ns/a", evict_view.PHASE_EVICTING, "x.io/r", "Active", "1/3")
    b = PodProgress("ns/b", evict_view.PHASE_REQUESTED)
    assert printer.changed([a, b]) == [a.line(), b.line()]
    assert printer.changed([a, b]) == []
    a2 = PodProgress("ns/a", evict_view.PHASE_EVICTING, "x.io/r", "Active", "2/3")
    assert printer.changed([a2, b]) == [a2.line()]


def test_the_timeout_hint_points_at_the_controller_when_no_eviction_was_made() -> None:
    assert "evictionrequest controller" in evict_view.timeout_hint(
        PodProgress("ns/a", evict_view.PHASE_REQUESTED)
    )


# -- flags -------------------------------------------------------------------------------------------


def test_flags_and_defaults() -> None:
    args = build_parser().parse_args(["evict", "web-0", "pod/web-1", "-n", "shop", "--timeout", "1m30s"])
    assert args.pods == ["web-0", "web-1"]
    assert (args.namespace, args.timeout, args.requester, args.withdraw) == (
        "shop",
        90.0,
        DEFAULT_REQUESTER,
        False,
    )
    assert build_parser().parse_args(["evict", "p"]).timeout == 600.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["evict"], "required: POD"),
        (["evict", "p", "--requester", "k8s.io/me"], "reserved"),
        (["evict", "p", "--requester", "plain"], "domain-prefixed"),
        (["evict", "p", "--timeout=-1s"], "must not be negative"),
        (["evict", "deployment/web"], "is not a pod"),
    ],
)
def test_bad_flags_are_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        build_parser().parse_args(argv)


def test_bad_flags_exit_2_with_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["evict", "p", "--requester", "k8s.io/me"]) == 2
    assert cli.kubectl_plugin_main(["evict", "p", "--timeout", "soon"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: aiokcm evict:") for line in err)
