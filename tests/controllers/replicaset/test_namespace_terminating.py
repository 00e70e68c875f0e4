"""A create refused because the namespace is terminating is not a failure (as KCM's `HasStatusCause`)."""

from __future__ import annotations

import pytest

from apiclient import ApiError, KubeClient
from apiclient.resources import NAMESPACES, PODS
from controllers.replicaset.sync import _namespace_terminating
from tests.support.objects import pod
from tests.support.waiting import eventually


def _pod(name: str, *, finalizers: list[str] | None = None) -> dict[str, object]:
    return pod(
        name, container="app", image="nginx", metadata={"finalizers": finalizers} if finalizers else None
    )


async def test_the_servers_namespace_terminating_refusal_is_recognised(kube: KubeClient) -> None:
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}})
    # A finalizer holds a pod, so the namespace stays Terminating while we try to create in it.
    await kube.create(PODS, _pod("held", finalizers=["test.aiokcm.io/hold"]), namespace="doomed")
    await kube.delete(NAMESPACES, "doomed")

    async def terminating() -> bool:
        ns = await kube.get(NAMESPACES, "doomed")
        return (ns.get("status") or {}).get("phase") == "Terminating"

    await eventually(terminating, "namespace doomed terminating")
    with pytest.raises(ApiError) as refused:
        await kube.create(PODS, _pod("late"), namespace="doomed")
    assert refused.value.status == 403
    assert _namespace_terminating(refused.value)

    other = ApiError(403, {"reason": "Forbidden", "details": {"causes": [{"reason": "FieldValueForbidden"}]}})
    assert not _namespace_terminating(other)
    await kube.patch(PODS, "held", {"metadata": {"finalizers": None}}, namespace="doomed")
