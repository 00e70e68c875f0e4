"""Validating admission webhooks on the local cluster, as kube-apiserver calls them.

A webhook registered with a ValidatingWebhookConfiguration judges the requests its rules name:
its denial reaches the client in the real server's words and code (a 429 with Retry-After, which
`kubectl drain` retries), failurePolicy decides what a webhook that cannot be reached means, and
the review it gets carries what kube-apiserver puts in one. The shape checks run on both backends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from apiclient import KubeClient
from tests.localcluster.helpers import bare_cluster
from tests.localcluster.webhookserver import WebhookServer, webhook_server
from tests.support.objects import pod
from tests.support.waiting import eventually, when

cluster = pytest.fixture(bare_cluster)

NS = "/api/v1/namespaces/default"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
EVICTION = {
    "apiVersion": "policy/v1",
    "kind": "Eviction",
    "metadata": {"name": "victim", "namespace": "default"},
}


async def raw(
    kube: KubeClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    query: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> tuple[int, dict[str, Any], Any]:
    """A request through kubernetes_asyncio, keeping status, body and headers of any answer."""
    resp = await kube.api_client.call_api(
        path,
        method,
        query_params=list((query or {}).items()),
        body=body,
        auth_settings=["BearerToken"],
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        _preload_content=False,
    )
    try:
        data = await resp.read()
        return resp.status, orjson.loads(data) if data else {}, resp.headers
    finally:
        resp.release()


@pytest.fixture
async def webhook() -> AsyncIterator[WebhookServer]:
    async with webhook_server() as server:
        yield server


async def register(kube: KubeClient, configuration: dict[str, Any]) -> None:
    """Create the configuration and wait until a request shows it is in force (kube-apiserver
    reads configurations from an informer, so it takes effect a moment later there)."""
    code, body, _ = await raw(kube, "POST", VWC, configuration)
    assert code == 201, body


async def unregister(kube: KubeClient, name: str) -> None:
    await raw(kube, "DELETE", f"{VWC}/{name}")


async def until_called(webhook: WebhookServer, request: Any) -> Any:
    """Repeat `request` until the webhook has seen one (the real server's informer lag)."""
    seen = len(webhook.reviews)

    async def called() -> Any:
        result = await request()
        return result if len(webhook.reviews) > seen else None

    return await eventually(called, "the webhook called", timeout=10.0)


def deny(status: dict[str, Any]) -> Any:
    return lambda _request: {"allowed": False, "status": status}


@pytest.mark.backends("local", "real")
async def test_a_429_denial_of_an_eviction_reaches_the_client_as_the_real_server_sends_it(
    cluster: Any, kube: KubeClient, webhook: WebhookServer
) -> None:
    await raw(kube, "POST", f"{NS}/pods", pod("victim", node="node-1"))
    webhook.answer = deny(
        {
            "code": 429,
            "reason": "TooManyRequests",
            "message": "a replacement is being started",
            "details": {"retryAfterSeconds": 5},
        }
    )
    await register(kube, webhook.configuration("surge", resources=["pods/eviction"]))
    try:
        # The real server picks a new configuration up a moment later: probe with dry runs, so an
        # eviction let through before then does not evict the pod this test needs.
        await until_called(
            webhook,
            lambda: raw(kube, "POST", f"{NS}/pods/victim/eviction", EVICTION, query={"dryRun": "All"}),
        )
        code, body, headers = await raw(kube, "POST", f"{NS}/pods/victim/eviction", EVICTION)
        assert code == 429
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'admission webhook "surge.example.com" denied the request: a replacement is being started',
            "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": 5},
            "code": 429,
        }
        assert headers.get("Retry-After") == "5"
        review = webhook.reviews[-1]
        assert review["path"] == "/validate?timeout=5s"
        request = review["request"]
        assert {k: v for k, v in request.items() if k not in ("uid", "userInfo")} == {
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "requestKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "eviction",
            "name": "victim",
            "namespace": "default",
            "operation": "CREATE",
            "object": {
                "kind": "Eviction",
                "apiVersion": "policy/v1",
                "metadata": {"name": "victim", "namespace": "default", "creationTimestamp": None},
            },
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        }
        assert (
            request["userInfo"]["username"] == "admin" and "system:masters" in request["userInfo"]["groups"]
        )
        # the pod is untouched: the webhook spoke before the eviction did anything
        code, victim, _ = await raw(kube, "GET", f"{NS}/pods/victim")
        assert code == 200 and "deletionTimestamp" not in victim["metadata"]

        # a status without reason or details, and one with a code below 400: sanitized as upstream
        webhook.answer = deny({"code": 429, "message": "plain"})
        code, body, headers = await raw(kube, "POST", f"{NS}/pods/victim/eviction", EVICTION)
        assert (code, body) == (
            429,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": 'admission webhook "surge.example.com" denied the request: plain',
                "code": 429,
            },
        )
        assert "Retry-After" not in headers
        webhook.answer = deny({"code": 200, "reason": "Bogus"})
        code, body, _ = await raw(kube, "POST", f"{NS}/pods/victim/eviction", EVICTION)
        assert (code, body["message"], body["reason"]) == (
            400,
            'admission webhook "surge.example.com" denied the request: Bogus',
            "Bogus",
        )
        webhook.answer = lambda _request: {"allowed": False}
        code, body, _ = await raw(kube, "POST", f"{NS}/pods/victim/eviction", EVICTION)
        assert (code, body["message"]) == (
            400,
            'admission webhook "surge.example.com" denied the request without explanation',
        )
        assert "reason" not in body
    finally:
        await unregister(kube, "surge")


@pytest.mark.backends("local", "real")
async def test_a_webhook_that_cannot_be_called_fails_the_request_or_is_ignored_per_failure_policy(
    cluster: Any, kube: KubeClient, webhook: WebhookServer
) -> None:
    webhook.delay = 3.0
    await register(kube, webhook.configuration("slow", resources=["configmaps"], timeout=1))
    try:
        code, body, _ = await until_called(
            webhook, lambda: raw(kube, "POST", f"{NS}/configmaps", {"metadata": {"generateName": "c-"}})
        )
        url = f"{webhook.url}/validate?timeout=1s"
        reason = f'failed calling webhook "slow.example.com": failed to call webhook: Post "{url}": context deadline exceeded'
        assert (code, body) == (
            500,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"Internal error occurred: {reason}",
                "reason": "InternalError",
                "details": {"causes": [{"message": reason}]},
                "code": 500,
            },
        )
        code, body, _ = await raw(
            kube,
            "PATCH",
            f"{VWC}/slow",
            [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}],
            content_type="application/json-patch+json",
        )
        assert code == 200, body
        await asyncio.sleep(1.0)  # the real server's configuration informer
        code, body, _ = await raw(kube, "POST", f"{NS}/configmaps", {"metadata": {"name": "goes-through"}})
        assert code == 201, body
    finally:
        await unregister(kube, "slow")


@pytest.mark.backends("local", "real")
async def test_configurations_are_defaulted_and_validated_as_the_real_registry_does(
    cluster: Any, kube: KubeClient
) -> None:
    minimal: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "defaults"},
        "webhooks": [
            {
                "name": "defaults.example.com",
                "clientConfig": {"service": {"namespace": "default", "name": "svc"}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "rules": [
                    {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["nothing"]}
                ],
            }
        ],
    }
    code, body, _ = await raw(kube, "POST", VWC, minimal)
    try:
        assert code == 201, body
        assert body["metadata"]["generation"] == 1
        assert body["webhooks"] == [
            {
                "name": "defaults.example.com",
                "clientConfig": {"service": {"namespace": "default", "name": "svc", "port": 443}},
                "rules": [
                    {
                        "operations": ["*"],
                        "apiGroups": ["*"],
                        "apiVersions": ["*"],
                        "resources": ["nothing"],
                        "scope": "*",
                    }
                ],
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "namespaceSelector": {},
                "objectSelector": {},
                "sideEffects": "None",
                "timeoutSeconds": 10,
                "admissionReviewVersions": ["v1"],
            }
        ]
    finally:
        await unregister(kube, "defaults")

    bad = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bad"},
        "webhooks": [
            {
                "name": "bad",
                "clientConfig": {},
                "timeoutSeconds": 31,
                "admissionReviewVersions": ["v2"],
                "rules": [
                    {
                        "operations": ["GET"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods/*"],
                        "scope": "x",
                    }
                ],
            }
        ],
    }
    code, body, _ = await raw(kube, "POST", VWC, bad)
    assert code == 422
    assert [(c["field"], c["reason"], c["message"]) for c in body["details"]["causes"]] == [
        (
            "webhooks[0].name",
            "FieldValueInvalid",
            'Invalid value: "bad": should be a domain with at least three segments separated by dots',
        ),
        (
            "webhooks[0].rules[0].operations[0]",
            "FieldValueNotSupported",
            'Unsupported value: "GET": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"',
        ),
        (
            "webhooks[0].rules[0].scope",
            "FieldValueNotSupported",
            'Unsupported value: "x": supported values: "*", "Cluster", "Namespaced"',
        ),
        (
            "webhooks[0].sideEffects",
            "FieldValueRequired",
            "Required value: must specify one of None, NoneOnDryRun",
        ),
        (
            "webhooks[0].timeoutSeconds",
            "FieldValueInvalid",
            "Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        ),
        (
            "webhooks[0].clientConfig",
            "FieldValueRequired",
            "Required value: exactly one of url or service is required",
        ),
        (
            "webhooks[0].admissionReviewVersions",
            "FieldValueInvalid",
            'Invalid value: []string{"v2"}: must include at least one of v1, v1beta1',
        ),
    ]
    side_effects = {**minimal, "metadata": {"name": "some"}}
    side_effects["webhooks"] = [{**minimal["webhooks"][0], "sideEffects": "Some"}]
    code, body, _ = await raw(kube, "POST", VWC, side_effects)
    assert (code, body["message"]) == (
        422,
        'ValidatingWebhookConfiguration.admissionregistration.k8s.io "some" is invalid: '
        'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"',
    )


@pytest.mark.backends("local", "real")
async def test_an_unreachable_webhook_or_one_the_ca_bundle_does_not_vouch_for_fails_closed(
    cluster: Any, kube: KubeClient, webhook: WebhookServer
) -> None:
    refused = webhook.configuration("refused", resources=["secrets"])
    refused["webhooks"][0]["clientConfig"]["url"] = "https://127.0.0.1:1/x"
    stranger = webhook.configuration("stranger", resources=["services"])
    del stranger["webhooks"][0]["clientConfig"]["caBundle"]  # the system's roots do not know this CA
    await register(kube, refused)
    await register(kube, stranger)
    try:
        code, body, _ = await eventually(
            lambda: when(
                raw(kube, "POST", f"{NS}/secrets", {"metadata": {"generateName": "s-"}}),
                lambda result: result[0] != 201,
            ),
            "a secret refused",
        )
        reason = (
            'failed calling webhook "refused.example.com": failed to call webhook: Post "https://127.0.0.1:1/x?timeout=5s": '
            "dial tcp 127.0.0.1:1: connect: connection refused"
        )
        assert (code, body["message"], body["details"]) == (
            500,
            f"Internal error occurred: {reason}",
            {"causes": [{"message": reason}]},
        )
        code, body, _ = await eventually(
            lambda: when(
                raw(
                    kube,
                    "POST",
                    f"{NS}/services",
                    {"metadata": {"generateName": "s-"}, "spec": {"ports": [{"port": 80}]}},
                ),
                lambda result: result[0] != 201,
            ),
            "a service refused",
        )
        assert (code, body["message"]) == (
            500,
            'Internal error occurred: failed calling webhook "stranger.example.com": failed to call '
            f'webhook: Post "{webhook.url}/validate?timeout=5s": x509: certificate signed by unknown authority',
        )
        assert webhook.reviews == []
    finally:
        await unregister(kube, "refused")
        await unregister(kube, "stranger")


@pytest.mark.backends("local", "real")
async def test_an_eviction_is_a_dry_run_for_webhooks_only_when_the_request_says_so(
    cluster: Any, kube: KubeClient, webhook: WebhookServer
) -> None:
    await raw(kube, "POST", f"{NS}/pods", pod("victim", node="node-1"))
    webhook.answer = deny({"code": 429, "message": "held"})
    await register(kube, webhook.configuration("dry", resources=["pods/eviction"]))
    try:
        code, _, _ = await until_called(
            webhook,
            lambda: raw(kube, "POST", f"{NS}/pods/victim/eviction", EVICTION, query={"dryRun": "All"}),
        )
        request = webhook.reviews[-1]["request"]
        assert (code, request["dryRun"], request["options"]) == (
            429,
            True,
            {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]},
        )
        # a dry run asked in the Eviction's deleteOptions (as kubectl drain --dry-run=server does) is not the request's
        code, _, _ = await raw(
            kube, "POST", f"{NS}/pods/victim/eviction", {**EVICTION, "deleteOptions": {"dryRun": ["All"]}}
        )
        request = webhook.reviews[-1]["request"]
        assert (code, request["dryRun"], request["options"]) == (
            429,
            False,
            {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        )
        assert request["object"]["deleteOptions"]["dryRun"] == ["All"]
    finally:
        await unregister(kube, "dry")


@pytest.mark.backends("local", "real")
async def test_an_answer_for_another_request_is_a_failed_call_and_v1beta1_is_spoken_when_asked(
    cluster: Any, kube: KubeClient, webhook: WebhookServer
) -> None:
    webhook.answer = lambda _request: {"uid": "someone-else", "allowed": True}
    await register(kube, webhook.configuration("confused", resources=["configmaps"]))
    try:
        code, body, _ = await until_called(
            webhook, lambda: raw(kube, "POST", f"{NS}/configmaps", {"metadata": {"generateName": "c-"}})
        )
        uid = webhook.reviews[-1]["request"]["uid"]
        assert (code, body["message"]) == (
            500,
            'Internal error occurred: failed calling webhook "confused.example.com": '
            f'received invalid webhook response: expected response.uid="{uid}", got "someone-else"',
        )
    finally:
        await unregister(kube, "confused")
    await register(
        kube, webhook.configuration("old", resources=["secrets"], admissionReviewVersions=["v1beta1"])
    )
    try:
        # v1beta1 answers are not checked for the uid
        code, body, _ = await until_called(
            webhook, lambda: raw(kube, "POST", f"{NS}/secrets", {"metadata": {"generateName": "s-"}})
        )
        assert code == 201 and webhook.reviews[-1]["apiVersion"] == "admission.k8s.io/v1beta1", body[
            "message"
        ]
        webhook.answer_version = "admission.k8s.io/v1"
        code, body, _ = await raw(kube, "POST", f"{NS}/secrets", {"metadata": {"generateName": "s-"}})
        assert (code, body["message"]) == (
            500,
            'Internal error occurred: failed calling webhook "old.example.com": failed to call '
            "webhook: converting (v1.AdmissionReview) to (v1beta1.AdmissionReview): unknown conversion",
        )
    finally:
        await unregister(kube, "old")
