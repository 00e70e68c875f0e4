"""AdmissionReview (admission.k8s.io/v1) for `pods/eviction` CREATE: read the request, write the answer.

The API server posts the Eviction it is about to carry out; the answer echoes the request's uid.
A denial carries a `metav1.Status`: the API server returns its code, reason and message to the
client as they are (the message prefixed "admission webhook ... denied the request: "), exactly
as the PodDisruptionBudget's own 429 reaches it. Anything the webhook does not understand is
allowed: it must never be the reason an eviction fails.

No `details.retryAfterSeconds`, though the API server would turn it into a Retry-After header:
client-go answers a 429 carrying Retry-After by resending the request itself, silently, up to ten
times, so `kubectl drain` would sit quiet for up to a minute instead of printing its
"error when evicting pods/... (will retry after 5s): ... a replacement ... is being started" line
on each attempt. Every drainer retries a bare 429 on its own schedule (kubectl every 5 s,
cluster-autoscaler and Karpenter with their own backoff), as they retry the budget's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controllers.evictionsurge.decision import Decision

API_VERSION = "admission.k8s.io/v1"


@dataclass(frozen=True, slots=True)
class EvictionRequest:
    """The parts of an AdmissionRequest the webhook reads."""

    uid: str
    namespace: str
    name: str  # the pod's name
    dry_run: bool
    applies: bool  # a CREATE of pods/eviction (anything else is allowed untouched)


def _dry_run_option(obj: Mapping[str, Any]) -> bool:
    options = obj.get("deleteOptions") or {}
    return bool(options.get("dryRun")) if isinstance(options, Mapping) else False


def parse_review(review: Mapping[str, Any]) -> EvictionRequest:
    """The request of an AdmissionReview; `applies` is False for anything but an eviction CREATE."""
    request = review.get("request") or {}
    if not isinstance(request, Mapping):
        request = {}
    resource = request.get("resource") or {}
    obj = request.get("object") or {}
    meta = obj.get("metadata") or {} if isinstance(obj, Mapping) else {}
    applies = (
        request.get("operation") == "CREATE"
        and isinstance(resource, Mapping) and resource.get("group", "") == "" and resource.get("resource") == "pods"
        and request.get("subResource") == "eviction"
    )  # fmt: skip
    namespace = str(request.get("namespace") or meta.get("namespace") or "")
    name = str(request.get("name") or meta.get("name") or "")
    dry_run = bool(request.get("dryRun")) or (isinstance(obj, Mapping) and _dry_run_option(obj))
    return EvictionRequest(str(request.get("uid") or ""), namespace, name, dry_run, applies and bool(name))


def allowed(uid: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": {"uid": uid, "allowed": True}}


def response(uid: str, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview answering `uid` with `decision`."""
    if decision.allowed:
        out = allowed(uid)
        if decision.message:
            out["response"]["warnings"] = [decision.message]
        return out
    status: dict[str, Any] = {
        "status": "Failure",
        "code": 429,
        "reason": "TooManyRequests",
        "message": decision.message,
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": False, "status": status},
    }
