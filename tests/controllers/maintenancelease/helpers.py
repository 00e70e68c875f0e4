"""What the maintenance-lease tests share: lease reads, and every request a client sends, recorded.

`ClientRequests` records at the client's REST layer, as `tests/e2e/world.ClientWrites` does for the
manager's writes, but reads too, and with the event loop's clock: under looptime the pace of the
creates is read off the virtual clock, and a restart is shown to send nothing but lists and watches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio

from apiclient import ApiError, KubeClient
from apiclient.resources import LEASES, NODES
from controllers import features
from nodemaintenancelease import lease

LEASE_GATES = {features.NODE_MAINTENANCE_LEASE: True}
LEASES_PATH = f"/namespaces/{lease.NAMESPACE}/leases"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Request:
    at: float  #: the event loop's clock when it was sent (virtual under looptime)
    method: str
    url: str
    query: dict[str, str]
    status: str

    @property
    def lease_create(self) -> bool:
        return self.method == "POST" and self.url.endswith(LEASES_PATH)

    @property
    def list_or_watch(self) -> bool:
        """A GET of a collection the controller's informers read: the nodes, the maintenance leases."""
        return self.method == "GET" and self.url.endswith(("/api/v1/nodes", LEASES_PATH))


class ClientRequests:
    """Every request `client` sends from now on, recorded at its REST layer."""

    def __init__(self, client: KubeClient) -> None:
        self.requests: list[Request] = []
        rest: Any = client.api_client.rest_client
        original = rest.request

        async def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            at = anyio.current_time()
            query = {str(k): str(v) for k, v in kwargs.get("query_params") or []}
            status = "<error>"
            try:
                response = await original(method, url, *args, **kwargs)
                status = str(getattr(response, "status", "<error>"))
                return response
            finally:
                self.requests.append(Request(at, method.upper(), url, query, status))

        rest.request = request

    @property
    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method in WRITES]

    @property
    def lease_creates(self) -> list[Request]:
        return [r for r in self.requests if r.lease_create]


async def get_lease(kube: KubeClient, node: str) -> dict[str, Any] | None:
    return await kube.get_or_none(LEASES, node, namespace=lease.NAMESPACE)


async def node_names(kube: KubeClient) -> list[str]:
    return sorted(n["metadata"]["name"] for n in await kube.list_all(NODES))


async def leases_by_node(kube: KubeClient) -> dict[str, dict[str, Any]]:
    try:
        listed = await kube.list_all(LEASES, namespace=lease.NAMESPACE)
    except ApiError as exc:
        if exc.not_found:
            return {}
        raise
    return {str(obj["metadata"]["name"]): obj for obj in listed}


async def every_node_leased(kube: KubeClient) -> dict[str, dict[str, Any]]:
    """Each node's lease by node name, once every node has one; {} until then."""
    leases = await leases_by_node(kube)
    return leases if set(await node_names(kube)) <= set(leases) else {}


async def delete_lease(kube: KubeClient, node: str) -> None:
    try:
        await kube.delete(LEASES, node, namespace=lease.NAMESPACE)
    except ApiError as exc:
        if not exc.not_found:
            raise
