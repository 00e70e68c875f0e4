"""Pod status writes the controllers share.

A controller that owns a pod condition (`DisruptionTarget`, Ready=False for a lost node) writes
only that condition, so the kubelet's conditions and other writers' stay as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiclient import KubeClient
from apiclient.resources import PODS
from kubeutil.conditions import Condition, pod_condition_patch
from kubeutil.meta import object_meta


async def patch_pod_condition(
    client: KubeClient, pod: Mapping[str, Any], condition: Condition
) -> dict[str, Any]:
    """Set one condition on the pod's `status` subresource (a strategic merge keyed by `type`).

    The patch carries the pod's UID, so a pod deleted and recreated under the same name since the
    cache saw it is refused (Invalid or Conflict) rather than written to.
    """
    meta = object_meta(pod)
    uid = meta.get("uid")
    return await client.patch(
        PODS,
        str(meta.get("name")),
        pod_condition_patch(condition, uid=str(uid) if uid else None),
        namespace=str(meta.get("namespace")),
        subresource="status",
        patch_type="strategic",
    )
