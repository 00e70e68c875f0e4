"""What the replacement surge may leave on pods, for the tests to find none of it afterwards."""

from __future__ import annotations

from apiclient import KubeClient
from apiclient.resources import PODS
from controllers.replacementsurge.copies import POD_DELETION_COST, PREVIOUS_COST_ANNOTATION, REPLACES_LABEL


async def leftovers(kube: KubeClient, namespace: str) -> list[str]:
    """Copies, and deletion costs or remembered costs, on any pod of `namespace`."""
    found = []
    for pod in await kube.list_all(PODS, namespace=namespace):
        meta = pod["metadata"]
        if REPLACES_LABEL in (meta.get("labels") or {}):
            found.append(f"copy {meta['name']}")
        annotations = meta.get("annotations") or {}
        if POD_DELETION_COST in annotations or PREVIOUS_COST_ANNOTATION in annotations:
            found.append(f"deletion cost on {meta['name']}")
    return found
