"""The AdmissionReview v1 a webhook is sent, and what its answer means.

The request carries what `request.CreateV1AdmissionReview` puts in it: uid, kind / resource /
subResource in the version the webhook is sent, requestKind / requestResource /
requestSubResource as the client asked, name, namespace, operation, userInfo, object, oldObject,
dryRun and options. A denial becomes the Status the client gets back as kube-apiserver v1.24's
`webhookerrors.ToStatusErr` builds it: the webhook's own status (code, reason, details) with the
message prefixed by `admission webhook "<name>" denied the request`, a code below 400 raised to
400. So a webhook that answers 429 with `details.retryAfterSeconds` reaches `kubectl drain` as
a 429 it retries, with the Retry-After header the real server adds.
"""

from __future__ import annotations

import uuid
from typing import Any

from localcluster import errors
from localcluster.admission.matching import Invocation, Request
from localcluster.registry import Obj

API_VERSION = "admission.k8s.io/v1"
V1BETA1 = "admission.k8s.io/v1beta1"


def review_version(versions: tuple[str, ...]) -> str:
    """The first version the webhook accepts that this server speaks (`CreateAdmissionObjects`)."""
    for version in versions:
        if version in ("v1", "v1beta1"):
            return f"admission.k8s.io/{version}"
    return API_VERSION


class InvalidResponse(Exception):
    """The webhook answered, but not with an AdmissionReview this server can use."""


class UndecodableResponse(Exception):
    """The answer is an AdmissionReview of the other version (the decoder cannot convert it)."""


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def _gvr(group: str, version: str, resource: str) -> dict[str, str]:
    return {"group": group, "version": version, "resource": resource}


def _in_version(obj: Obj | None, invocation: Invocation, request: Request) -> Obj | None:
    """The object as the webhook's version shows it (the None conversion: apiVersion only)."""
    if obj is None or invocation.version == request.version:
        return obj
    api_version = f"{invocation.group}/{invocation.version}" if invocation.group else invocation.version
    return {**obj, "apiVersion": api_version}


def build(invocation: Invocation, request: Request) -> tuple[str, Obj]:
    """A fresh uid and the review to post."""
    uid = str(uuid.uuid4())
    body: dict[str, Any] = {
        "uid": uid,
        "kind": _gvk(*invocation.kind),
        "resource": _gvr(invocation.group, invocation.version, invocation.resource),
    }
    if request.subresource:
        body["subResource"] = request.subresource
    body["requestKind"] = _gvk(*request.kind)
    body["requestResource"] = _gvr(request.group, request.version, request.resource)
    if request.subresource:
        body["requestSubResource"] = request.subresource
    if request.name:
        body["name"] = request.name
    if request.namespace:
        body["namespace"] = request.namespace
    body.update(
        {
            "operation": request.operation,
            "userInfo": request.user,
            "object": _in_version(request.obj, invocation, request),
            "oldObject": _in_version(request.old, invocation, request),
            "dryRun": request.dry_run,
            "options": request.options,
        }
    )
    version = review_version(invocation.webhook.review_versions)
    return uid, {"kind": "AdmissionReview", "apiVersion": version, "request": body}


def verify(uid: str, review: Any, sent: str = API_VERSION) -> Obj:
    """`VerifyAdmissionResponse`: the response, or `InvalidResponse` saying what is wrong (a
    v1beta1 answer is taken as it comes; v1 must echo the uid and say what it is)."""
    if not isinstance(review, dict):
        raise InvalidResponse("webhook response was absent")
    answered = review.get("apiVersion")
    if review.get("kind") == "AdmissionReview" and answered in (API_VERSION, V1BETA1) and answered != sent:
        raise UndecodableResponse(
            f"converting ({answered.rsplit('/', 1)[-1]}.AdmissionReview) to "
            f"({sent.rsplit('/', 1)[-1]}.AdmissionReview): unknown conversion"
        )
    response = review.get("response")
    if not isinstance(response, dict):
        raise InvalidResponse("webhook response was absent")
    if sent == V1BETA1:
        return response
    if response.get("uid") != uid:
        raise InvalidResponse(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    if review.get("apiVersion") != API_VERSION or review.get("kind") != "AdmissionReview":
        got = f"{review.get('apiVersion', '')}, Kind={review.get('kind', '')}"
        raise InvalidResponse(f"expected webhook response of {API_VERSION}, Kind=AdmissionReview, got {got}")
    return response


def denial(webhook_name: str, result: Any) -> errors.StatusError:
    """kube-apiserver v1.24's `ToStatusErr`: the webhook's status, sanitized and prefixed."""
    status: Obj = dict(result) if isinstance(result, dict) else {}
    code = status.get("code")
    code = code if isinstance(code, int) and code >= 400 else 400
    denied_by = f'admission webhook "{webhook_name}" denied the request'
    message, reason = status.get("message") or "", status.get("reason") or ""
    if message:
        text = f"{denied_by}: {message}"
    elif reason:
        text = f"{denied_by}: {reason}"
    else:
        text = f"{denied_by} without explanation"
    details = status.get("details")
    return errors.StatusError(code, str(reason), text, details if isinstance(details, dict) else None)
