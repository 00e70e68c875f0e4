"""No secret reaches the logs: not in JSON, not in text, at no verbosity, on no error path.

A request's locals hold its `Authorization` header, so an exception rendered with local
variables (structlog's default dict tracebacks, rich's console tracebacks) printed the bearer
token. Driven here through the real paths: a controller worker failing on a dropped connection
and on a bug, an API error, and a library logging through the standard library.
"""

from __future__ import annotations

import logging

import pytest
import structlog
from kubernetes_asyncio import client as k8s_client

from apiclient import KubeClient
from apiclient.resources import PODS
from controller_manager import logging as manager_logging
from controllers.base import Controller
from controllers.context import ControllerContext
from informers import SharedInformerFactory
from tests.manager.logcapture import CapturedStream, restore_logging  # noqa: F401 - autouse fixture

TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXNlcnZpY2UtYWNjb3VudC10b2tlbg.QUJDREVGR0hJSktMTU5PUA"
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAsecretkeymaterial\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    "text",
    [f"{{'authorization': 'Bearer {TOKEN}'}}", f"Authorization: Bearer {TOKEN}", f"token: {TOKEN}",
     f'"token": "{TOKEN}"', f"client-key-data: {TOKEN}", PRIVATE_KEY, f"GET ...?access_token&Bearer%20{TOKEN}"],
)
def test_each_secret_shape_is_redacted(text: str) -> None:
    redacted = manager_logging.redact_text(text)
    assert TOKEN not in redacted
    assert "secretkeymaterial" not in redacted


class _Failing(Controller):
    name = "failing"
    default_workers = 1

    def __init__(self, ctx: ControllerContext, failure: str) -> None:
        super().__init__(ctx)
        self.failure = failure

    async def sync(self, key: str) -> None:
        headers = {"authorization": f"Bearer {TOKEN}"}  # a local, as in the client's request frames
        if self.failure == "connection":
            await self.client.get(PODS, "web", namespace="default")  # nothing listens: a connection error
        if self.failure == "bug":
            raise ValueError(f"sent {headers} with key {PRIVATE_KEY}")


def _client_to_nowhere() -> KubeClient:
    configuration = k8s_client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: connection refused
    configuration.api_key = {"authorization": f"Bearer {TOKEN}"}
    return KubeClient(k8s_client.ApiClient(configuration=configuration), qps=0, burst=1, request_timeout=2)


@pytest.mark.parametrize("log_format", ["json", "text"])
@pytest.mark.parametrize("failure", ["connection", "bug"])
async def test_error_paths_never_log_the_token(log_format: str, failure: str) -> None:
    stream = CapturedStream()
    manager_logging.configure(log_format=log_format, verbosity=10, stream=stream)
    client = _client_to_nowhere()
    try:
        controller = _Failing(ControllerContext(client=client, informers=SharedInformerFactory(client)), failure)
        await controller.process("default/web")
        structlog.get_logger().exception("unexpected", request_headers={"Authorization": f"Bearer {TOKEN}"},
                                         kubeconfig=f"users:\n- user:\n    token: {TOKEN}\n")
        logging.getLogger("aiohttp.client").warning("request failed: headers=%s", {"Authorization": f"Bearer {TOKEN}"})
    finally:
        await client.close()
    output = stream.everything()
    assert "sync failed, requeueing" in output  # the error path was taken and logged
    assert TOKEN not in output
    assert "secretkeymaterial" not in output
    if failure == "connection":
        assert "Traceback" not in output.split("unexpected")[0]  # a dropped connection is one line


async def test_a_dropped_connection_is_an_error_not_a_panic() -> None:
    from controllers import metrics

    client = _client_to_nowhere()
    try:
        controller = _Failing(ControllerContext(client=client, informers=SharedInformerFactory(client)), "connection")
        before = metrics.RECONCILE_PANICS.labels("failing")._value.get()
        await controller.process("default/web")
        assert metrics.RECONCILE_PANICS.labels("failing")._value.get() == before
    finally:
        await client.close()
