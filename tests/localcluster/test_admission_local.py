"""Webhook behaviour only the local cluster can show: a `clientConfig.service` reached on the
loopback, matchPolicy across the versions of a custom resource, kubectl managing configurations,
and the event loop staying free while a webhook takes its time."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from apiclient import KubeClient
from localcluster.cluster import LocalCluster
from tests.localcluster.test_admission_webhooks import NS, VWC, raw
from tests.localcluster.test_fidelity_api import kubectl
from tests.localcluster.webhookserver import webhook_server
from tests.support.waiting import eventually


@pytest.fixture
async def api() -> AsyncIterator[tuple[LocalCluster, KubeClient]]:
    async with LocalCluster(scheduler=False, kubelets=False, gc=False, controllers=False) as local:
        kube = await local.client()
        try:
            yield local, kube
        finally:
            await kube.close()


async def test_a_service_client_config_reaches_the_services_target_port_on_the_loopback(
    api: tuple[LocalCluster, KubeClient],
) -> None:
    _, kube = api
    async with webhook_server(hosts=("hook.default.svc",)) as webhook:
        await raw(
            kube,
            "POST",
            f"{NS}/services",
            {"metadata": {"name": "hook"}, "spec": {"ports": [{"port": 443, "targetPort": webhook.port}]}},
        )
        config = webhook.configuration("svc", resources=["configmaps"])
        config["webhooks"][0]["clientConfig"] = {
            "service": {"namespace": "default", "name": "hook", "path": "/check"},
            "caBundle": webhook.ca_bundle,
        }
        missing = copy.deepcopy(config)
        missing["metadata"]["name"] = "missing"
        missing["webhooks"][0]["name"] = "missing.example.com"
        missing["webhooks"][0]["clientConfig"]["service"]["name"] = "nohook"
        missing["webhooks"][0]["rules"][0]["resources"] = ["secrets"]
        for body in (config, missing):
            assert (await raw(kube, "POST", VWC, body))[0] == 201

        assert (await raw(kube, "POST", f"{NS}/configmaps", {"metadata": {"name": "c"}}))[0] == 201
        assert [(r["host"], r["path"]) for r in webhook.reviews] == [
            ("hook.default.svc:443", "/check?timeout=5s")
        ]
        code, body, _ = await raw(kube, "POST", f"{NS}/secrets", {"metadata": {"name": "s"}})
        assert (code, body["message"]) == (
            500,
            'Internal error occurred: failed calling webhook "missing.example.com": failed to call '
            'webhook: Post "https://nohook.default.svc:443/check?timeout=5s": service "nohook" not found',
        )


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.test.aiokcm.io"},
    "spec": {
        "group": "test.aiokcm.io",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "kind": "Gadget"},
        "versions": [
            {
                "name": version,
                "served": True,
                "storage": version == "v1",
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
            for version in ("v1", "v1beta1")
        ],
    },
}


async def test_match_policy_equivalent_sends_another_versions_request_in_the_version_the_rule_names(
    api: tuple[LocalCluster, KubeClient],
) -> None:
    local, kube = api
    assert (await raw(kube, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD))[0] == 201
    await eventually(
        lambda: local.registry.get("test.aiokcm.io", "v1beta1", "gadgets") is not None,
        "the gadgets resource served",
    )
    async with webhook_server() as webhook:
        config = webhook.configuration("gadgets", resources=["gadgets"])
        config["webhooks"][0]["rules"][0].update(apiGroups=["test.aiokcm.io"], apiVersions=["v1"])
        assert (await raw(kube, "POST", VWC, config))[0] == 201
        path = "/apis/test.aiokcm.io/v1beta1/namespaces/default/gadgets"
        body = {"apiVersion": "test.aiokcm.io/v1beta1", "kind": "Gadget", "metadata": {"name": "g1"}}
        assert (await raw(kube, "POST", path, body))[0] == 201
        request = webhook.reviews[-1]["request"]
        assert (request["kind"], request["resource"]) == (
            {"group": "test.aiokcm.io", "version": "v1", "kind": "Gadget"},
            {"group": "test.aiokcm.io", "version": "v1", "resource": "gadgets"},
        )
        assert (request["requestKind"], request["requestResource"]) == (
            {"group": "test.aiokcm.io", "version": "v1beta1", "kind": "Gadget"},
            {"group": "test.aiokcm.io", "version": "v1beta1", "resource": "gadgets"},
        )
        assert request["object"]["apiVersion"] == "test.aiokcm.io/v1"

        code, _, _ = await raw(
            kube,
            "PATCH",
            f"{VWC}/gadgets",
            [{"op": "add", "path": "/webhooks/0/matchPolicy", "value": "Exact"}],
            content_type="application/json-patch+json",
        )
        assert code == 200
        assert (await raw(kube, "POST", path, {**body, "metadata": {"name": "g2"}}))[0] == 201
        assert len(webhook.reviews) == 1


async def test_kubectl_applies_lists_and_deletes_configurations(
    api: tuple[LocalCluster, KubeClient], tmp_path: Any
) -> None:
    local, _ = api
    async with webhook_server() as webhook:
        manifest = tmp_path / "vwc.yaml"
        manifest.write_text(yaml.safe_dump(webhook.configuration("applied", resources=["configmaps"])))
        code, out, err = await kubectl(local, "apply", "-f", str(manifest))
        assert (
            code == 0 and "validatingwebhookconfiguration.admissionregistration.k8s.io/applied created" in out
        ), err
        code, out, err = await kubectl(
            local, "apply", "-f", str(manifest)
        )  # the defaulted rule scope makes it "configured"
        assert code == 0, err
        code, out, err = await kubectl(
            local, "get", "validatingwebhookconfiguration", "applied", "-o", "jsonpath={.metadata.generation}"
        )
        assert (code, out) == (0, "1"), err  # re-applied, not changed
        code, out, err = await kubectl(local, "get", "validatingwebhookconfigurations")
        assert code == 0, err
        header, row = out.splitlines()
        assert header.split() == ["NAME", "WEBHOOKS", "AGE"] and row.split()[:2] == ["applied", "1"]
        code, out, err = await kubectl(local, "create", "configmap", "judged")
        assert code == 0 and len(webhook.reviews) == 1, err
        code, out, err = await kubectl(local, "delete", "validatingwebhookconfiguration", "applied")
        assert code == 0, err


async def test_a_slow_webhook_never_holds_up_other_requests(api: tuple[LocalCluster, KubeClient]) -> None:
    _, kube = api
    async with webhook_server() as webhook:
        webhook.delay = 30.0
        assert (
            await raw(
                kube,
                "POST",
                VWC,
                webhook.configuration("slow", resources=["configmaps"], failure_policy="Ignore", timeout=30),
            )
        )[0] == 201
        held = asyncio.create_task(raw(kube, "POST", f"{NS}/configmaps", {"metadata": {"name": "held"}}))
        await eventually(lambda: len(webhook.reviews) > 0, "a review")
        code, listed, _ = await raw(kube, "GET", f"{NS}/configmaps")
        assert code == 200 and not held.done()
        assert "held" not in [c["metadata"]["name"] for c in listed["items"]]
        assert (await raw(kube, "DELETE", f"{VWC}/slow"))[0] == 200
        held.cancel()
        with pytest.raises(asyncio.CancelledError):
            await held


async def test_decoding_warnings_come_once_and_before_the_webhooks(
    api: tuple[LocalCluster, KubeClient],
) -> None:
    _, kube = api
    async with webhook_server() as webhook:
        webhook.answer = lambda _request: {"allowed": True, "warnings": ["from the webhook"]}
        assert (await raw(kube, "POST", VWC, webhook.configuration("warn", resources=["configmaps"])))[
            0
        ] == 201
        code, _, headers = await raw(
            kube,
            "POST",
            f"{NS}/configmaps",
            {"metadata": {"name": "c"}, "bogus": 1},
            query={"fieldValidation": "Warn"},
        )
        assert code == 201
        assert headers.getall("Warning") == ['299 - "unknown field \\"bogus\\""', '299 - "from the webhook"']
        code, body, _ = await raw(
            kube,
            "POST",
            f"{NS}/configmaps",
            {"metadata": {"name": "d"}, "bogus": 1},
            query={"fieldValidation": "Strict"},
        )
        assert code == 400 and "bogus" in body["message"] and len(webhook.reviews) == 1
