"""The node lifecycle controller's writes, shared by its loops: taint swaps and pods marked not ready.

Every loop that taints a node goes through one swap, so a node's taints are always written as one
diff guarded by the resourceVersion it was computed from, whichever loop decided it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apiclient import ApiError, KubeClient
from apiclient.resources import NODES
from controllers.common.pods import get_pod_condition
from controllers.common.podstatus import patch_pod_condition
from controllers.context import EventRecorder
from informers import Lister
from kubeutil.meta import object_meta
from kubeutil.taints import Taint, node_taints, swap_taints
from kubeutil.timestamps import format_time, utcnow

SWAP_RETRIES = 5


@dataclass(kw_only=True, eq=False)
class NodeWrites:
    """Writes to nodes and their pods, reading the node cache first."""

    client: KubeClient
    node_lister: Lister
    recorder: EventRecorder

    async def swap_node_taints(self, name: str, add: Sequence[Taint], remove: Sequence[Taint]) -> bool:
        """Add and remove taints in one write (`SwapNodeControllerTaint`); False if the node is gone.

        The patch carries the resourceVersion it was computed from; on a conflict the node is
        read again and the diff recomputed, up to five times.
        """
        stamp = format_time(utcnow())
        stamped = [{**t, "timeAdded": stamp} for t in add]
        node: Mapping[str, Any] | None = self.node_lister.get(name)
        for attempt in range(SWAP_RETRIES):
            if node is None:
                return False
            new = swap_taints(node_taints(node), stamped, remove)
            if new is None:
                return True
            patch = {
                "metadata": {"resourceVersion": object_meta(node).get("resourceVersion")},
                "spec": {"taints": new or None},
            }
            try:
                await self.client.patch(NODES, name, patch)
                return True
            except ApiError as exc:
                if exc.not_found:
                    return False
                if not exc.conflict or attempt == SWAP_RETRIES - 1:
                    raise
            node = await self.client.get_or_none(NODES, name)  # None: gone, answered at the loop's top
        return False

    async def mark_pods_not_ready(self, pods: Sequence[Mapping[str, Any]], node_name: str) -> None:
        """`MarkPodsNotReady`: Ready=False on each pod of the node (status subresource), one event each.

        A pod already gone (404) is skipped; any other failure is raised after the rest were
        tried (the caller retries the node next pass), its event recorded all the same, as KCM does.
        """
        errors: list[ApiError] = []
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") != node_name:
                continue
            ready = get_pod_condition(dict(pod), "Ready")
            if ready is None or ready.get("status") == "False":
                continue
            condition = {**ready, "status": "False", "lastTransitionTime": format_time(utcnow())}
            try:
                await patch_pod_condition(self.client, pod, condition)
            except ApiError as exc:
                if exc.not_found:
                    continue
                errors.append(exc)
            self.recorder.event(pod, "Warning", "NodeNotReady", "Node is not ready")
        if errors:
            raise errors[0]

    async def add_or_update_labels(self, name: str, labels: Mapping[str, str]) -> None:
        """`AddOrUpdateLabelsOnNode`: set these labels on the node, leaving the others alone."""
        await self.client.patch(NODES, name, {"metadata": {"labels": dict(labels)}})
