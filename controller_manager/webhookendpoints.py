"""The webhook Service routes to the leader only: the leader writes the Service's Endpoints.

Only the leader has caches to answer from (a standby builds no controllers), so a Service
selecting every replica would send some evictions to a standby that refuses the connection, and
those would pass unreviewed (failurePolicy Ignore). As kube-apiserver keeps the `kubernetes`
Service's endpoints, the Service has no selector and the leader writes its Endpoints with its own
address (`--webhook-advertise-address`, the pod IP from the downward API); a new leader overwrites
them when it takes over. The EndpointSlice mirroring controller carries them to kube-proxy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from apiclient import ApiError, KubeClient
from apiclient.resources import ENDPOINTS

log = structlog.get_logger()

PORT_NAME = "webhook"


def subsets(address: str, port: int) -> list[dict[str, Any]]:
    return [{"addresses": [{"ip": address}], "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}]


async def advertise(client: KubeClient, *, namespace: str, service: str, address: str, port: int) -> None:
    """Point `namespace/service` at `address:port` (create or update; nothing when already so)."""
    wanted = subsets(address, port)
    try:
        current: Mapping[str, Any] | None = await client.get(ENDPOINTS, service, namespace=namespace)
    except ApiError as exc:
        if not exc.not_found:
            raise
        current = None
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": service, "namespace": namespace, "labels": {"app.kubernetes.io/name": "aiokcm"}},
        "subsets": wanted,
    }
    if current is None:
        await client.create(ENDPOINTS, body, namespace=namespace)
    elif current.get("subsets") != wanted:
        body["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
        await client.replace(ENDPOINTS, body, namespace=namespace, name=service)
    else:
        return
    log.info(
        "webhook service points at this leader", service=f"{namespace}/{service}", address=address, port=port
    )
