"""A small validating webhook for tests: HTTPS on the loopback with a CA of its own, recording
every AdmissionReview it gets and answering as the test says (allow, deny with a status, be slow)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from controller_manager.servingcert import CertKey, generate_self_signed, server_context

Answer = Callable[[dict[str, Any]], dict[str, Any]]


def allow(_request: dict[str, Any]) -> dict[str, Any]:
    return {"allowed": True}


@dataclass
class WebhookServer:
    url: str
    port: int
    ca_pem: bytes
    reviews: list[dict[str, Any]] = field(default_factory=list)
    answer: Answer = allow
    delay: float = 0.0
    #: The AdmissionReview apiVersion to answer with (None: the one the review came in).
    answer_version: str | None = None

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca_pem).decode()

    def configuration(
        self,
        name: str,
        *,
        resources: list[str],
        operations: list[str] | None = None,
        failure_policy: str = "Fail",
        timeout: int = 5,
        path: str = "/validate",
        **extra: Any,
    ) -> dict[str, Any]:
        """A ValidatingWebhookConfiguration with one webhook (`name`.example.com) sent here by URL."""
        hook: dict[str, Any] = {
            "name": f"{name}.example.com",
            "clientConfig": {"url": self.url + path, "caBundle": self.ca_bundle},
            "rules": [
                {
                    "operations": operations or ["CREATE"],
                    "apiGroups": ["*"],
                    "apiVersions": ["*"],
                    "resources": resources,
                }
            ],
            "failurePolicy": failure_policy,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": timeout,
            **extra,
        }
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [hook],
        }


def _ca_of(chain: bytes) -> bytes:
    end = b"-----END CERTIFICATE-----"
    return chain[chain.index(end) + len(end) :].strip() + b"\n"


@functools.cache
def _serving_pair(hosts: tuple[str, ...]) -> CertKey:
    """One CA and certificate per process and host set: two RSA keys cost about 0.1 s of CPU, and
    no test tells two servers' CAs apart (one the caBundle does not vouch for is the system's)."""
    return generate_self_signed("127.0.0.1", dns=hosts)


@asynccontextmanager
async def webhook_server(*, hosts: tuple[str, ...] = ()) -> AsyncIterator[WebhookServer]:
    """Serve a webhook on 127.0.0.1 with a certificate for 127.0.0.1 (and `hosts`, DNS names)."""
    pair = _serving_pair(hosts)
    hook = WebhookServer("", 0, _ca_of(pair.cert_pem))
    closing = asyncio.Event()  # a slow answer ends when the server does, so no handler outlives it

    async def handle(request: web.Request) -> web.Response:
        review = await request.json()
        hook.reviews.append({"path": request.path_qs, "host": request.headers.get("Host", ""), **review})
        if hook.delay:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(closing.wait(), hook.delay)
        response = {"uid": review["request"]["uid"], **hook.answer(review["request"])}
        return web.json_response(
            {
                "apiVersion": hook.answer_version or review["apiVersion"],
                "kind": "AdmissionReview",
                "response": response,
            }
        )

    app = web.Application()
    app.router.add_post("/{path:.*}", handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context(pair))
    await site.start()
    hook.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    hook.url = f"https://127.0.0.1:{hook.port}"
    try:
        yield hook
    finally:
        closing.set()
        await runner.cleanup()
