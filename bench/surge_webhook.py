"""bench.drain's third mode: aiokcm's eviction webhook, served to the cluster under test.

The webhook is the manager's (`controller_manager.webhookserver` serving the eviction-surge
controller's `review`), with a pair generated in memory and registered by URL: the configuration
of deploy/webhook.yaml, its `clientConfig` pointing at this process. Whether the cluster calls it
at all is checked with a dry-run eviction (webhooks with `sideEffects: NoneOnDryRun` see dry
runs), so a cluster without admission webhooks is reported as such instead of passing for a
surge that never happened.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import yaml
from anyio.abc import TaskStatus
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from apiclient import ApiError, KubeClient
from apiclient.resources import PODS, VALIDATINGWEBHOOKCONFIGURATIONS
from controller_manager import servingcert, webhookcert, webhookserver

WEBHOOK = Path(__file__).resolve().parents[1] / "deploy" / "webhook.yaml"


class CountingWebhook:
    """The controller's webhook, counting the reviews the cluster sends."""

    def __init__(self, inner: webhookserver.AdmissionWebhook) -> None:
        self.inner = inner
        self.webhook_path = inner.webhook_path
        self.reviews = 0
        self.registered = False

    def review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.reviews += 1
        return self.inner.review(body)


def configuration(url: str, ca_pem: bytes) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(WEBHOOK.read_text()) if d]
    config: dict[str, Any] = copy.deepcopy(
        next(d for d in docs if d["kind"] == "ValidatingWebhookConfiguration")
    )
    for hook in config["webhooks"]:
        hook["clientConfig"] = {"url": url, "caBundle": base64.b64encode(ca_pem).decode()}
    return config


async def serve(
    client: KubeClient,
    controllers: Sequence[object],
    *,
    task_status: TaskStatus[CountingWebhook] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the eviction webhook and register it; report it through `task_status`, serve until cancelled."""
    inner = next(c for c in controllers if isinstance(c, webhookserver.AdmissionWebhook))
    webhook = CountingWebhook(inner)
    pair = servingcert.generate_self_signed(ips=("127.0.0.1",))
    ca = b"".join(
        c.public_bytes(serialization.Encoding.PEM) for c in x509.load_pem_x509_certificates(pair.cert_pem)[1:]
    )
    tls = webhookcert.ReloadableContext()
    tls.load(pair)
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda task_status: webhookserver.serve(
                [webhook], host="127.0.0.1", port=0, tls=tls.context, task_status=task_status
            )
        )
        try:
            await client.create(
                VALIDATINGWEBHOOKCONFIGURATIONS,
                configuration(f"https://127.0.0.1:{port}{webhook.webhook_path}", ca),
            )
            webhook.registered = True
        except ApiError as exc:
            if not exc.not_found:  # a cluster without admissionregistration.k8s.io: reported by `called`
                raise
        task_status.started(webhook)


async def called(
    client: KubeClient, webhook: CountingWebhook, *, namespace: str = "default", timeout: float = 10.0
) -> bool:
    """Whether the cluster sends evictions to the webhook (a dry run of one, retried while the API
    server picks the new configuration up)."""
    pods = await client.list_all(PODS, namespace=namespace)
    if not pods or not webhook.registered:
        return False
    name = pods[0]["metadata"]["name"]
    with anyio.move_on_after(timeout):
        while webhook.reviews == 0:
            try:
                await client.evict(namespace, name, delete_options={"dryRun": ["All"]})
            except ApiError:
                pass
            if webhook.reviews:
                break
            await anyio.sleep(0.2)
    return webhook.reviews > 0
