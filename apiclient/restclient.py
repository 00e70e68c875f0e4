"""kubernetes_asyncio's `ApiClient`, its REST client made on a session this package built.

The stock constructor makes a `RESTClientObject`, which builds an SSL context from
`configuration.ssl_ca_cert` (with no file named, the system's whole trust store: about 27 ms of CPU)
and an aiohttp session on it, both replaced at once by `apiclient.tls`'s context and session. The
manager builds a client per controller, the CLI one per command and tests hundreds: here the REST
client is made on the final session and no trust store is parsed to be thrown away.

Its User-Agent is aiokcm's own, in client-go's `DefaultUserAgent` shape (`<program>/<version>
(<os>/<arch>)`), where the generated one named the OpenAPI generator; `KubeClient` appends each
controller's name to it, as KCM's clients append theirs.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio.client import rest


class SessionRESTClient(rest.RESTClientObject):
    """`RESTClientObject`'s request code on `session`."""

    def __init__(self, configuration: k8s_client.Configuration, session: aiohttp.ClientSession) -> None:
        # Not the parent's constructor: building the context and session replaced here is its whole job.
        # Its stubs type these as set; the constructor copies them from the configuration, None included.
        self.server_hostname = configuration.tls_server_name  # type: ignore[assignment]
        self.proxy = configuration.proxy  # type: ignore[assignment]
        self.proxy_headers = configuration.proxy_headers  # type: ignore[assignment]
        self.pool_manager = session


class SessionApiClient(k8s_client.ApiClient):
    """`ApiClient` as its generated constructor leaves it, with `rest_client` on `session`
    (tests/manager/test_api_client_construction.py holds the two to the same attributes)."""

    def __init__(self, configuration: k8s_client.Configuration, session: aiohttp.ClientSession) -> None:
        self.configuration = configuration
        self.pool_threads = 1
        self.rest_client = SessionRESTClient(configuration, session)
        self.default_headers: dict[str, str] = {}
        self.cookie = None  # type: ignore[assignment]  # as the generated constructor's default
        self.user_agent = USER_AGENT
        self.client_side_validation = configuration.client_side_validation


def _user_agent() -> str:
    try:
        version = metadata.version("aiokcm")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"aiokcm/{version} ({sys.platform}/{platform.machine().lower() or 'unknown'})"


USER_AGENT = _user_agent()
