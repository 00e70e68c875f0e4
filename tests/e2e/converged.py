"""What "converged" means for the workload controllers, read from a fresh LIST (never a cache)."""

from __future__ import annotations

from typing import Any

from apiclient import KubeClient
from apiclient.resources import PODS, REPLICASETS


def _active(pod: dict[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


async def replica_set_mismatches(
    kube: KubeClient, namespace: str | None = None
) -> dict[str, tuple[int, int]]:
    """ReplicaSets whose active pods (by controller reference) differ from `spec.replicas`:
    `namespace/name -> (wanted, have)`. Empty when every ReplicaSet has exactly its pods."""
    owned: dict[str, int] = {}
    for pod in await kube.list_all(PODS, namespace=namespace):
        if not _active(pod):
            continue
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "ReplicaSet":
                owned[ref["uid"]] = owned.get(ref["uid"], 0) + 1
    out: dict[str, tuple[int, int]] = {}
    for rs in await kube.list_all(REPLICASETS, namespace=namespace):
        wanted, have = int(rs["spec"].get("replicas", 1)), owned.get(rs["metadata"]["uid"], 0)
        if wanted != have:
            out[f"{rs['metadata']['namespace']}/{rs['metadata']['name']}"] = (wanted, have)
    return out
