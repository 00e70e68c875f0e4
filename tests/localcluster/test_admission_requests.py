"""What the webhooks are sent and when, on both backends: reviews of updates, patches and
deletes, dry runs, generated names, warnings, namespace and object selectors, and the
configurations themselves never being judged (so a broken webhook can always be removed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from apiclient import KubeClient
from tests.localcluster.helpers import bare_cluster
from tests.localcluster.test_admission_webhooks import NS, VWC, deny, raw, register, unregister, until_called
from tests.localcluster.webhookserver import WebhookServer, webhook_server

cluster = pytest.fixture(bare_cluster)
pytestmark = pytest.mark.backends("local", "real")


@pytest.fixture
async def webhook() -> AsyncIterator[WebhookServer]:
    async with webhook_server() as server:
        yield server


def _plain(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """An object without managedFields (the local cluster keeps none)."""
    if obj is None:
        return None
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}


async def test_updates_patches_and_deletes_send_the_new_and_the_old_object(
    cluster: Any, kube: KubeClient, webhook: WebhookServer
) -> None:
    await register(
        kube, webhook.configuration("cm", resources=["configmaps"], operations=["CREATE", "UPDATE", "DELETE"])
    )
    try:
        code, created, _ = await until_called(
            webhook, lambda: raw(kube, "POST", f"{NS}/configmaps", {"metadata": {"generateName": "cm-"}})
        )
        assert code == 201
        name = created["metadata"]["name"]
        review = webhook.reviews[-1]["request"]
        assert review["name"] == name  # the generated one
        stored = _plain(created) or {}
        assert _plain(review["object"]) == {
            **stored,
            "metadata": {k: v for k, v in stored["metadata"].items() if k != "resourceVersion"},
        }

        code, _, _ = await raw(
            kube, "PUT", f"{NS}/configmaps/{name}", {"metadata": {"name": name}, "data": {"k": "v"}}
        )
        assert code == 200
        review = webhook.reviews[-1]["request"]
        assert (review["operation"], review["name"], review["options"]) == (
            "UPDATE",
            name,
            {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"},
        )
        assert _plain(review["oldObject"]) == _plain(created)
        assert review["object"]["data"] == {"k": "v"}
        assert review["object"]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

        code, patched, _ = await raw(
            kube,
            "PATCH",
            f"{NS}/configmaps/{name}",
            {"data": {"k": "w"}},
            query={"dryRun": "All"},
            content_type="application/merge-patch+json",
        )
        assert code == 200 and patched["data"] == {"k": "w"}
        review = webhook.reviews[-1]["request"]
        assert (review["operation"], review["dryRun"], review["options"]) == (
            "UPDATE",
            True,
            {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"]},
        )
        assert review["object"]["data"] == {"k": "w"} and review["oldObject"]["data"] == {"k": "v"}

        code, _, _ = await raw(kube, "DELETE", f"{NS}/configmaps/{name}")
        assert code == 200
        review = webhook.reviews[-1]["request"]
        assert (review["operation"], review["object"], review["options"]) == (
            "DELETE",
            None,
            {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"},
        )
        assert review["oldObject"]["data"] == {"k": "v"}
        # what a dry run left alone was judged, and nothing else
        assert [r["request"]["operation"] for r in webhook.reviews] == [
            "CREATE",
            "UPDATE",
            "UPDATE",
            "DELETE",
        ]
    finally:
        await unregister(kube, "cm")


async def test_warnings_are_returned_and_a_denied_write_stores_nothing(
    cluster: Any, kube: KubeClient, webhook: WebhookServer
) -> None:
    webhook.answer = lambda request: (
        {"allowed": True, "warnings": ["first", "second"]}
        if request["object"]["metadata"].get("name", "").startswith("ok-")
        else {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": "not this one"}}
    )
    await register(kube, webhook.configuration("warn", resources=["configmaps"]))
    try:
        # A generated name: a create the real server stored before its informer saw the webhook
        # must not turn the repeat into a 409.
        code, _, headers = await until_called(
            webhook, lambda: raw(kube, "POST", f"{NS}/configmaps", {"metadata": {"generateName": "ok-"}})
        )
        assert code == 201
        assert headers.getall("Warning") == ['299 - "first"', '299 - "second"']
        code, body, _ = await raw(kube, "POST", f"{NS}/configmaps", {"metadata": {"name": "refused"}})
        assert (code, body["reason"], body["message"]) == (
            403,
            "Forbidden",
            'admission webhook "warn.example.com" denied the request: not this one',
        )
        assert (await raw(kube, "GET", f"{NS}/configmaps/refused"))[0] == 404
    finally:
        await unregister(kube, "warn")


async def test_namespace_and_object_selectors_choose_the_requests(
    cluster: Any, kube: KubeClient, webhook: WebhookServer
) -> None:
    for ns, labels in (("judged", {"webhooks": "on"}), ("unjudged", {})):
        await raw(kube, "POST", "/api/v1/namespaces", {"metadata": {"name": ns, "labels": labels}})
    await register(
        kube,
        webhook.configuration(
            "sel",
            resources=["configmaps"],
            operations=["CREATE", "UPDATE"],
            namespaceSelector={"matchLabels": {"webhooks": "on"}},
            objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
        ),
    )
    try:
        path = "/api/v1/namespaces/judged/configmaps"
        await until_called(webhook, lambda: raw(kube, "POST", path, {"metadata": {"generateName": "probe-"}}))
        seen = len(webhook.reviews)
        assert (
            await raw(kube, "POST", "/api/v1/namespaces/unjudged/configmaps", {"metadata": {"name": "a"}})
        )[0] == 201
        assert (await raw(kube, "POST", path, {"metadata": {"name": "skipped", "labels": {"skip": "yes"}}}))[
            0
        ] == 201
        assert len(webhook.reviews) == seen
        # an update that removes the label is judged: the new object matches even if the old did not
        code, _, _ = await raw(
            kube, "PUT", f"{path}/skipped", {"metadata": {"name": "skipped"}, "data": {"a": "b"}}
        )
        assert code == 200 and len(webhook.reviews) == seen + 1
    finally:
        await unregister(kube, "sel")


async def test_configurations_themselves_are_never_sent_to_webhooks(
    cluster: Any, kube: KubeClient, webhook: WebhookServer
) -> None:
    everything = webhook.configuration("all", resources=["*"], operations=["*"])
    everything["webhooks"][0]["rules"][0]["apiGroups"] = ["*"]
    webhook.answer = lambda _request: {"allowed": False}
    await register(kube, everything)
    try:
        code, body, _ = await until_called(
            webhook, lambda: raw(kube, "POST", f"{NS}/configmaps", {"metadata": {"name": "c"}})
        )
        assert code == 400, body
        code, body, _ = await raw(kube, "PUT", f"{VWC}/all", {**everything, "metadata": {"name": "all"}})
        assert (code, body["message"]) == (
            422,
            'validatingwebhookconfigurations.admissionregistration.k8s.io "all" is invalid: '
            "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
        )
        current = (await raw(kube, "GET", f"{VWC}/all"))[1]
        code, body, _ = await raw(kube, "PUT", f"{VWC}/all", current)
        assert code == 200, body
    finally:
        await unregister(kube, "all")
    assert (await raw(kube, "GET", f"{VWC}/all"))[0] == 404


async def test_scale_writes_are_updates_of_a_scale(
    cluster: Any, kube: KubeClient, webhook: WebhookServer
) -> None:
    rs = {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
            },
        },
    }
    assert (await raw(kube, "POST", "/apis/apps/v1/namespaces/default/replicasets", rs))[0] == 201
    webhook.answer = deny({"code": 403, "message": "frozen"})
    await register(
        kube, webhook.configuration("scale", resources=["replicasets/scale"], operations=["UPDATE"])
    )
    try:
        path = "/apis/apps/v1/namespaces/default/replicasets/web/scale"

        async def scale_to_three() -> Any:
            result = await raw(
                kube, "PATCH", path, {"spec": {"replicas": 3}}, content_type="application/merge-patch+json"
            )
            if 200 <= result[0] <= 299:
                # The real server's webhook informer had not seen the configuration yet, so the scale
                # went through: put it back (through the main resource, which the webhook does not
                # watch) before trying again, so the review's old object is the ReplicaSet as created.
                await raw(
                    kube,
                    "PATCH",
                    "/apis/apps/v1/namespaces/default/replicasets/web",
                    {"spec": {"replicas": 1}},
                    content_type="application/merge-patch+json",
                )
            return result

        code, body, _ = await until_called(webhook, scale_to_three)
        assert (code, body["message"]) == (
            403,
            'admission webhook "scale.example.com" denied the request: frozen',
        )
        request = webhook.reviews[-1]["request"]
        assert (request["kind"], request["resource"], request["subResource"], request["operation"]) == (
            {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            {"group": "apps", "version": "v1", "resource": "replicasets"},
            "scale",
            "UPDATE",
        )
        assert (request["object"]["spec"], request["oldObject"]["spec"]) == ({"replicas": 3}, {"replicas": 1})
        assert (await raw(kube, "GET", "/apis/apps/v1/namespaces/default/replicasets/web"))[1]["spec"][
            "replicas"
        ] == 1
    finally:
        await unregister(kube, "scale")


async def test_what_is_stored_is_what_the_webhook_judged(
    cluster: Any, kube: KubeClient, webhook: WebhookServer
) -> None:
    await register(
        kube, webhook.configuration("svc", resources=["services"], operations=["CREATE", "UPDATE"])
    )
    try:
        service = {"metadata": {"generateName": "np-"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}
        code, stored, _ = await until_called(webhook, lambda: raw(kube, "POST", f"{NS}/services", service))
        assert code == 201, stored
        judged = webhook.reviews[-1]["request"]["object"]
        for path in (("metadata", "name"), ("metadata", "uid"), ("spec", "clusterIP")):
            assert stored[path[0]][path[1]] == judged[path[0]][path[1]], path
        assert stored["spec"]["ports"][0]["nodePort"] == judged["spec"]["ports"][0]["nodePort"]

        name = stored["metadata"]["name"]
        patch = {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "b"}]},
        }
        code, updated, _ = await raw(
            kube, "PATCH", f"{NS}/services/{name}", patch, content_type="application/merge-patch+json"
        )
        assert code == 200, updated
        judged = webhook.reviews[-1]["request"]["object"]
        assert [p["nodePort"] for p in updated["spec"]["ports"]] == [
            p["nodePort"] for p in judged["spec"]["ports"]
        ]
        assert updated["metadata"]["labels"] == {"a": "b"}
    finally:
        await unregister(kube, "svc")
