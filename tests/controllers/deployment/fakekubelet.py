"""A stand-in for the scheduler and kubelets, until the local cluster runs its own.

`FakeKubelet.run()` (in the test's task group) polls the pods of one namespace: it binds every
pending pod to the schedulable node with the fewest pods (cordoned nodes are skipped, as the
scheduler would), marks it Running and Ready unless its image is in `broken_images` or readiness
is held (`hold_readiness`), and finishes graceful deletions. `AvailabilitySampler` counts Ready,
non-terminating pods of an app as often as it can and remembers the minimum, so evacuation tests
check availability all along rather than only at the end.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio

from apiclient import ApiError, KubeClient
from apiclient.resources import NODES, PODS
from controllers.common.pods import is_pod_ready, is_terminating
from kubeutil.timestamps import format_time, utcnow


class FakeKubelet:
    def __init__(
        self, kube: KubeClient, namespace: str, *, broken_images: frozenset[str] = frozenset()
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.broken_images = set(broken_images)
        self.hold_readiness = False

    async def run(self) -> None:
        while True:
            await self.step()
            await anyio.sleep(0.03)

    async def step(self) -> None:
        pods = await self.kube.list_all(PODS, namespace=self.namespace)
        nodes = [n for n in await self.kube.list_all(NODES) if not (n.get("spec") or {}).get("unschedulable")]
        load = Counter((p.get("spec") or {}).get("nodeName") for p in pods)
        for pod in pods:
            try:
                await self._handle(pod, nodes, load)
            except ApiError as exc:
                if not (exc.not_found or exc.conflict):
                    raise

    async def _handle(self, pod: dict[str, Any], nodes: list[dict[str, Any]], load: Counter[Any]) -> None:
        name = pod["metadata"]["name"]
        if is_terminating(pod):
            await self.kube.delete(PODS, name, namespace=self.namespace, grace_period_seconds=0)
            return
        if not pod["spec"].get("nodeName"):
            if not nodes:
                return
            node = min(nodes, key=lambda n: (load[n["metadata"]["name"]], n["metadata"]["name"]))["metadata"][
                "name"
            ]
            load[node] += 1
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name},
                "target": {"kind": "Node", "name": node},
            }
            await self.kube.create(PODS, binding, namespace=self.namespace, name=name, subresource="binding")
        if is_pod_ready(pod) or self.hold_readiness:
            return
        images = {c.get("image") for c in pod["spec"].get("containers") or ()}
        if images & self.broken_images:
            return
        now = format_time(utcnow())
        status = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        }
        await self.kube.patch(
            PODS,
            name,
            {"status": status},
            namespace=self.namespace,
            subresource="status",
            patch_type="strategic",
        )


class AvailabilitySampler:
    """Continuously counts available (Ready, not terminating) pods of `app`; keeps the minimum."""

    def __init__(self, kube: KubeClient, namespace: str, app: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.app = app
        self.minimum: int | None = None
        self.samples = 0

    async def count(self) -> int:
        pods = await self.kube.list_all(PODS, namespace=self.namespace, label_selector=f"app={self.app}")
        return sum(1 for p in pods if is_pod_ready(p) and not is_terminating(p))

    async def run(self) -> None:
        while True:
            n = await self.count()
            self.samples += 1
            self.minimum = n if self.minimum is None else min(self.minimum, n)
            await anyio.sleep(0.005)
