"""The projection guard catches what it exists to catch: shown with a controller that misbehaves.

Every controller suite runs on guarded caches (`conftest.projection_guard`); these tests prove
the guard fails a controller that reads a field the manager's projection drops, mutates a
cached object or PUTs a projected object back, and that it lets deep copies and allowed reads
through.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import orjson
import pytest

from apiclient import KubeClient
from apiclient.resources import NODES, PODS
from controllers.base import Controller
from controllers.context import ControllerContext
from informers import PROJECTIONS, ResourceEventHandler, meta_key, split_key
from tests.support.objects import pod
from tests.support.waiting import eventually

from .harness import running_controllers
from .projectionguard import Guard, GuardedTransforms, ProjectionViolation

NS = "default"


def _pod(name: str) -> dict[str, Any]:
    return pod(name, namespace=NS, labels={"app": "guard"}, node="node-1", image="registry.k8s.io/pause:3.10")


class _PodReader(Controller):
    """Reads each pod from the lister through `read`, as a controller's sync would."""

    read: ClassVar[Any] = None

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx, name="pod-reader", workers=1)
        self.pods = ctx.informers.informer(PODS)
        self.pods.add_event_handler(ResourceEventHandler(on_add=lambda p: self.enqueue(meta_key(p))))
        self.seen: list[Any] = []

    async def sync(self, key: str) -> None:
        namespace, name = split_key(key)
        pod = self.pods.lister.get(name, namespace)
        if pod is not None:
            self.seen.append(type(self).read(pod))


async def _run_reader(kube: KubeClient, read: Any, guard: Guard, name: str) -> list[Any]:
    reader = type("Reader", (_PodReader,), {"read": staticmethod(read)})
    await kube.create(PODS, _pod(name), namespace=NS)
    async with running_controllers(kube, lambda ctx: reader(ctx)) as h:
        controller = h.controllers[0]
        assert isinstance(controller, _PodReader)
        await eventually(lambda: controller.seen or guard.violations, "the pod read (or refused)")
        return controller.seen


async def test_reading_a_dropped_pod_field_fails_the_test(kube: KubeClient, projection_guard: Guard) -> None:
    await _run_reader(kube, lambda pod: pod["spec"].get("containers"), projection_guard, "reads-containers")
    # A violation raises in the sync, so the worker may retry it and record it again: what counts
    # is which violations were seen, not how often.
    assert set(projection_guard.violations) == {"read of dropped field Pod.spec.containers"}
    projection_guard.violations.clear()  # the failure this test exists to show, not one of its own


async def test_mutating_a_cached_pod_fails_the_test(kube: KubeClient, projection_guard: Guard) -> None:
    def mutate(pod: dict[str, Any]) -> None:
        shallow = dict(pod)  # a shallow copy shares the cached sub-objects
        shallow["metadata"]["labels"]["x"] = "y"

    await _run_reader(kube, mutate, projection_guard, "mutates")
    assert set(projection_guard.violations) == {"mutation of cached Pod.metadata.labels (__setitem__)"}
    projection_guard.violations.clear()


async def test_projected_reads_and_deep_copies_pass(kube: KubeClient, projection_guard: Guard) -> None:
    def read(pod: dict[str, Any]) -> Any:
        mine = copy.deepcopy(pod)
        mine["metadata"]["labels"]["x"] = "y"
        return (
            pod["spec"]["nodeName"],
            "ownerReferences" in pod["metadata"],
            orjson.loads(orjson.dumps(pod))["kind"],
        )

    seen = await _run_reader(kube, read, projection_guard, "reads-fine")
    assert seen == [("node-1", False, "Pod")]
    assert projection_guard.violations == []


async def test_put_of_a_projected_object_fails_the_test(kube: KubeClient, projection_guard: Guard) -> None:
    created = await kube.create(PODS, _pod("put"), namespace=NS)
    await kube.replace(PODS, created, namespace=NS)
    assert projection_guard.violations == ["PUT of a Pod (projected in the cache): write it with a patch"]
    projection_guard.violations.clear()


def test_node_guard_refuses_only_what_the_node_projection_drops() -> None:
    guard = Guard()
    transform = GuardedTransforms(guard)(NODES)
    node = transform(
        {
            "metadata": {"name": "n", "managedFields": []},
            "spec": {"taints": []},
            "status": {"images": [{"names": ["a"]}], "conditions": []},
        }
    )
    assert node["spec"]["taints"] == [] and node["status"]["conditions"] == []
    assert "images" not in dict(node["status"])
    with pytest.raises(ProjectionViolation):
        node["status"].get("images")
    assert guard.violations == ["read of dropped field Node.status.images"]
    assert PROJECTIONS[NODES] is not None
