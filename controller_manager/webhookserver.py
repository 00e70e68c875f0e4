"""The admission webhook port: HTTPS, one POST route per webhook a controller offers.

Apart from the secure port because its caller differs: the API server calls admission webhooks
with no bearer token (a webhook's authentication is the caBundle the API server verifies our
certificate against), so the delegated authentication of `/metrics` does not apply here, and
nothing but the webhook routes is served on it.

A controller offers a webhook by having a `webhook_path` and a synchronous `review(body)` that
answers from its caches: the handler never awaits the API server, so its latency is the JSON
parse and the cache lookups. Counted with controller-runtime's webhook metric names.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio
import orjson
import structlog
from aiohttp import web
from anyio.abc import TaskStatus
from prometheus_client import Counter, Gauge, Histogram

log = structlog.get_logger()

REQUESTS = Counter(
    "controller_runtime_webhook_requests_total",
    "Total number of admission requests by HTTP status code.",
    ["webhook", "code"],
)
LATENCY = Histogram(
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests",
    ["webhook"],
)
IN_FLIGHT = Gauge(
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served.",
    ["webhook"],
)
# An AdmissionReview of an Eviction is a few KiB; the API server's own limit on webhook bodies is 3 MiB.
MAX_BODY = 3 * 1024 * 1024


@runtime_checkable
class AdmissionWebhook(Protocol):
    webhook_path: str

    def review(self, body: Mapping[str, Any]) -> dict[str, Any]: ...


def build_app(webhooks: Sequence[AdmissionWebhook]) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY)
    for webhook in webhooks:
        app.router.add_post(webhook.webhook_path, _handler(webhook))
    return app


def _handler(webhook: AdmissionWebhook) -> Any:
    path = webhook.webhook_path

    async def handle(request: web.Request) -> web.Response:
        with IN_FLIGHT.labels(path).track_inprogress(), LATENCY.labels(path).time():
            try:
                body = orjson.loads(await request.read())
            except orjson.JSONDecodeError:
                REQUESTS.labels(path, "400").inc()
                return web.Response(status=400, text="the body is not an AdmissionReview\n")
            if not isinstance(body, dict):
                REQUESTS.labels(path, "400").inc()
                return web.Response(status=400, text="the body is not an AdmissionReview\n")
            answer = webhook.review(body)
            REQUESTS.labels(path, "200").inc()
            return web.Response(body=orjson.dumps(answer), content_type="application/json")

    return handle


async def serve(
    webhooks: Sequence[AdmissionWebhook],
    *,
    host: str,
    port: int,
    tls: ssl.SSLContext,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; reports the bound port through `task_status` (`tg.start`)."""
    runner = web.AppRunner(build_app(webhooks), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=tls)
        await site.start()
        bound = port
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            bound = int(sockets[0].getsockname()[1])
        log.info(
            "serving admission webhooks", address=host, port=bound, paths=[w.webhook_path for w in webhooks]
        )
        task_status.started(bound)
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()
