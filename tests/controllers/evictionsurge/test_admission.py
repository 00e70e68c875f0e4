"""AdmissionReview in and out: only an eviction CREATE is judged, dry runs are seen both ways, and a
denial is the Status the API server hands back to the drainer as a 429."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.evictionsurge import admission
from controllers.evictionsurge.decision import Decision, Why


def review(**request: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "uid": "u",
        "operation": "CREATE",
        "namespace": "ns",
        "name": "p",
        "subResource": "eviction",
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "object": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}},
    }
    base.update(request)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": base}


@pytest.mark.parametrize(("body", "applies", "dry_run"), [
    (review(), True, False),
    (review(dryRun=True), True, True),
    (review(object={"kind": "Eviction", "metadata": {"name": "p"}, "deleteOptions": {"dryRun": ["All"]}}), True, True),
    (review(operation="DELETE"), False, False),
    (review(subResource=""), False, False),
    (review(resource={"group": "apps", "version": "v1", "resource": "pods"}), False, False),
    (review(name="", object={}), False, False),
    ({"kind": "AdmissionReview"}, False, False),
    ({"request": "not an object"}, False, False),
])  # fmt: skip
def test_parse(body: dict[str, Any], applies: bool, dry_run: bool) -> None:
    parsed = admission.parse_review(body)
    assert (parsed.applies, parsed.dry_run) == (applies, dry_run)


def test_denial_is_a_429_status_and_an_allowance_echoes_the_uid() -> None:
    denied = admission.response(
        "u-7", Decision(False, Why.SURGING, "a replacement for pod ns/p is being started")
    )
    assert denied["response"] == {
        "uid": "u-7",
        "allowed": False,
        "status": {
            "status": "Failure",
            "code": 429,
            "reason": "TooManyRequests",
            "message": "a replacement for pod ns/p is being started",
        },
    }
    assert admission.response("u-8", Decision(True, Why.ENOUGH_AVAILABLE))["response"] == {
        "uid": "u-8",
        "allowed": True,
    }
    told = admission.response("u-9", Decision(True, Why.SURGE_TIMED_OUT, "the PodDisruptionBudget decides"))
    assert told["response"]["warnings"] == ["the PodDisruptionBudget decides"]
