"""No secret reaches the logs: not in JSON, not in text, at no verbosity, on no error path.

A request's locals hold its `Authorization` header, so an exception rendered with local
variables (structlog's default dict tracebacks, rich's console tracebacks) printed the bearer
token. Driven here through the real paths, in both formats at debug verbosity: a controller
worker failing on a dropped connection, on a 401, on a 500 (whose body echoes the request's
headers, as a misbehaving proxy's does), on a request that times out, and on a bug; an API
error; and a library logging through the standard library.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
import structlog
import yaml
from aiohttp import web

from apiclient import KubeClient
from apiclient.config import build_api_client
from apiclient.resources import PODS
from controller_manager import logging as manager_logging
from controllers.base import Controller
from controllers.context import ControllerContext
from informers import SharedInformerFactory
from tests.manager.logcapture import CapturedStream, restore_logging  # noqa: F401 - autouse fixture

TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXNlcnZpY2UtYWNjb3VudC10b2tlbg.QUJDREVGR0hJSktMTU5PUA"
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAsecretkeymaterial\n-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    "text",
    [
        f"{{'authorization': 'Bearer {TOKEN}'}}",
        f"Authorization: Bearer {TOKEN}",
        f"token: {TOKEN}",
        f'"token": "{TOKEN}"',
        f"client-key-data: {TOKEN}",
        PRIVATE_KEY,
        f"GET ...?access_token&Bearer%20{TOKEN}",
    ],
)
def test_each_secret_shape_is_redacted(text: str) -> None:
    redacted = manager_logging.redact_text(text)
    assert TOKEN not in redacted
    assert "secretkeymaterial" not in redacted


class _Failing(Controller):
    def __init__(self, ctx: ControllerContext, failure: str) -> None:
        super().__init__(ctx, name="failing", workers=1)
        self.failure = failure

    async def sync(self, key: str) -> None:
        headers = {"authorization": f"Bearer {TOKEN}"}  # a local, as in the client's request frames
        if self.failure != "bug":
            await self.client.get(PODS, "web", namespace="default")  # fails as the server makes it fail
        if self.failure == "bug":
            raise ValueError(f"sent {headers} with key {PRIVATE_KEY}")


async def _client_to(
    tmp_path: Path, server: str = "http://127.0.0.1:9"
) -> KubeClient:  # 9: connection refused
    """A client built as the manager builds it, from a kubeconfig whose user has the token."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "users": [{"name": "u", "user": {"token": TOKEN}}],
            }
        )
    )
    return KubeClient(await build_api_client(kubeconfig=str(kubeconfig)), qps=0, burst=1, request_timeout=0.5)


@asynccontextmanager
async def _api_answering(failure: str, seen: list[str]) -> AsyncIterator[str]:
    """An API server that answers every request with `failure`: a 401, a 500 echoing the request's
    headers, or nothing until the client gives up. `seen` gets each request's Authorization."""
    done = anyio.Event()

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if failure == "timeout":
            with anyio.move_on_after(10):
                await done.wait()
        code = 401 if failure == "401" else 500
        echoed = f"upstream refused the request with headers {dict(request.headers)}"
        return web.json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": code,
                "reason": "Unauthorized" if code == 401 else "InternalError",
                "message": "Unauthorized" if code == 401 else echoed,
            },
            status=code,
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        done.set()
        await runner.cleanup()


@pytest.mark.parametrize("verbosity", [2, 10])
@pytest.mark.parametrize("log_format", ["json", "text"])
@pytest.mark.parametrize("failure", ["connection", "401", "500", "timeout", "bug"])
async def test_error_paths_never_log_the_token(
    log_format: str, failure: str, verbosity: int, tmp_path: Path
) -> None:
    stream = CapturedStream()
    manager_logging.configure(log_format=log_format, verbosity=verbosity, stream=stream)
    seen: list[str] = []
    async with _api_answering(failure, seen) as url:
        answered = failure in ("401", "500", "timeout")
        await _fail_and_log(
            await _client_to(tmp_path, url) if answered else await _client_to(tmp_path), failure
        )
    assert seen == ([f"Bearer {TOKEN}"] if answered else [])  # the token went out with the request
    output = stream.everything()
    assert "sync failed, requeueing" in output  # the error path was taken and logged
    assert TOKEN not in output
    assert TOKEN.split(".")[2] not in output  # nor the signature alone
    assert "secretkeymaterial" not in output
    if failure != "bug":
        assert "Traceback" not in output.split("unexpected")[0]  # an API failure is one line
    if failure == "500":
        assert "upstream refused the request" in output  # the echoed body was logged, redacted


async def _fail_and_log(client: KubeClient, failure: str) -> None:
    try:
        controller = _Failing(
            ControllerContext(client=client, informers=SharedInformerFactory(client)), failure
        )
        await controller.process("default/web")
        structlog.get_logger().exception(
            "unexpected",
            request_headers={"Authorization": f"Bearer {TOKEN}"},
            kubeconfig=f"users:\n- user:\n    token: {TOKEN}\n",
        )
        logging.getLogger("aiohttp.client").warning(
            "request failed: headers=%s", {"Authorization": f"Bearer {TOKEN}"}
        )
    finally:
        await client.close()


async def test_a_dropped_connection_is_an_error_not_a_panic(tmp_path: Path) -> None:
    from controllers import metrics

    client = await _client_to(tmp_path)
    try:
        controller = _Failing(
            ControllerContext(client=client, informers=SharedInformerFactory(client)), "connection"
        )
        before = metrics.RECONCILE_PANICS.labels("failing")._value.get()
        await controller.process("default/web")
        assert metrics.RECONCILE_PANICS.labels("failing")._value.get() == before
    finally:
        await client.close()
