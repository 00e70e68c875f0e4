"""The real `kubectl drain` against a cluster whose eviction webhook holds pods back with a 429:
kubectl reports the webhook's message, waits its 5 s and evicts once the webhook allows it."""

from __future__ import annotations

from typing import Any

import pytest

from apiclient import KubeClient
from apiclient import resources as R
from tests.localcluster.living import is_ready, owned_pod
from tests.localcluster.test_fidelity_api import kubectl
from tests.localcluster.webhookserver import webhook_server
from tests.support.waiting import eventually, holds

pytestmark = [pytest.mark.kubectl, pytest.mark.backends("local", "real")]


async def test_kubectl_drain_retries_an_eviction_a_webhook_answers_with_429(
    cluster: Any, kube: KubeClient
) -> None:
    async with webhook_server() as webhook:
        rs = await kube.create(
            R.REPLICASETS,
            {
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
                    },
                },
            },
            namespace="default",
        )
        await kube.create(
            R.PODS, owned_pod("web-0", rs, labels={"app": "web"}, nodeName="node-1"), namespace="default"
        )
        await eventually(
            lambda: holds(kube.get(R.PODS, "web-0", namespace="default"), is_ready), "pod web-0 ready"
        )

        def first_refused(request: dict[str, Any]) -> dict[str, Any]:
            if len(webhook.reviews) == 1 and not request["dryRun"]:
                return {
                    "allowed": False,
                    "status": {
                        "code": 429,
                        "reason": "TooManyRequests",
                        "message": "a replacement is being started",
                    },
                }
            return {"allowed": True}

        webhook.answer = first_refused
        configurations = R.Resource(
            "admissionregistration.k8s.io",
            "v1",
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            False,
        )
        await kube.create(
            configurations,
            webhook.configuration("surge", resources=["pods/eviction"], failure_policy="Ignore", timeout=2),
        )
        try:
            # the real server applies a configuration a moment later: a dry-run eviction shows when it does
            await eventually(
                lambda: holds(_dry_evict(kube), lambda _: bool(webhook.reviews)), "bool(webhook.reviews)"
            )
            webhook.reviews.clear()
            code, out, err = await kubectl(cluster, "drain", "node-1", "--ignore-daemonsets", "--timeout=60s")
        finally:
            await kube.delete(configurations, "surge")
        assert code == 0, out + err
        assert (
            'error when evicting pods/"web-0" -n "default" (will retry after 5s): admission webhook '
            '"surge.example.com" denied the request: a replacement is being started'
        ) in err
        assert "pod/web-0 evicted" in out and "node/node-1 drained" in out
        assert [r["request"]["name"] for r in webhook.reviews] == ["web-0", "web-0"]


async def _dry_evict(kube: KubeClient) -> None:
    await kube.request(
        "POST",
        "/api/v1/namespaces/default/pods/web-0/eviction",
        query={"dryRun": "All"},
        body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0"}},
    )
